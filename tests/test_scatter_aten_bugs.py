"""ATen bugs our audit found in the scatter family must not exist in stridewise.

aten-cpu-expanded-index-scatter (python/stridewise/audit/known.py): ATen's CPU fast path for
an expanded (GNN-style) index writes src rows contiguously into self when self is larger than
the index on a dim >= 1. The reference here is an explicit Python loop over the index, so the
check does not depend on any scatter kernel.
"""
from __future__ import annotations

import itertools

import pytest
import torch

from conftest import DEVICES


def _loop_reference(self_, dim, index, src, combine):
    out = self_.clone()
    for pos in itertools.product(*[range(s) for s in index.shape]):
        tgt = list(pos)
        tgt[dim] = int(index[pos])
        cur = out[tuple(tgt)]
        out[tuple(tgt)] = combine(cur, src[pos])
    return out


CASES = {
    # The minimal repro from known.py, then the same pattern with random values and a
    # reduce, in both index dtypes (the fast path takes int64 and, in torch 2.13, int32).
    # (self, dim, index base, its expanded shape, src): the index is expanded on the device,
    # since .to(device) of an expanded tensor makes it contiguous.
    "repro": lambda g, it: (torch.zeros(2, 64, 4), 0, torch.zeros(1, 1, 1, dtype=it), (1, 64, 3),
                            torch.ones(1, 64, 3)),
    "random": lambda g, it: (torch.randn(5, 48, 7, generator=g), 0,
                             torch.randint(0, 5, (9, 1, 1), generator=g).to(it), (9, 40, 6),
                             torch.randn(9, 40, 6, generator=g)),
}


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("index_dtype", [torch.int64, torch.int32], ids=["i64", "i32"])
@pytest.mark.parametrize("case", sorted(CASES))
@pytest.mark.parametrize("op", ["scatter_add", "scatter_reduce_sum", "scatter_reduce_amax"])
def test_expanded_index_fast_path_bug_is_absent(sw, op, case, index_dtype, device, seed):
    g = torch.Generator().manual_seed(seed)
    self_, dim, base, shape, src = CASES[case](g, index_dtype)
    index = base.expand(shape)
    if op == "scatter_add":
        combine, call = (lambda a, b: a + b), (lambda s, i, x: s.scatter_add(dim, i, x))
    elif op == "scatter_reduce_sum":
        combine, call = (lambda a, b: a + b), (lambda s, i, x: s.scatter_reduce(dim, i, x, "sum"))
    else:
        combine, call = torch.maximum, (lambda s, i, x: s.scatter_reduce(dim, i, x, "amax"))
    want = _loop_reference(self_, dim, index, src, combine)
    s_d, i_d, x_d = self_.to(device), base.to(device).expand(shape), src.to(device)
    sw.reset_stats()
    with sw.use(include=["scatter_add", "scatter_reduce"]):
        got = call(s_d, i_d, x_d)
    sw.check_errors(True)
    key = "scatter_add" if op == "scatter_add" else "scatter_reduce"
    st = sw.stats()[key]
    assert st["calls"] == 1 and st["expanded_index"] == 1 and st["fallback"] == 0, st
    torch.testing.assert_close(got.cpu(), want, rtol=1e-6, atol=1e-6)
