"""index_fill on stridewise (adapter/index_fill.cpp: one order-free write on the k-index core).

What the audit matrix (tests/test_index_dim_matrix.py, both specs under --guard) does not check:
- layouts with the wrap: every layout class of self (expanded included: ATen warns, then fills),
  ranks 0..4 and 10, int64 indices with duplicates and negatives, a 0-dim and an empty index,
  every dtype ATen fills, the value as a Python scalar, a CPU 0-dim tensor and a device one:
  bitwise equal to native on the same device;
- ATen's argument errors, exception type and wording, and its expanded-self warning;
- a bad index: ATen's IndexError on the CPU, the catchable stridewise error on CUDA (names op,
  dim, value and the range [-n, n)), and in both cases self keeps every bit (ATen's CPU kernel
  writes the elements before the bad one);
- autograd: gradcheck in float64 with routing on, gradients equal native;
- deterministic mode: bitwise equal to native and to itself;
- stats(): calls on the device, no copy, no fallback for any dtype ATen fills, a device value
  read without a host synchronization.

Every test draws fresh data (STRIDEWISE_SEED, printed on failure); self is random data, never
zeros, so a missed or extra write shows.
"""
from __future__ import annotations

import random
import warnings

import pytest
import torch

from conftest import BASE_SEED, CUDA_SKIP, DEVICES
from stridewise.testing import layouts
from stridewise.audit.specs import gather_layouts as specs

OP = ["index_fill"]
# The dtypes ATen's CPU and CUDA index_fill kernels take (uint16/32/64 and float8: ATen refuses).
DTYPES = [torch.float32, torch.float64, torch.float16, torch.bfloat16, torch.int8, torch.uint8,
          torch.int16, torch.int32, torch.int64, torch.bool, torch.complex64, torch.complex128,
          torch.complex32]


def outcome(fn):
    try:
        with warnings.catch_warnings(record=True) as w:
            warnings.simplefilter("always")
            r = fn()
        # ATen warns "ComplexHalf support is experimental" once per process, at the first
        # complex32 tensor it allocates: in whichever call comes first (native's, on the H200,
        # 2026-12-06), so it says nothing about the op
        return ("ok", r, [m for m in (str(x.message).split(" (Triggered")[0] for x in w)
                          if not m.startswith("ComplexHalf support is experimental")])
    except Exception as e:  # noqa: BLE001 - compared as (type, message)
        return (type(e).__name__, str(e).split("\n")[0], [])


def bits(t: torch.Tensor) -> torch.Tensor:
    return specs.raw_bytes(t.detach().cpu())


def same(a, b) -> bool:
    if a[0] != b[0] or a[2] != b[2]:
        return False
    if a[0] != "ok":
        return a[1] == b[1]
    return a[1].shape == b[1].shape and a[1].dtype == b[1].dtype and torch.equal(bits(a[1]), bits(b[1]))


def both(sw, fn):
    """fn() natively and with index_fill routed; fn builds its own inputs from a fixed seed."""
    nat = outcome(fn)
    with sw.use(include=OP):
        ours = outcome(fn)
    return nat, ours


def values(shape, dtype, g, device):
    return specs.random_values(shape, dtype, g).to(device)


def fill_value(dtype, rng):
    if dtype == torch.bool:
        return rng.random() < 0.5
    if dtype.is_complex:
        return complex(rng.uniform(-9, 9), rng.uniform(-9, 9))
    if dtype.is_floating_point:
        return rng.uniform(-9, 9)
    return rng.randint(-100 if dtype != torch.uint8 else 0, 100)


def random_case(rng: random.Random, device: str, dtype: torch.dtype):
    """(self maker, dim, index, value): self a random layout of a random shape, the index with
    duplicates and negative values, the value a Python scalar or a 0-dim tensor (CPU or device)."""
    rank = rng.choice([0, 1, 2, 3, 4, 10])
    shape = [rng.randint(1, 5) if rank < 10 else rng.randint(1, 2) for _ in range(rank)]
    kind = "contiguous" if rank == 0 else rng.choice(layouts.LAYOUTS)
    seed = rng.randrange(1 << 30)
    dim = rng.randrange(-max(rank, 1), max(rank, 1))
    n = shape[dim] if rank else 1
    m = rng.choice([0, 1, 3, 7])
    g = torch.Generator().manual_seed(seed)
    idx = torch.randint(-n, n, (m,), generator=g)
    if m == 1 and rng.random() < 0.3:
        idx = idx[0]  # a 0-dim index
    elif m > 1 and rng.random() < 0.3:
        idx = idx.repeat(2)[::2]  # a step-sliced index
    idx = idx.to(device)
    v = fill_value(dtype, rng)
    where = rng.choice(["scalar", "cpu", "device"])
    value = v if where == "scalar" else torch.tensor(v, dtype=dtype, device="cpu" if where == "cpu" else device)

    def make_self():
        lay_rng = random.Random(seed)
        t = layouts.make_layout(kind, shape, lambda s: values(s, dtype, torch.Generator().manual_seed(seed), device),
                                lay_rng) if rank else values([], dtype, torch.Generator().manual_seed(seed), device)
        return t

    return make_self, dim, idx, value, f"{kind} {shape} dim {dim} idx {idx.tolist()} value {where}"


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", DTYPES, ids=specs.dtype_name)
def test_matches_native_over_layouts(sw, device, dtype, seed):
    rng = random.Random(seed)
    problems = []
    for _ in range(12):
        make_self, dim, idx, value, what = random_case(rng, device, dtype)
        for form in ("inplace", "func", "out"):
            def call():
                s = make_self()
                if form == "inplace":
                    return s.index_fill_(dim, idx, value)
                if form == "func":
                    return torch.index_fill(s, dim, idx, value)
                out = torch.empty_like(s.contiguous()).t() if s.dim() == 2 else torch.empty(0, dtype=dtype, device=device)
                op = torch.ops.aten.index_fill.int_Tensor_out if isinstance(value, torch.Tensor) \
                    else torch.ops.aten.index_fill.int_Scalar_out
                return op(s, dim, idx, value, out=out)
            nat, ours = both(sw, call)
            if not same(nat, ours):
                problems.append(f"{form} {what}: native {nat[0]} {nat[2]}, stridewise {ours[0]} {ours[2]}"
                                + (f" {nat[1]} | {ours[1]}" if "ok" not in (nat[0], ours[0]) else ""))
    st = sw.stats()["index_fill"]
    assert not problems, f"STRIDEWISE_SEED={BASE_SEED}\n" + "\n".join(problems[:8])
    assert st[device] > 0 and st["fallback"] == 0 and st["copies"] == 0, st


def _argument_cases(device):
    x = lambda: torch.arange(12.0, device=device).reshape(3, 4) + 1  # noqa: E731
    i = torch.tensor([0, 2], device=device)
    yield "int32 index", lambda: x().index_fill_(1, i.int(), 1.0)
    yield "float index", lambda: x().index_fill_(1, i.float(), 1.0)
    yield "2-d index", lambda: x().index_fill_(1, i.view(1, 2), 1.0)
    yield "dim out of range", lambda: x().index_fill_(2, i, 1.0)
    yield "dim -3", lambda: x().index_fill_(-3, i, 1.0)
    yield "complex into real", lambda: x().index_fill_(1, i, 1j)
    yield "complex tensor into real", lambda: x().index_fill_(1, i, torch.tensor(1j))
    yield "overflow", lambda: x().to(torch.int8).index_fill_(1, i, 1000)
    yield "value with a dim", lambda: x().index_fill_(1, i, torch.tensor([1.0]))
    yield "self overlaps index", lambda: (lambda t: t.index_fill_(1, t[0, :2], 1))(
        torch.arange(12, device=device).reshape(3, 4))
    yield "empty self, index", lambda: torch.empty(0, 4, device=device).index_fill_(0, i, 1.0)
    yield "empty self dim 1", lambda: torch.empty(3, 0, device=device).index_fill_(1, i, 1.0)
    yield "uint16 (ATen refuses)", lambda: torch.ones(3, 4, dtype=torch.uint16, device=device).index_fill_(1, i, 1)
    yield "out of another dtype", lambda: torch.ops.aten.index_fill.int_Scalar_out(
        x(), 1, i, 1.0, out=torch.empty(3, 4, dtype=torch.float64, device=device))
    yield "bad index high", lambda: x().index_fill_(1, torch.tensor([0, 4], device=device), 1.0)
    yield "bad index low", lambda: x().index_fill_(1, torch.tensor([-5, 0], device=device), 1.0)
    if device != "cpu":
        yield "index on the cpu", lambda: x().index_fill_(1, i.cpu(), 1.0)


def test_argument_errors_match_native_cpu(sw):
    problems = []
    for what, fn in _argument_cases("cpu"):
        nat, ours = both(sw, fn)
        if not same(nat, ours):
            problems.append(f"{what}: native {nat[:2]} stridewise {ours[:2]}")
    assert not problems, "\n".join(problems)


@CUDA_SKIP
def test_argument_errors_match_native_cuda(sw, cuda_check_mode):
    """Host-side checks on CUDA (bad index values are the next test's: ATen asserts on device)."""
    problems = []
    for what, fn in _argument_cases("cuda"):
        if what.startswith("bad index"):
            continue
        nat, ours = both(sw, fn)
        if not same(nat, ours):
            problems.append(f"{what}: native {nat[:2]} stridewise {ours[:2]}")
    assert not problems, "\n".join(problems)


@pytest.mark.parametrize("device", DEVICES)
def test_expanded_self_warns_and_fills_like_native(sw, device, seed):
    g = torch.Generator().manual_seed(seed)
    row = specs.random_values([1, 6], torch.float32, g).to(device)
    idx = torch.tensor([1, -1, 1], device=device)
    nat, ours = both(sw, lambda: row.clone().expand(4, 6).index_fill_(1, idx, 2.5))
    assert same(nat, ours), (nat, ours)
    assert any("deprecated" in w for w in ours[2]), ours[2]


def _bad_case(seed, device, dtype=torch.float32):
    rng = random.Random(seed)
    shape = [rng.randint(2, 6), rng.randint(2, 6), rng.randint(2, 6)]
    dim = rng.randrange(3)
    n = shape[dim]
    g = torch.Generator().manual_seed(seed)
    self_ = layouts.make_layout(rng.choice(["contiguous", "transpose", "step_slice", "offset"]), shape,
                                lambda s: specs.random_values(s, dtype, g), rng).to(device)
    m = rng.randint(2, 6)
    idx = torch.randint(-n, n, (m,), generator=g)
    bad = rng.choice([n, n + 7, -n - 1, -n - 9])
    idx[rng.randrange(m)] = bad
    return self_, dim, idx.to(device), bad, n


def test_bad_index_raises_atens_error_and_writes_nothing_cpu(sw, seed):
    for k in range(20):
        self_, dim, idx, bad, n = _bad_case(seed + k, "cpu")
        nat = outcome(lambda: self_.clone().index_fill_(dim, idx, 7.0))
        mine = self_.clone()
        before = bits(mine)
        with sw.use(include=OP):
            ours = outcome(lambda: mine.index_fill_(dim, idx, 7.0))
        assert ours[0] == "IndexError" and ours[:2] == nat[:2], (nat, ours, idx)
        assert f"index {bad} is out of bounds for dimension {dim} with size {n}" == ours[1]
        assert torch.equal(bits(mine), before), f"a failed call wrote self (idx {idx.tolist()})"


@CUDA_SKIP
@pytest.mark.cuda_errors
@pytest.mark.parametrize("mode", ["sync", "deferred"])
def test_bad_index_cuda_is_catchable_and_writes_nothing(sw, cuda_check_mode, mode, seed):
    sw.set_cuda_check_mode(mode)
    for k in range(6):
        self_, dim, idx, bad, n = _bad_case(seed + k, "cuda", torch.bfloat16)
        before = bits(self_)
        with sw.use(include=OP):
            with pytest.raises(RuntimeError) as ei:
                self_.index_fill_(dim, idx, 7.0)
                if mode == "deferred":
                    sw.check_errors(sync=True)
        msg = str(ei.value)
        assert "stridewise.index_fill (cuda)" in msg and f"index {bad} " in msg, msg
        assert f"dimension {dim} with size {n}" in msg and f"[{-n}, {n})" in msg, msg
        assert torch.equal(bits(self_), before), "a failed call wrote self"
        # the context is alive: a fresh kernel runs and its result comes back
        assert float(torch.ones(1000, device="cuda").sum()) == 1000.0


@pytest.mark.parametrize("device", DEVICES)
def test_autograd_gradcheck_and_native_gradients(sw, device, seed):
    g = torch.Generator().manual_seed(seed)
    # finite values for gradcheck (random_values plants infinities and NaNs)
    x = torch.randn(4, 5, 3, generator=g, dtype=torch.float64).to(device).requires_grad_()
    v = torch.randn((), generator=g, dtype=torch.float64).to(device).requires_grad_()
    idx = torch.tensor([3, -1, 0, 3], device=device)
    with sw.use(include=OP):
        assert torch.autograd.gradcheck(lambda a: a.index_fill(1, idx, 2.0), (x,))
        # the value's gradient is ATen's index_select over the index, which refuses negative
        # values (native raises the same "INDICES element is out of DATA bounds"): wrapped here
        assert torch.autograd.gradcheck(lambda a, b: a.index_fill(1, idx % 5, b), (x, v))
    st = sw.stats()["index_fill"]
    assert st["calls"] > 0 and st["fallback"] == 0, st
    xf = x.detach().float().transpose(0, 2).requires_grad_()  # a transposed leaf
    grad = specs.random_values(list(xf.shape), torch.float32, g).to(device)

    def grads():
        xf.grad = None
        y = xf.index_fill(1, idx, 5.0) * 2
        y.backward(grad)
        return xf.grad.clone()
    nat = grads()
    with sw.use(include=OP):
        ours = grads()
    assert torch.equal(bits(nat), bits(ours))


@pytest.mark.parametrize("device", DEVICES)
def test_deterministic_mode_is_bitwise(sw, device, seed):
    g = torch.Generator().manual_seed(seed)
    base = specs.random_values([64, 300], torch.float16, g).to(device)
    idx = torch.randint(-300, 300, (700,), generator=g).to(device)  # duplicates, wrapped
    prev = torch.are_deterministic_algorithms_enabled()
    torch.use_deterministic_algorithms(True)
    try:
        nat = base.clone().index_fill_(1, idx, -3.0)
        with sw.use(include=OP):
            runs = [base.clone().index_fill_(1, idx, -3.0) for _ in range(3)]
            runs.append(base.t().contiguous().t().index_fill_(1, idx, -3.0))
    finally:
        torch.use_deterministic_algorithms(prev)
    for r in runs:
        assert torch.equal(bits(r), bits(nat))
    assert sw.stats()["index_fill"]["deterministic"] >= 4


@CUDA_SKIP
def test_device_value_is_read_without_a_host_sync(sw):
    x = torch.randn(256, 512, device="cuda")
    idx = torch.randint(-512, 512, (300,), device="cuda")
    v = torch.tensor(4.0, device="cuda")
    want = x.clone().index_fill_(1, idx, 4.0)
    torch.cuda.synchronize()
    with sw.use(include=OP):
        torch.cuda.set_sync_debug_mode("error")
        try:
            got = x.clone().index_fill_(1, idx, v)
        finally:
            torch.cuda.set_sync_debug_mode("default")
    assert torch.equal(got, want)


def test_stats_count_the_fallback_only_where_aten_refuses(sw):
    x = torch.ones(3, 4, dtype=torch.uint16)
    with sw.use(include=OP):
        with pytest.raises(NotImplementedError):
            x.index_fill_(1, torch.tensor([0]), 1)
        torch.ones(3, 4).index_fill_(1, torch.tensor([0]), 1)
    st = sw.stats()["index_fill"]
    assert st["calls"] == 2 and st["fallback"] == 1 and st["cpu"] == 2, st


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("keys", [64, 1000, 5000])
def test_sorted_fill_paths_match_native(sw, device, keys, seed):
    """The column shape on each CUDA path by its key count (index elements): up to 4096 the
    block-sorted fill, past it CUB's sorted fill (index_k_cuda_sorted.h), for a contiguous self
    and a transposed one filled along its outer dim; duplicates and negatives in the index."""
    g = torch.Generator().manual_seed(seed)
    base = specs.random_values([24, 8192], torch.bfloat16, g).to(device)
    idx = torch.randint(-8192, 8192, (keys,), generator=g).to(device)
    for self_, dim in ((base, 1), (base.t(), 0)):
        nat = self_.clone().index_fill_(dim, idx, 2.5)
        with sw.use(include=OP):
            ours = self_.clone().index_fill_(dim, idx, 2.5)
        assert torch.equal(bits(ours), bits(nat)), (keys, dim)
    st = sw.stats()["index_fill"]
    assert st[device] == 2 and st["fallback"] == 0, st
