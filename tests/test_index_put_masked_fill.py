"""x[mask] = v on the CPU: ATen's index_put_ runs self.masked_fill_(mask, v.item()) for one CPU
value without accumulate; stridewise writes that value at the mask's nonzero() positions itself
(it used to hand the call to ATen: the `masked_fill` rule, docs/fallbacks.md).

Bitwise against native over the whole storage of self (a view into a larger storage filled with
random bytes, so a write outside the view shows), for every dtype the core computes, values of
another dtype (converted as masked_fill_ converts them), masks over some leading dims, after a
None, and on transposed / sliced selves; ATen's errors (a uint8 mask, a value that does not fit,
a mask of the wrong shape) word for word; no call handed to ATen. Fresh random data per run.
"""
from __future__ import annotations

import pytest
import torch

from stridewise.audit.specs import gather_layouts as specs

DTYPES = [torch.float32, torch.float64, torch.float16, torch.bfloat16, torch.int64, torch.int32,
          torch.int16, torch.int8, torch.uint8, torch.bool, torch.complex64, torch.complex128]


def _self(dtype, g, layout):
    """(4, 6, 5) of dtype inside a larger storage of random bytes."""
    nbytes = 4 * 6 * 5 * dtype.itemsize * 4
    store = torch.randint(0, 256, (nbytes,), generator=g, dtype=torch.uint8).view(dtype)
    if dtype.is_floating_point or dtype.is_complex:  # no NaN payloads to compare
        store = torch.where(torch.isfinite(store), store, torch.zeros((), dtype=dtype))
    if layout == "contiguous":
        return store[: 4 * 6 * 5].view(4, 6, 5), store
    if layout == "transposed":
        return store[: 4 * 6 * 5].view(5, 6, 4).permute(2, 1, 0), store
    return store.view(8, 6, 10)[1::2, :, 3:8], store  # sliced: steps and an offset


def _value(kind, dtype, g):
    x = float(torch.randn((), generator=g)) * 3
    if kind == "python":
        if dtype == torch.bool:
            return True
        return complex(x, 1.0) if dtype.is_complex else (int(x) if not dtype.is_floating_point else x)
    if kind == "tensor-other-dtype":  # a 0-dim int64 (masked_fill_ converts it)
        return torch.tensor(int(x) % 100)
    return torch.tensor([x]).to(dtype)  # shape (1,), self's dtype


def _index(kind, g):
    if kind == "full":
        return (torch.rand(4, 6, 5, generator=g) > 0.5,)
    if kind == "leading":
        return (torch.rand(4, 6, generator=g) > 0.5,)
    return (slice(None), torch.rand(6, generator=g) > 0.5)  # None, then a mask


def _put(t, index, value):
    t[index] = value
    return t


@pytest.mark.parametrize("layout", ["contiguous", "transposed", "sliced"])
@pytest.mark.parametrize("mask", ["full", "leading", "after-none"])
@pytest.mark.parametrize("value", ["python", "tensor-other-dtype", "tensor-shape-1"])
@pytest.mark.parametrize("dtype", DTYPES, ids=specs.dtype_name)
def test_masked_fill_bitwise(sw, seed, dtype, value, mask, layout):
    g = torch.Generator().manual_seed(seed)
    self_t, store = _self(dtype, g, layout)
    v = _value(value, dtype, g)
    index = _index(mask, g)
    want = store.clone()
    with specs.native():
        _put(want.as_strided(self_t.shape, self_t.stride(), self_t.storage_offset()), index, v)
    st0 = sw.stats()["index_put"]
    with sw.use(include=["index_put"]):
        _put(self_t, index, v)
    st1 = sw.stats()["index_put"]
    m = specs.bitwise_mismatch(store, want, what=f"seed {seed} storage")
    assert m is None, m
    assert st1["calls"] == st0["calls"] + 1 and st1["fallback"] == st0["fallback"], st1


@pytest.mark.parametrize("case", ["uint8-mask", "overflow", "complex-into-real", "mask-shape"])
def test_masked_fill_errors_are_atens(sw, seed, case):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(4, 5, generator=g)
    m = torch.rand(4, 5, generator=g) > 0.5
    calls = {
        "uint8-mask": lambda t: _put(t, m.to(torch.uint8), 1.0),
        "overflow": lambda t: _put(t.to(torch.uint8), m, torch.tensor(300)),
        "complex-into-real": lambda t: _put(t, m, torch.tensor(1 + 2j)),
        "mask-shape": lambda t: _put(t, m[:3], 1.0),
    }
    errors = []
    for routed in (False, True):
        ctx = sw.use(include=["index_put"]) if routed else specs.native()
        t = x.clone()
        with ctx, pytest.raises(Exception) as e:
            calls[case](t)
        errors.append((e.type, str(e.value).splitlines()[0]))
        assert torch.equal(t, x), "a failing call wrote into self"
    assert errors[0] == errors[1], errors
