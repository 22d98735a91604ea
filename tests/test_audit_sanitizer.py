"""The audit under compute-sanitizer memcheck (python/stridewise/audit/sanitize.py), on the CPU:
the runner's device type is set to 'cuda' after it starts (its workers stay on the CPU), so the
decision that on the H200 keeps ATen's flagged CUDA kernels (aten-cuda-narrow-atomic-cas) from
running under memcheck is taken here with CPU workers.

- no backend (auditing ATen): every flagged case is reported known / not-run-sanitizer, names
  the issue, records its oracle, and never reaches a worker; every other case runs and passes;
  without STRIDEWISE_SANITIZER nothing changes
- with a backend: its own op runs (its kernel is what is audited); a variant it does not register
  run with --run-native is skipped like ATen's
- the known issue's predicate is the testing module's (one definition)

Seeds: STRIDEWISE_SEED when set, else random per run (printed on failure).
"""
from __future__ import annotations

import json
import os
import random

import pytest
import torch

from conftest import ROOT

from stridewise import schemas  # noqa: E402
from stridewise.audit import cli, gen, known, runner  # noqa: E402
from stridewise.audit.caseid import parse_case_id  # noqa: E402
from stridewise.audit.specs import SPECS  # noqa: E402
from stridewise.testing import sanitizer  # noqa: E402

SEED = int(os.environ.get("STRIDEWISE_SEED") or random.SystemRandom().randrange(1, 10**6)) % 10**6
PLANTED = ROOT / "tests" / "planted_backend"
ARGS = ("--matrix", "quick", "--ranks", "1,2", "--dtypes", "uint8,int16,bool,float32", "--jobs", "2")


@pytest.fixture
def as_cuda(monkeypatch):
    """Runners started from here believe their device is CUDA (workers run on the CPU)."""
    init = runner.Runner.__init__

    def fake(self, *a, **kw):
        init(self, *a, **kw)
        self.device_type = "cuda"

    monkeypatch.setattr(runner.Runner, "__init__", fake)


def audit(tmp_path, *args):
    out = tmp_path / f"a{len(list(tmp_path.iterdir()))}"
    out.mkdir()
    rc = cli.main([*map(str, args), "--json", str(out / "r.json"), "--no-repros", "--no-progress",
                   "--seed", str(SEED), "-q"])
    rep = json.loads((out / "r.json").read_text())
    schemas.validate(rep, schemas.AUDIT_REPORT, str(out / "r.json"))
    return rc, rep


def _flagged(case_id: str) -> bool:
    op = case_id.split("/")[0]
    s = SPECS[op]
    built = gen.build(s, parse_case_id(case_id, s.operands + ("out",), tuple(s.params)))
    return known.sanitizer_flagged(op, "cuda", built) is not None


def ctx(rep) -> str:
    return f"STRIDEWISE_SEED={SEED} summary={rep['summary']} sanitizer={rep.get('sanitizer')}"


def test_an_audit_of_aten_under_memcheck_runs_no_flagged_case(tmp_path, monkeypatch, as_cuda):
    monkeypatch.setenv(sanitizer.ENV, "memcheck")
    rc, rep = audit(tmp_path, "--ops", "scatter_add,scatter_reduce,scatter.src", *ARGS)
    assert rc == 0 and rep["sanitizer"] == "memcheck", ctx(rep)
    status = dict(map(tuple, rep["cases"]))
    known_ids = {c for c, s in status.items() if s == "known"}
    assert known_ids and len(known_ids) < len(status), ctx(rep)
    assert {c for c in status if _flagged(c)} == known_ids, ctx(rep)  # exactly the flagged ones
    assert not any(c.startswith("scatter.src/") for c in known_ids), ctx(rep)  # copies never
    assert set(status.values()) <= {"pass", "known", "skip", "unsupported"}, ctx(rep)
    worker_ran = set(rep["timing"]["case_worker"])
    assert not (known_ids & worker_ran), ctx(rep)  # never handed to a worker
    fails = {f["id"]: f for f in rep["failures"]}
    for c in known_ids:
        f = fails[c]
        assert f["reason"] == "not-run-sanitizer" and f["known_issue"] == sanitizer.ISSUE, f
        assert f["oracle"] == "native CPU only (the device run skipped under memcheck)", f
        assert f["detail"].startswith(f"known issue {sanitizer.ISSUE}: not run on cuda under "
                                      "compute-sanitizer memcheck"), f
    # the same audit without the sanitizer: every case runs
    monkeypatch.delenv(sanitizer.ENV)
    monkeypatch.delenv("CUDA_INJECTION64_PATH", raising=False)
    rc, rep = audit(tmp_path, "--ops", "scatter_add,scatter_reduce,scatter.src", *ARGS)
    assert rc == 0 and rep["sanitizer"] is None and rep["summary"]["known"] == 0, ctx(rep)


def test_with_a_backend_only_native_runs_are_skipped(tmp_path, monkeypatch, as_cuda):
    """The planted backend (no fault) registers scatter_add: its cases run under memcheck, flagged
    or not; scatter_reduce is native: with --run-native its flagged cases are not run."""
    monkeypatch.setenv(sanitizer.ENV, "memcheck")
    rc, rep = audit(tmp_path, "--ops", "scatter_add,scatter_reduce", *ARGS, "--run-native",
                    "--backend", f"{PLANTED}:enable(none, scatter_add)")
    status = dict(map(tuple, rep["cases"]))
    add = {c: s for c, s in status.items() if c.startswith("scatter_add/")}
    red = {c: s for c, s in status.items() if c.startswith("scatter_reduce/")}
    assert any(_flagged(c) for c in add) and "known" not in add.values(), ctx(rep)
    assert {c for c, s in red.items() if s == "known"} == {c for c in red if _flagged(c)} != set(), ctx(rep)
    assert all(f["ran_by"] == "native" for f in rep["failures"] if f["status"] == "known"), ctx(rep)


def test_the_known_issue_uses_the_one_predicate():
    k = next(x for x in known.KNOWN if x.name == sanitizer.ISSUE)
    assert k.ops == sanitizer.OPS and k.devices == ("cuda",) and k.reasons == ("crash",)
    s = SPECS["scatter_add"]
    for n, flagged in ((210, True), (212, False)):
        cid = f"scatter_add/self=contiguous/r1/uint8/i64/s{SEED}"
        built = gen.build(s, parse_case_id(cid, s.operands + ("out",), tuple(s.params)))
        one = torch.zeros(n, dtype=torch.uint8)
        built.tensors["self"] = one
        assert (known.sanitizer_flagged("scatter_add", "cuda", built) is not None) == flagged, n
        assert known.sanitizer_flagged("scatter_add", "cpu", built) is None
