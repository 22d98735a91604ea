"""The audit under compute-sanitizer (stridewise.testing.sanitizer: the device script's
STRIDEWISE_SANITIZER contract, and the ATen kernels memcheck flags whatever they compute).

Under memcheck on CUDA, a case whose call ATen's own kernel would run (no --backend; or
--run-native and the backend registers no kernel for its variant) and whose kernel memcheck
flags (known.sanitizer_flagged: aten-cuda-narrow-atomic-cas) is not run: memcheck would report
ATen's invalid access, the worker's context would be lost, and the case would read as a crash of
whatever ran it. It is reported with status ``known`` (reason ``not-run-sanitizer``, the issue
named in ``known_issue`` and the detail); the native CPU oracle computed its expected values, and
the report's ``oracle`` field says that nothing was compared with a device run. Cases the
backend runs are run as usual: its own kernels are what is audited (a backend kernel with the
same bug is its finding).
"""
from __future__ import annotations

from ..testing import sanitizer
from . import known, oracle
from .results import CaseResult


def not_run_under_sanitizer(runner, cases, results: list) -> list:
    """The cases to run; the others become results (see the module docstring)."""
    tool = sanitizer.sanitizer()
    if runner.device_type != "cuda" or not sanitizer.memcheck_active():
        return list(cases)
    todo = []
    for c in cases:
        if c.kind == "large":
            todo.append(c)
            continue
        if runner.cfg.backend:
            probe = CaseResult(c, oracle.Verdict("native", "", ""))
            if runner.coverage:
                runner._attribute(probe, probe=True)
            if probe.ran_by != "native":
                todo.append(c)
                continue
        built, ref, feats, err = runner.prepare(c)
        k = known.sanitizer_flagged(c.op, runner.device_type, built) if built is not None and not err else None
        if k is None:
            todo.append(c)
            continue
        runner.prep.pop(c.id, None)
        v = oracle.Verdict("known", "not-run-sanitizer", (
            f"known issue {k.name}: not run on {runner.device_type} under compute-sanitizer {tool}: "
            f"ATen's own kernel for this case accesses past an allocation there (memcheck would "
            f"report it and the context would be lost); the native CPU oracle's expected values "
            f"were not compared with a device run"))
        res = CaseResult(c, v, feats, known=k.name, built=built, ref=ref,
                         ran_by="native" if runner.cfg.backend else None,
                         oracle=f"native CPU only (the device run skipped under {tool})")
        results.append(res)
        if runner.progress:
            runner.progress(res)
    return todo
