"""stridewise.testing.accuracy, the float64 rule for unordered accumulation, on its own: what it
accepts (native itself, a reordered sum, a few ulps where native is exact) and what it reports
(a lost or doubled term, a misplaced one, a shape change). The e2e use is in
tests/test_e2e_scatter.py (also with a planted aten::scatter_add_).

Seeds: conftest's seed fixture.
"""
from __future__ import annotations

import torch

from stridewise.testing import accuracy


def _case(g, n=4000, rows=50):
    """A float32 scatter_add of n random terms into rows, its float64 reference, and the same
    sum in another order (the terms permuted): two valid unordered results."""
    src = torch.randn(n, generator=g)
    idx = torch.randint(0, rows, (n,), generator=g)
    ref = torch.zeros(rows, dtype=torch.float64).index_add_(0, idx, src.double())
    a = torch.zeros(rows).index_add_(0, idx, src)
    p = torch.randperm(n, generator=g)
    b = torch.zeros(rows).index_add_(0, idx[p], src[p])
    return src, idx, ref, a, b


def test_accepts_native_and_a_reordered_sum(seed):
    g = torch.Generator().manual_seed(seed)
    src, idx, ref, a, b = _case(g)
    assert accuracy.float64_problem("x", a, a, ref) is None
    assert accuracy.float64_problem("x", b, a, ref) is None
    assert accuracy.unordered("cuda") and accuracy.unordered("cuda:1") and not accuracy.unordered("cpu")


def test_reports_a_lost_doubled_or_misplaced_term(seed):
    g = torch.Generator().manual_seed(seed)
    src, idx, ref, a, b = _case(g)
    k = int(torch.randint(0, src.numel(), (1,), generator=g))
    lost = a.clone()
    lost[idx[k]] -= src[k]
    doubled = a.clone()
    doubled[idx[k]] += src[k]
    moved = lost.clone()
    moved[(idx[k] + 1) % a.numel()] += src[k]
    for what, bad in (("lost", lost), ("doubled", doubled), ("misplaced", moved)):
        p = accuracy.float64_problem(what, bad, a, ref)
        assert p and p.startswith(f"{what}: further from the float64 reference than native allows"), (what, p)


def test_the_floor_and_the_shape(seed):
    g = torch.Generator().manual_seed(seed)
    ref = torch.randn(64, generator=g, dtype=torch.float64)
    native = ref.float()  # correctly rounded: err(native) <= eps / 2
    ulps = native + native.abs() * 2 * torch.finfo(torch.float32).eps  # 2 ulps off everywhere
    assert accuracy.float64_problem("x", ulps, native, ref) is None
    far = native.clone()
    far[int(ref.abs().argmax())] *= 1 + 64 * torch.finfo(torch.float32).eps
    assert accuracy.float64_problem("x", far, native, ref)
    assert "vs native" in accuracy.float64_problem("x", native[:3], native, ref)


def test_complex_errors_count_the_imaginary_part(seed):
    """A wrong imaginary part is an error (a float64 cast would drop it, and with it the check)."""
    g = torch.Generator().manual_seed(seed)
    ref = torch.randn(50, dtype=torch.complex128, generator=g)
    x = ref.to(torch.complex64)
    assert accuracy.scaled_error(x, ref) < 1e-6
    bad = x.clone()
    bad[7] = complex(bad[7].real.item(), bad[7].imag.item() + 1.0)
    assert accuracy.scaled_error(bad, ref) > 0.1
    assert accuracy.float64_problem("z", bad, x, ref) is not None
