"""Backward through gather: the forward runs our kernel (aten routing, or the stridewise op
with its own autograd), the gradient must equal native's (bitwise on the CPU, where
scatter_add is deterministic; allclose on CUDA, where it uses atomics). Expanded and
transposed indices (duplicates accumulate), sparse_grad=True, and gradgradcheck (double
backward runs gather again, inside the backward graph)."""
from __future__ import annotations

import pytest
import torch

from conftest import DEVICES, fail_msg
from stridewise.testing import layouts
from stridewise.audit.specs import gather_layouts as specs
from stridewise.audit.specs.gather_layouts import GatherCase

INDEX_LAYOUTS = ["contiguous", "expand", "expand_all", "transpose", "compound", "step_slice"]
TOL = {torch.float64: dict(rtol=1e-12, atol=1e-12), torch.float32: dict(rtol=1e-5, atol=1e-6)}


def _grad(fn, x, dim, idx, gout):
    xx = x.detach().clone().requires_grad_(True) if x.is_contiguous() else \
        x.detach().clone(memory_format=torch.preserve_format).requires_grad_(True)
    y = fn(xx, dim, idx)
    y.backward(gout)
    return y.detach(), xx.grad


ENTRIES = {
    "aten": lambda sw: (lambda x, d, i: _with(sw, lambda: torch.gather(x, d, i))),
    "method": lambda sw: (lambda x, d, i: _with(sw, lambda: x.gather(d, i))),
    "op": lambda sw: (lambda x, d, i: torch.ops.stridewise.gather(x, d, i)),
}


def _with(sw, f):
    with sw.use(include=["gather"]):
        return f()


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("entry", list(ENTRIES))
@pytest.mark.parametrize("dtype", [torch.float64, torch.float32], ids=specs.dtype_name)
@pytest.mark.parametrize("index_layout", INDEX_LAYOUTS)
def test_backward_matches_native(sw, index_layout, dtype, entry, device, seed):
    case = GatherCase((5, 6, 7), (4, 9, 6), 1, dtype, index_layout=index_layout,
                      self_layout="transpose", seed=seed)
    inp = specs.build_inputs(case, device)
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(5, 7, 6, generator=g, dtype=dtype).to(device).transpose(1, 2)  # non-contiguous leaf source
    idx = inp["index"]
    gout = torch.randn(tuple(idx.shape), generator=g, dtype=dtype).to(device)

    def native_fn(xx, d, i):
        with specs.native():
            return torch.gather(xx, d, i)
    y_n, g_n = _grad(native_fn, x, 1, idx, gout)
    calls0 = sw.stats()["gather"]["calls"]
    y_o, g_o = _grad(ENTRIES[entry](sw), x, 1, idx, gout)
    assert sw.stats()["gather"]["calls"] > calls0, "forward did not run stridewise"
    ctx = f"[{index_layout} {dtype} {entry} {device}] index {layouts.describe(idx)}"
    assert specs.bitwise_mismatch(y_o, y_n) is None, fail_msg([ctx + " forward differs"])
    assert g_o is not None, ctx + " no gradient"
    if device == "cpu":
        assert specs.bitwise_mismatch(g_o, g_n, what="grad") is None, fail_msg([ctx])
    else:
        torch.testing.assert_close(g_o, g_n, **TOL[dtype], msg=lambda m: f"{ctx}: {m}")


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("entry", ["aten", "op"])
def test_sparse_grad(sw, entry, device, seed):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(6, 8, generator=g, dtype=torch.float64).to(device)
    idx = torch.randint(0, 8, (6, 1), generator=g).to(device).expand(6, 5)
    gout = torch.randn(6, 5, generator=g, dtype=torch.float64).to(device)

    def run(f):
        xx = x.clone().requires_grad_(True)
        y = f(xx)
        y.backward(gout)
        return y.detach(), xx.grad

    with specs.native():
        y_n, g_n = run(lambda xx: torch.gather(xx, 1, idx, sparse_grad=True))
    if entry == "aten":
        with sw.use(include=["gather"]):
            y_o, g_o = run(lambda xx: torch.gather(xx, 1, idx, sparse_grad=True))
    else:
        y_o, g_o = run(lambda xx: torch.ops.stridewise.gather(xx, 1, idx, sparse_grad=True))
    assert sw.stats()["gather"]["calls"] >= 1
    assert specs.bitwise_mismatch(y_o, y_n) is None
    assert g_o.is_sparse == g_n.is_sparse, (g_o.layout, g_n.layout)
    torch.testing.assert_close(g_o.to_dense(), g_n.to_dense(), rtol=1e-12, atol=1e-12)
    # the forward result of sparse_grad=True equals the dense one
    assert torch.equal(torch.ops.stridewise.gather(x, 1, idx, sparse_grad=True),
                       torch.ops.stridewise.gather(x, 1, idx))


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("index_layout", ["expand", "transpose"])
def test_gradcheck_and_gradgradcheck(sw, index_layout, device, seed):
    case = GatherCase((3, 4, 5), (3, 6, 5), 1, torch.float64, index_layout=index_layout, seed=seed)
    idx = specs.build_inputs(case, device)["index"]
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(3, 4, 5, generator=g, dtype=torch.float64).to(device).requires_grad_(True)
    with sw.use(include=["gather"]):
        assert torch.autograd.gradcheck(lambda t: torch.gather(t, 1, idx), (x,))
        calls0 = sw.stats()["gather"]["calls"]
        assert torch.autograd.gradgradcheck(lambda t: torch.gather(t, 1, idx), (x,))
        # double backward: d(scatter_add)/d(grad) is a gather, which must have run here
        assert sw.stats()["gather"]["calls"] > calls0
    assert torch.autograd.gradcheck(lambda t: torch.ops.stridewise.gather(t, 1, idx), (x,))


@pytest.mark.parametrize("device", DEVICES)
def test_grad_of_index_is_none_and_no_grad_mode(sw, device, seed):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(4, 5, generator=g).to(device).requires_grad_(True)
    idx = torch.randint(0, 5, (4, 3), generator=g).to(device)
    with sw.use(include=["gather"]):
        y = torch.gather(x, 1, idx)
        assert y.requires_grad and y.grad_fn is not None
        assert "Gather" in type(y.grad_fn).__name__
        with torch.no_grad():
            z = torch.gather(x, 1, idx)
        assert not z.requires_grad
    y2 = torch.ops.stridewise.gather(x, 1, idx)
    assert y2.requires_grad
    y2.sum().backward()
    assert torch.equal(x.grad, torch.zeros_like(x).scatter_add_(1, idx, torch.ones(4, 3, device=device)))
