"""The dim-indexed ops' layout matrix, driven by the auditor's specs (audit/specs/index_dim.py and
the embedding spec of audit/specs/flat_adv.py) against stridewise, with --guard: every operand's
storage ends at a guard page, so a read or write one element past a view faults.

One audit per spec: index_select, index_add (alpha 1 and 3), index_copy, index_reduce (each
reduce, include_self both), embedding (func and out=) and index_fill (a Scalar and a 0-dim tensor
value; func, in place, out=). Each must report 0 failures with every
variant run by stridewise (the report's coverage), and stridewise's own counters (collected from
the audit's workers as tests/test_scatter_matrix.py does) must show the op ran on stridewise with
non-contiguous operands counted, no copy made, out-of-range cases raised by us, and ATen's
kernel used only where index_dim.cpp says (index_add with alpha 3, empty self).

CPU (CI): the full matrix of each spec (about 7,000 cases, ~30 s on 2 cores). CUDA (skipped
without a GPU): the quick matrix sized down with --limit, in the 'sync' and 'deferred' check
modes.

Seeds: STRIDEWISE_SEED (conftest) picks the audit's --seed.
"""
from __future__ import annotations

import pytest

from conftest import BASE_SEED, CUDA_SKIP
from test_scatter_matrix import CUDA_LIMIT, CUDA_RUN, _why, run_audit, stridewise_backend, summed_stats

SPECS = {  # spec -> (stats key, has a source operand)
    "index_select": ("index_select", False),
    "index_add": ("index_add", True),
    "index_copy": ("index_copy", True),
    "index_reduce": ("index_reduce", True),
    "embedding": ("embedding", False),
    "index_fill": ("index_fill", False),
    "index_fill.Tensor": ("index_fill", False),  # its 0-dim value: never strided
}


def stats_check(op: str, key: str, s: dict, rep, want: list, errors_counted: bool = True) -> list:
    """What the workers' stats of one op's audit run say against the report: every counter in
    `want` counted, no copy, at least 60% of the passing cases run by our kernels, the
    out-of-range cases raised by us (errors_counted), every variant run by stridewise. Shared
    with test_index_adv_matrix.py."""
    problems = [f"stats[{key!r}][{k!r}] == {s.get(k)}: not counted" for k in want if s.get(k, 0) <= 0]
    if s.get("copies", 0):
        problems.append(f"stats[{key!r}]['copies'] == {s['copies']}: stridewise copied an operand")
    ran = s["calls"] - s.get("fallback", 0)
    passed = rep["ops"][op]["counts"]["pass"]
    if ran < 0.6 * passed:
        problems.append(f"only {ran} of {s['calls']} calls ran stridewise's kernels "
                        f"(fallback {s.get('fallback')}) for {passed} passing cases")
    if errors_counted and s.get("errors", 0) <= 0:
        problems.append(f"stats[{key!r}]['errors'] == 0: the out-of-range cases never reached stridewise")
    cov = rep.get("coverage", {}).get(op, {})
    native = [v for v, c in cov.items() if c.get("ran_by") != "backend"]
    if not cov or native:
        problems.append(f"coverage: variants not run by stridewise: {native or cov}")
    return problems


def check(op: str, device: str, st: dict, rep, errors_counted: bool = True) -> list:
    key, has_src = SPECS[op]
    s = st.get(key)
    if not s:
        return [f"no stridewise stats for {key!r} (workers wrote {sorted(st)})"]
    want = ["calls", device, "noncontig_self", "noncontig_out"]
    if op != "embedding":  # embedding's weight is the spec's self; its out= is rarely strided
        want.append("noncontig_index")
    if has_src:
        want += ["noncontig_src", "expanded_src"]
    return stats_check(op, key, s, rep, want, errors_counted)


@pytest.mark.parametrize("op", list(SPECS))
def test_cpu_matrix_passes_on_stridewise(sw, tmp_path, op):
    backend, flush, stats_dir = stridewise_backend(tmp_path)
    rc, rep = run_audit(tmp_path, op, "cpu", backend, "--matrix", "full", flush=flush)
    assert rc == 0 and rep["summary"]["failed"] == 0, _why(rep)
    assert rep["summary"]["error"] == 0 and rep["summary"]["crash"] == 0, _why(rep)
    assert rep["ops"][op]["counts"]["pass"] > 250, _why(rep)
    assert {"contiguous", "expand", "transpose", "step_slice", "offset", "compound"} <= \
        set(rep["ops"][op]["by_layout"]), _why(rep)
    assert rep["guard"] is True
    st = summed_stats(stats_dir)
    problems = check(op, "cpu", st, rep)
    assert not problems, f"STRIDEWISE_SEED={BASE_SEED} stats={st.get(SPECS[op][0])}\n" + "\n".join(problems)


@CUDA_SKIP
@pytest.mark.parametrize("mode", ["sync", "deferred"])
@pytest.mark.parametrize("op", list(SPECS))
def test_cuda_matrix_passes_on_stridewise(sw, tmp_path, op, mode):
    backend, flush, stats_dir = stridewise_backend(tmp_path, mode)
    rc, rep = run_audit(tmp_path, op, "cuda", backend, "--matrix", "quick", "--limit", CUDA_LIMIT,
                        *CUDA_RUN, flush=flush)
    assert rc == 0 and rep["summary"]["failed"] == 0, _why(rep)
    assert rep["summary"]["device-assert"] == 0 and rep["summary"]["error"] == 0, _why(rep)
    assert rep["ops"][op]["counts"]["pass"] > CUDA_LIMIT // 2, _why(rep)
    st = summed_stats(stats_dir)
    problems = check(op, "cuda", st, rep, errors_counted=(mode == "sync"))
    assert not problems, f"STRIDEWISE_SEED={BASE_SEED} stats={st.get(SPECS[op][0])}\n" + "\n".join(problems)
