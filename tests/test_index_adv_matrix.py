"""Advanced indexing's layout matrix (issue 22), driven by the auditor's specs
(python/stridewise/audit/specs/flat_adv.py: take, put, index.Tensor, index_put, and the unchecked
forms _unsafe_index / _unsafe_index_put that torch.compile's decompositions emit) against
stridewise, with --guard: every operand's storage ends at a guard page, so a read or write one
element past a view faults.

The specs cover every operand (self, each index tensor, values, out=) in every layout class at
ranks 0..8 and 10, every dtype native CPU supports, int32 indices in every index layout,
negative / duplicate / out-of-range values in every index layout (so an expanded negative index,
FlagGems' wrong-value case, is in the matrix), empty dims, and for index.Tensor / index_put the
patterns one index, two adjacent, two separated, a bool mask over one or two dims, and two index
tensors broadcasting together ((p, 1) with (q,)); index_put's values come full, trailing-dim
only or 0-dim (broadcast); accumulate both ways for index_put and put. (uint8 masks go through
Python's frontend as bool; the op-level uint8 mask is tests/test_index_adv.py's.)

One audit per spec. Each must report 0 failures with every variant run by stridewise (the
report's coverage), and stridewise's counters, collected from the audit's workers as
tests/test_scatter_matrix.py does, must show the op ran on stridewise with non-contiguous and
expanded operands counted, no copy made, and the out-of-range cases raised by us.

CPU (CI): the full matrix of each spec (about 4,600 cases, ~25 s on 2 cores). CUDA (skipped
without a GPU): the quick matrix sized down with --limit, in the 'sync' and 'deferred' check
modes. Seeds: STRIDEWISE_SEED (conftest) picks the audit's --seed.

Planted faults (by hand, reverted): the audit's stats backend entered the dispatch-mode
plants of tests/test_index_adv.py's docstring in every worker after stridewise.enable().
wrong: take 302 of 840 cases 'wrong' (bitwise), put 768 of 1533; swallow: take 48 and put 96
'bad-error/missing-error' (the oob cases). Before the adapter registered the ops, every case
was 'native' (run by ATen, not the backend) and the test failed on that.
"""
from __future__ import annotations

import pytest

from conftest import BASE_SEED, CUDA_SKIP, routed_key
from stridewise.audit.specs import SPECS as AUDIT_SPECS
from test_index_dim_matrix import stats_check
from test_scatter_matrix import CUDA_LIMIT, CUDA_RUN, _why, run_audit, stridewise_backend, summed_stats

# Every flat_adv spec of an op the table routes on the k-index core (embedding's is the
# dim-indexed family's): spec -> (stats key, has a values operand, has out=). A new form of
# index / index_put / take / put is in this matrix by its table packet and its audit spec alone.
SPECS = {name: (routed_key(s.aten[0])[0], "src" in s.operands, "out" in s.calls)
         for name, s in AUDIT_SPECS.items()
         if s.family == "flat_adv" and routed_key(s.aten[0])[1] == "IndexK"}


def check(op: str, device: str, st: dict, rep, errors_counted: bool = True) -> list:
    key, has_src, has_out = SPECS[op]
    s = st.get(key)
    if not s:
        return [f"no stridewise stats for {key!r} (workers wrote {sorted(st)})"]
    want = ["calls", device, "noncontig_self", "noncontig_index", "expanded_index"]
    if has_src:
        want.append("noncontig_src")
    elif has_out:
        want.append("noncontig_out")
    if has_src:
        want.append("expanded_src")
    return stats_check(op, key, s, rep, want, errors_counted)


@pytest.mark.parametrize("op", list(SPECS))
def test_cpu_matrix_passes_on_stridewise(sw, tmp_path, op):
    backend, flush, stats_dir = stridewise_backend(tmp_path)
    rc, rep = run_audit(tmp_path, op, "cpu", backend, "--matrix", "full", flush=flush)
    assert rc == 0 and rep["summary"]["failed"] == 0, _why(rep)
    assert rep["summary"]["error"] == 0 and rep["summary"]["crash"] == 0, _why(rep)
    assert rep["ops"][op]["counts"]["native"] == 0, "cases run by ATen, not by the backend: " + _why(rep)
    assert rep["ops"][op]["counts"]["pass"] > 250, _why(rep)
    assert {"contiguous", "expand", "transpose", "step_slice", "offset", "compound"} <= \
        set(rep["ops"][op]["by_layout"]), _why(rep)
    assert rep["guard"] is True
    ids = [c[0] for c in rep["cases"]]
    # the cases the issue names are in the matrix (and passed: failed == 0 above)
    assert any("/i32/" in c for c in ids) and any("idx=expand" in c and "/neg/" in c for c in ids), _why(rep)
    for pat in AUDIT_SPECS[op].params.get("pat", []):  # every pattern the spec names ran
        assert any(f"pat={pat}" in c for c in ids), f"no pat={pat} case: " + _why(rep)
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
