"""Routing and stats: torch.ops.stridewise.gather directly, aten::gather / gather.out routed
under stridewise.enable() / use(), disable() restoring native, and the counters."""
from __future__ import annotations

import pytest
import torch

from conftest import DEVICES
from stridewise.audit.specs import gather_layouts as specs


def _gather_stats(sw):
    return sw.stats()["gather"]


def _enabled(sw, op="gather") -> bool:
    return op in specs._enabled_ops(sw)


def _inputs(device, seed, noncontig=False):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(6, 7, generator=g).to(device)
    if noncontig:
        idx = torch.randint(0, 7, (6, 1), generator=g).to(device).expand(6, 5)
    else:
        idx = torch.randint(0, 7, (6, 5), generator=g).to(device)
    return x, idx


def test_supported_and_registered(sw):
    assert "gather" in sw.supported_ops()
    assert hasattr(torch.ops.stridewise.gather, "default")
    assert hasattr(torch.ops.stridewise.gather, "out")
    st = _gather_stats(sw)
    for k in ("calls", "cpu", "cuda", "noncontig_index", "noncontig_self", "noncontig_out",
              "expanded_index", "copies", "vectorized", "int64_offsets", "errors"):
        assert k in st, f"stats()['gather'] lacks {k!r}: {st}"
    assert not _enabled(sw), "routing must be off by default (conftest disables it per test)"


@pytest.mark.parametrize("device", DEVICES)
def test_direct_op_counts(sw, device, seed):
    x, idx = _inputs(device, seed)
    r = torch.ops.stridewise.gather(x, 1, idx)
    assert torch.equal(r, x.gather(1, idx))  # routing is off: right side is native
    st = _gather_stats(sw)
    assert st["calls"] == 1 and st[device] == 1 and st["noncontig_index"] == 0, st
    other = "cpu" if device == "cuda" else "cuda"
    assert st[other] == 0, st


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("entry", ["torch.gather", "Tensor.gather", "take_along_dim", "gather.out",
                                   "aten.gather", "aten.gather.out"])
def test_use_routes_aten(sw, entry, device, seed):
    x, idx = _inputs(device, seed)
    calls = {
        "torch.gather": lambda: torch.gather(x, 1, idx),
        "Tensor.gather": lambda: x.gather(1, idx),
        "take_along_dim": lambda: torch.take_along_dim(x, idx, 1),
        "gather.out": lambda: torch.gather(x, 1, idx, out=torch.empty(idx.shape, device=device)),
        "aten.gather": lambda: torch.ops.aten.gather(x, 1, idx),
        "aten.gather.out": lambda: torch.ops.aten.gather.out(x, 1, idx, out=torch.empty(idx.shape, device=device)),
    }
    want = calls[entry]()  # native
    assert _gather_stats(sw)["calls"] == 0, "native call counted"
    with sw.use(include=["gather"]):
        assert _enabled(sw)
        got = calls[entry]()
    assert torch.equal(got, want)
    st = _gather_stats(sw)
    assert st["calls"] == 1 and st[device] == 1, (entry, st)
    calls[entry]()  # native again
    assert _gather_stats(sw)["calls"] == 1, "stats moved after use() exited"


@pytest.mark.parametrize("device", DEVICES)
def test_enable_disable(sw, device, seed):
    x, idx = _inputs(device, seed)
    sw.enable()
    assert _enabled(sw)
    torch.gather(x, 1, idx)
    assert _gather_stats(sw)["calls"] == 1
    sw.disable()
    assert not _enabled(sw)
    torch.gather(x, 1, idx)
    x.gather(1, idx)
    assert _gather_stats(sw)["calls"] == 1, "disable() did not restore the native kernel"
    sw.enable(include=["gather"])
    torch.gather(x, 1, idx)
    assert _gather_stats(sw)["calls"] == 2
    sw.enable(exclude=["gather"])
    assert not _enabled(sw)
    torch.gather(x, 1, idx)
    assert _gather_stats(sw)["calls"] == 2, "enable(exclude=['gather']) still routes gather"
    sw.disable()
    sw.disable()  # idempotent
    torch.gather(x, 1, idx)
    assert _gather_stats(sw)["calls"] == 2


def test_enable_unknown_op_rejected(sw):
    with pytest.raises((ValueError, RuntimeError)):
        sw.enable(include=["no_such_op"])
    assert not _enabled(sw)


@pytest.mark.parametrize("device", DEVICES)
def test_use_nests_and_restores(sw, device, seed):
    x, idx = _inputs(device, seed)
    with sw.use(include=["gather"]):
        with sw.use(include=["gather"]):
            torch.gather(x, 1, idx)
        assert _enabled(sw), "inner use() exit turned routing off for the outer one"
        torch.gather(x, 1, idx)
        sw.disable()  # a disable inside use() lasts until use() exits
        torch.gather(x, 1, idx)
    assert not _enabled(sw)
    assert _gather_stats(sw)["calls"] == 2
    sw.enable()
    with sw.use(include=["gather"]):
        pass
    assert _enabled(sw), "use() exit did not restore the enabled state it found"
    sw.disable()
    # exceptions inside use() still restore
    with pytest.raises(ZeroDivisionError):
        with sw.use(include=["gather"]):
            1 / 0
    assert not _enabled(sw)


@pytest.mark.parametrize("device", DEVICES)
def test_noncontig_counters(sw, device, seed):
    x, idx = _inputs(device, seed)
    torch.ops.stridewise.gather(x, 1, idx)
    st = _gather_stats(sw)
    assert st["noncontig_index"] == 0 and st["noncontig_self"] == 0 and st["expanded_index"] == 0, st
    torch.ops.stridewise.gather(x, 1, idx.t().contiguous().t())  # transposed index
    assert _gather_stats(sw)["noncontig_index"] == 1
    x2, idx_e = _inputs(device, seed, noncontig=True)  # expanded index
    torch.ops.stridewise.gather(x2, 1, idx_e)
    st = _gather_stats(sw)
    assert st["noncontig_index"] == 2 and st["expanded_index"] == 1, st
    torch.ops.stridewise.gather(x.t(), 0, idx[:, :5].t().contiguous())
    assert _gather_stats(sw)["noncontig_self"] == 1
    out = torch.empty(5, 6, device=device).t()
    torch.ops.stridewise.gather.out(x, 1, idx, out=out)
    st = _gather_stats(sw)
    assert st["noncontig_out"] == 1 and st["calls"] == 5 and st["copies"] == 0, st
    with sw.use(include=["gather"]):
        torch.gather(x2, 1, idx_e)
    assert _gather_stats(sw)["noncontig_index"] == 3
    sw.reset_stats()
    assert all(v in (0, {}) for v in _gather_stats(sw).values()), _gather_stats(sw)


@pytest.mark.parametrize("device", DEVICES)
def test_vectorized_counter_on_seed_layout(sw, device, seed):
    """The seed's layout (index stride 0 along the contiguous last dim) is the vector-friendly
    one; the planner should take it at least for 4-byte data of aligned width."""
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(4, 16, 384, generator=g).to(device)
    idx = torch.full((4, 1, 1), 15, dtype=torch.int64, device=device).expand(4, 1, 384)
    torch.ops.stridewise.gather(x, 1, idx)
    st = _gather_stats(sw)
    assert st["vectorized"] == 1, f"seed layout not vectorized: {st}"
