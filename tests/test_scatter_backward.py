"""Autograd through the scatter family under stridewise.use(include=[...]): only the CPU/CUDA
kernels are replaced, ATen's derivative formulas stay, so gradients must equal native's.

- CPU: torch.autograd.gradcheck in float64 for scatter (src and value), scatter_add and
  scatter_reduce (sum, prod, mean, amax, amin: the reductions ATen differentiates; include_self
  True and False), with non-contiguous operands; amax/amin inputs hold distinct values (no ties,
  where the derivative is a convention), prod inputs no zeros. The analytical gradients also
  equal native's bitwise (the CPU walks lines in index order, like ATen's CPU kernels), and
  scatter_add's gradgradcheck passes.
- CUDA (skipped without a GPU): amax/amin and scatter.value bitwise; scatter.src (distinct
  targets) within rtol 1e-5 / atol 1e-6; the accumulations (scatter_add, sum, mean, prod, whose
  order is unspecified under atomics in ATen and in ours) against the same call in float64 on
  the CPU: ours no further from it than the rule of stridewise.testing.accuracy allows given
  native's distance (4 * native's + 8 eps), forward and both gradients.
- stats()[op]['calls'] proves our kernel ran in the forward (and 'fallback' that it was not
  handed back to ATen).

Seeds: conftest's seed fixture.
"""
from __future__ import annotations

import pytest
import torch

from conftest import DEVICES, fail_msg
from stridewise.testing import accuracy
from stridewise.audit.specs import gather_layouts as specs

ROUTE = ["scatter", "scatter_add", "scatter_reduce", "gather"]
REDUCES = ["sum", "prod", "mean", "amax", "amin"]


def _distinct(shape, g, dtype, device, offset=0.0):
    """Distinct values (no ties anywhere, also across tensors made with other offsets)."""
    n = 1
    for s in shape:
        n *= s
    v = torch.randperm(n, generator=g).to(torch.float64) / n + offset
    return (v * torch.where(torch.rand(n, generator=g) < 0.5, -1.0, 1.0)).reshape(shape).to(dtype).to(device)


def _inputs(g, dtype, device, reduce=None, unique=False):
    """self (5, 4, 6) transposed view, dim 1 (size 4); index (5, 7, 6) transposed, with
    duplicates (unique: (5, 3, 6), distinct targets per line, for scatter's copy, whose
    derivative with duplicate targets is a convention); src (5, 7, 12) step-sliced."""
    if reduce in ("amax", "amin"):
        self_t = _distinct([5, 6, 4], g, dtype, device).transpose(1, 2)
        src = _distinct([5, 7, 6], g, dtype, device, offset=2.0)
    else:
        self_t = torch.randn(5, 6, 4, generator=g, dtype=torch.float64).to(dtype).to(device).transpose(1, 2)
        src = torch.randn(5, 7, 12, generator=g, dtype=torch.float64).to(dtype).to(device)[..., ::2]
        if reduce == "prod":
            self_t = 1 + 0.2 * self_t
            src = 1 + 0.2 * src
    if unique:
        idx = torch.rand(5, 6, 4, generator=g).argsort(dim=2)[..., :3].to(device).transpose(1, 2)
        src = src[:, :3]  # ATen's scatter backward returns a src gradient of index's shape
    else:
        idx = torch.randint(0, 4, (5, 6, 7), generator=g).to(device).transpose(1, 2)
    return self_t.detach(), idx, src.detach()


FNS = {
    "scatter.src": ("scatter", lambda s, i, x: torch.scatter(s, 1, i, x)),
    "scatter.value": ("scatter", lambda s, i, x: torch.scatter(s, 1, i, 1.5)),
    "scatter_add": ("scatter_add", lambda s, i, x: torch.scatter_add(s, 1, i, x)),
}
for _r in REDUCES:
    for _inc in (True, False):
        FNS[f"scatter_reduce-{_r}-incl{int(_inc)}"] = (
            "scatter_reduce",
            (lambda r, inc: lambda s, i, x: torch.scatter_reduce(s, 1, i, x, r, include_self=inc))(_r, _inc))


def _reduce_of(name):
    return name.split("-")[1] if name.startswith("scatter_reduce") else None


def _unique(name):
    return name.startswith("scatter.")


def _accumulates(name):
    """Floating accumulation whose order atomics leave open (scatter_add, sum, mean, prod)."""
    return name == "scatter_add" or _reduce_of(name) in ("sum", "mean", "prod")


def _grads(fn, s, i, x, gout):
    ss = s.clone().requires_grad_(True)
    xx = x.clone().requires_grad_(True)
    y = fn(ss, i, xx)
    y.backward(gout)
    return y.detach(), ss.grad, xx.grad


@pytest.mark.parametrize("name", list(FNS))
def test_cpu_gradcheck_under_stridewise(sw, name, seed):
    key, fn = FNS[name]
    g = torch.Generator().manual_seed(seed)
    s, i, x = _inputs(g, torch.float64, "cpu", _reduce_of(name), _unique(name))
    s.requires_grad_(True)
    x.requires_grad_(True)
    calls0 = sw.stats()[key]["calls"]
    with sw.use(include=ROUTE):
        assert torch.autograd.gradcheck(lambda a, b: fn(a, i, b), (s, x))
    st = sw.stats()[key]
    assert st["calls"] > calls0 and st["fallback"] == 0, st


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("name", list(FNS))
def test_gradients_equal_native(sw, name, device, seed):
    key, fn = FNS[name]
    dtype = torch.float64 if device == "cpu" else torch.float32
    g = torch.Generator().manual_seed(seed)
    s, i, x = _inputs(g, dtype, device, _reduce_of(name), _unique(name))
    gout = torch.randn(tuple(s.shape), generator=g, dtype=torch.float64).to(dtype).to(device)
    with specs.native():
        y_n, gs_n, gx_n = _grads(fn, s, i, x, gout)
    st0 = dict(sw.stats()[key])
    with sw.use(include=ROUTE):
        y_o, gs_o, gx_o = _grads(fn, s, i, x, gout)
    st1 = sw.stats()[key]
    assert st1["calls"] > st0["calls"] and st1["fallback"] == st0["fallback"], (st0, st1)
    assert st1["noncontig_self"] > st0["noncontig_self"] and st1["noncontig_index"] > st0["noncontig_index"], st1
    ctx = f"[{name} {device} {dtype}]"
    exact = device == "cpu" or _reduce_of(name) in ("amax", "amin") or name == "scatter.value"
    pairs = [("forward", y_o, y_n), ("grad self", gs_o, gs_n), ("grad src", gx_o, gx_n)]
    if not exact and _accumulates(name) and accuracy.unordered(device):
        # native is not the truth here: the same call in float64 on the CPU is (module docstring)
        up = lambda t: t.detach().cpu().to(torch.float64)  # noqa: E731
        with specs.native():
            refs = _grads(fn, up(s), i.cpu(), up(x), up(gout))
        for (what, got, want), ref in zip(pairs, refs):
            if want is None:
                assert got is None and ref is None, f"{ctx} {what}: gradient presence differs"
                continue
            p = accuracy.float64_problem(what, got, want, ref)
            assert p is None, fail_msg([f"{ctx} {p}"])
        return
    for what, got, want in pairs:
        if want is None:
            assert got is None, f"{ctx} {what}: native has no gradient, ours has one"
            continue
        assert got is not None, f"{ctx} {what}: no gradient"
        if exact and not (what == "forward" and name.startswith("scatter.src") and device != "cpu"):
            m = specs.bitwise_mismatch(got, want, what=what)
            assert m is None, fail_msg([f"{ctx} {m}"])
        else:
            torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-6, msg=lambda m: f"{ctx} {what}: {m}")


@pytest.mark.parametrize("device", DEVICES)
def test_scatter_add_gradgradcheck(sw, device, seed):
    """Double backward of scatter_add (its backward is a gather, whose backward is scatter_add
    again): both run on stridewise inside the graph."""
    g = torch.Generator().manual_seed(seed)
    s, i, x = _inputs(g, torch.float64, device)
    s.requires_grad_(True)
    x.requires_grad_(True)
    with sw.use(include=ROUTE):
        assert torch.autograd.gradgradcheck(lambda a, b: torch.scatter_add(a, 1, i, b), (s, x))
    assert sw.stats()["scatter_add"]["calls"] > 0 and sw.stats()["gather"]["calls"] > 0


@pytest.mark.parametrize("device", DEVICES)
def test_in_place_and_out_forms_keep_autograd(sw, device, seed):
    """scatter_add_ on a non-leaf and scatter_reduce_ (mean) in place: the gradient flows as
    native's; out= forms are not differentiable in ATen and must refuse the same way."""
    g = torch.Generator().manual_seed(seed)
    s, i, x = _inputs(g, torch.float64, device)

    def run():
        ss = s.clone().requires_grad_(True)
        xx = x.clone().requires_grad_(True)
        y = ss * 2
        y.scatter_add_(1, i, xx)
        y.scatter_reduce_(1, i, xx * 3, "mean", include_self=False)
        y.sum().backward()
        return y.detach(), ss.grad, xx.grad

    with specs.native():
        want = run()
    with sw.use(include=ROUTE):
        got = run()
    for what, a, b in zip(("forward", "grad self", "grad src"), got, want):
        if device == "cpu":
            assert specs.bitwise_mismatch(a, b, what=what) is None, what
        else:
            torch.testing.assert_close(a, b, rtol=1e-12, atol=1e-12)
    assert sw.stats()["scatter_add"]["calls"] >= 1 and sw.stats()["scatter_reduce"]["calls"] >= 1

    def out_form():
        ss = s.clone().requires_grad_(True)
        return torch.scatter_add(ss, 1, i, x, out=torch.empty_like(s))

    with specs.native():
        n = specs.capture(out_form)
    with sw.use(include=ROUTE):
        o = specs.capture(out_form)
    assert n[0] is not None and o[0] is n[0] and specs.first_line(o[1]) == specs.first_line(n[1]), (n, o)
