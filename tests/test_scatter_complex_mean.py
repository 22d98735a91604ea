"""scatter_reduce(..., "mean") of complex tensors on the CPU: ATen's result, run by the core (it
used to be handed to ATen: the `complex_mean` rule, 16 calls of PyTorch's
test_scatter_gather_ops.py; docs/fallbacks.md).

ATen divides every position of out by its count as complex numbers (c10::complex's division by
n + 0i: the reciprocal first, so not re / n), and the positions no index value reaches by 1 + 0i,
which turns -0 into +0 and an infinite or NaN part of one component into a NaN in the other.
Compared per component with native: the same bits, except which NaN a NaN position holds (sign
and payload: IEEE leaves open which of two NaN operands propagates, and ATen's choice follows
its compiler's contraction and operand order). Index per element (the line walk), shared (the
segment path), smaller than self in the other dims (positions beyond every line), empty;
transposed self; functional, in place and out= (poisoned); values with infinities, NaNs and
signed zeros. Fresh random values every run.
"""
from __future__ import annotations

import pytest
import torch

from stridewise.audit.specs import gather_layouts as specs

DTYPES = [torch.complex64, torch.complex128]
SPECIALS = [float("inf"), -float("inf"), float("nan"), -0.0, 0.0]


def _values(shape, dtype, g):
    r = torch.randn(*shape, 2, generator=g, dtype=torch.float64)
    flat = r.view(-1)
    n = flat.numel()
    if n >= 5:
        k = torch.randint(0, n, (n // 5,), generator=g)
        flat[k] = torch.tensor(SPECIALS, dtype=torch.float64)[torch.randint(0, 5, (n // 5,), generator=g)]
    return torch.view_as_complex(r).to(dtype)


def _case(kind, dtype, g):
    if kind == "transposed":
        self_t = _values((9, 7), dtype, g).t()
    else:
        self_t = _values((7, 9), dtype, g)
    if kind == "per-element":
        idx, src = torch.randint(0, 7, (5, 9), generator=g), _values((5, 9), dtype, g)
    elif kind == "shared":
        idx, src = torch.randint(0, 7, (5, 1), generator=g).expand(5, 9), _values((5, 9), dtype, g)
    elif kind in ("narrow", "transposed"):
        idx, src = torch.randint(0, 7, (4, 5), generator=g), _values((6, 8), dtype, g)[:, 1:6]
    elif kind == "empty":
        idx, src = torch.zeros(0, 9, dtype=torch.long), _values((0, 9), dtype, g)
    else:  # an index empty along another dim
        idx, src = torch.zeros(3, 0, dtype=torch.long), _values((3, 0), dtype, g)
    return self_t, idx, src


def _differ(got, want, what):
    """None when the components hold the same bits, or a NaN each."""
    if got.shape != want.shape or got.dtype != want.dtype:
        return f"{what}: {got.shape} {got.dtype} vs {want.shape} {want.dtype}"
    return specs.nan_tolerant_mismatch(torch.view_as_real(got.contiguous()),
                                       torch.view_as_real(want.contiguous()), what)


@pytest.mark.parametrize("kind", ["per-element", "shared", "narrow", "transposed", "empty",
                                  "empty-other-dim"])
@pytest.mark.parametrize("include_self", [True, False])
@pytest.mark.parametrize("dtype", DTYPES, ids=specs.dtype_name)
def test_complex_mean_is_atens(sw, seed, dtype, include_self, kind):
    g = torch.Generator().manual_seed(seed)
    self_t, idx, src = _case(kind, dtype, g)
    with specs.native():
        want = self_t.scatter_reduce(0, idx, src, "mean", include_self=include_self)
    st0 = sw.stats()["scatter_reduce"]
    with sw.use(include=["scatter_reduce"]):
        got = self_t.scatter_reduce(0, idx, src, "mean", include_self=include_self)
        inplace = self_t.clone().scatter_reduce_(0, idx, src, "mean", include_self=include_self)
        out = specs.poison(list(self_t.shape), dtype)
        torch.scatter_reduce(self_t, 0, idx, src, "mean", include_self=include_self, out=out)
    st1 = sw.stats()["scatter_reduce"]
    assert st1["fallback"] == st0["fallback"], st1
    for what, t in (("functional", got), ("in place", inplace), ("out=", out)):
        m = _differ(t, want, f"seed {seed} {what}")
        assert m is None, m


@pytest.mark.parametrize("shapes", [((0,), (2, 2)), ((0, 3), (4,)), ((0,), (3, 3, 3))],
                         ids=["1d-index", "wider-index", "3d-src"])
@pytest.mark.parametrize("dtype", DTYPES, ids=specs.dtype_name)
def test_empty_index_of_any_shape(sw, seed, dtype, shapes):
    """ATen checks no shape for an empty index (PyTorch's _test_scatter_base passes a 1-D one
    with 2-D operands) and still divides every position by 1 + 0i."""
    g = torch.Generator().manual_seed(seed)
    idx = torch.zeros(shapes[0], dtype=torch.long)
    src = _values(shapes[1], dtype, g)
    self_t = _values((2, 2), dtype, g)
    with specs.native():
        want = self_t.clone().scatter_reduce_(0, idx, src, "mean")
    with sw.use(include=["scatter_reduce"]):
        got = self_t.clone().scatter_reduce_(0, idx, src, "mean")
    m = _differ(got, want, f"seed {seed}")
    assert m is None, m
