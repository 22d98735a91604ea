"""embedding_dense_backward on stridewise in every layout (adapter/index_dim.cpp).

Where the index's dims (and grad's leading dims with them) flatten to one as a view, the op is a
scatter of grad's rows into zeros(N, D); where they do not (a transposed, permuted, expanded or
step-sliced index of rank 2 or more, an expanded or transposed grad), it is index_put_ with one
index over grad's shape on the k-index core (core/include/stridewise/index_k.h), a mean for
scale_grad_by_freq (Combine::kMean without self). Either way nothing is copied and ATen's kernel
never runs: stats() counts calls 1, fallback 0, copies 0.

How results are judged:
- sums (no scale) on the CPU: bitwise equal to native for float32/float64 (ATen's CPU kernel and
  both of ours add per step in the storage type, in index order) and, on the k-index path, for
  float16/bfloat16 too; on CUDA (atomics), ATen's float64 rule
  (stridewise.testing.accuracy: err(ours) <= 4 * err(native) + 8 eps, err on the tensor's scale).
- means (scale_grad_by_freq) against a float64 reference: the same rule for float32/float64
  (ours sums in float32 and divides once, as ATen's CUDA kernel; ATen's CPU kernel adds
  1/count-scaled terms: the two land equally far from float64, measured ratio 0.67..1.33 over
  20 tensors); float16/bfloat16 means are summed in float32 and rounded once, so every element is
  within one unit in the last place of the correctly rounded float64 mean, and on the CPU the
  tensor is no farther from float64 than native's (measured: 5-10x closer).
- the two paths of ours agree bitwise where they share arithmetic (sums in float32/float64, means
  in every floating dtype): the same values in a flattening and in a non-flattening layout.
- a bad index value: ATen's CPU kernel raises nothing (it skips the value without scale, and
  writes outside its count buffer with it), so ours keeps the flattening path's error on both
  paths: RuntimeError "index 9 is out of bounds for dimension 0 with size 7", nothing returned
  (num_weights 0 included: every value is then out of range).
- deterministic mode: bitwise repeatable; on the CPU also whatever the thread count.

Every test draws fresh data (STRIDEWISE_SEED, printed on failure).
"""
from __future__ import annotations

import contextlib
import re

import pytest
import torch

from conftest import BASE_SEED, CUDA_SKIP, DEVICES
from stridewise.testing import accuracy

OP = "embedding_dense_backward"
N, D = 13, 6


def gen(seed):
    return torch.Generator().manual_seed(seed)


def index_layouts(g, dtype):
    """(name, index, flattens): index values in [0, N) in the layouts the op meets."""
    r = lambda *s: torch.randint(0, N, s, generator=g).to(dtype)  # noqa: E731
    return [
        ("transposed", r(5, 4).t(), False),
        ("permuted rank 3", r(3, 4, 5).permute(2, 0, 1), False),
        ("rank 4", r(2, 3, 2, 2).permute(3, 1, 0, 2), False),
        ("expanded outer", r(1, 5).expand(4, 5), False),
        ("expanded inner", r(4, 1).expand(4, 5), False),
        ("step-sliced", r(4, 10)[:, ::2], False),
        ("offset step-sliced", r(6, 12)[1:5, 2::3], False),
        ("empty transposed", r(5, 0).t(), False),
        ("contiguous", r(4, 5), True),
        ("offset rows", r(6, 5)[2:5], True),
        ("rank 1 step", r(21)[::3], True),
        ("rank 0", r(1)[0], True),
        ("empty", r(0), True),
    ]


def grad_layouts(g, shape, dtype, device):
    """grad of shape index.shape + [D]: contiguous, D slowest (transposed), step-sliced along D,
    expanded along the first index dim (a broadcast upstream gradient)."""
    full = list(shape) + [D]
    k = len(shape)
    out = [("grad contiguous", torch.randn(full, generator=g).to(dtype))]
    if k >= 1:
        t = torch.randn([D] + list(shape), generator=g).to(dtype)
        out.append(("grad D slowest", t.permute(list(range(1, k + 1)) + [0])))
        out.append(("grad step", torch.randn(full[:-1] + [2 * D], generator=g).to(dtype)[..., ::2]))
        if shape[0] > 1:
            one = torch.randn([1] + full[1:], generator=g).to(dtype)
            out.append(("grad expanded", one.expand(full)))
    return [(n, t.to(device)) for n, t in out]


def native_and_ours(sw, grad, idx, pad, scale):
    if grad.is_cuda and idx.numel() == 0 and scale:
        # ATen's CUDA kernel launches an empty grid for an empty index with scale_grad_by_freq
        # (torch 2.11 on the H200, 2026-12-04: "CUDA error: invalid argument"); its CPU
        # kernel's answer, zeros, is the reference
        want = torch.ops.aten.embedding_dense_backward(grad.cpu(), idx.cpu(), N, pad, scale).to(grad.device)
    else:
        want = torch.ops.aten.embedding_dense_backward(grad, idx, N, pad, scale)
    sw.reset_stats()
    with sw.use(include=[OP]):
        got = torch.ops.aten.embedding_dense_backward(grad, idx, N, pad, scale)
    return want, got, sw.stats()[OP]


def reference64(grad, idx, pad, scale):
    return torch.ops.aten.embedding_dense_backward(grad.double().cpu(), idx.cpu(), N, pad, scale)


@pytest.mark.parametrize("device", DEVICES)
def test_every_layout_runs_on_the_core(sw, seed, device):
    g = gen(seed)
    problems, cases = [], 0
    for idt in (torch.int64, torch.int32):
        for name, idx, _ in index_layouts(g, idt):
            idx = idx.to(device)
            for gname, grad in grad_layouts(g, tuple(idx.shape), torch.float32, device):
                for scale in (False, True):
                    pad = int(torch.randint(0, N, (1,), generator=g)) if cases % 2 else -1
                    what = f"{name} {str(idt)[6:]} / {gname} / scale {scale} pad {pad}"
                    want, got, st = native_and_ours(sw, grad, idx, pad, scale)
                    cases += 1
                    if (st["calls"], st[device], st["fallback"], st["copies"]) != (1, 1, 0, 0):
                        problems.append(f"{what}: stats {st}")
                    if scale or device != "cpu":
                        p = accuracy.float64_problem(what, got, want, reference64(grad, idx, pad, scale))
                        if p:
                            problems.append(p)
                    elif not torch.equal(got, want):
                        problems.append(f"{what}: differs from native (max {(got - want).abs().max()})")
                    if pad >= 0 and bool(got[pad].any()):
                        problems.append(f"{what}: the padding row received a gradient")
    assert cases > 150, cases
    assert not problems, f"STRIDEWISE_SEED={BASE_SEED}\n" + "\n".join(problems[:20])


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.float16, torch.bfloat16])
def test_both_paths_agree_bitwise_cpu(sw, seed, dtype):
    """The same values in a flattening layout (the scatter) and a non-flattening one (the
    k-index core): one order, one arithmetic where both paths share it."""
    g = gen(seed)
    base = torch.randint(0, N, (7, 30), generator=g)
    grad = torch.randn(30, 7, D, generator=g).to(dtype)
    flat_idx, flat_grad = base.t().contiguous(), grad.contiguous()
    nonflat_idx = base.t()  # the same values, transposed: its dims do not flatten
    problems = []
    for scale in (False, True):
        if not scale and dtype in (torch.float16, torch.bfloat16):
            continue  # the scatter sums these in float32, the k-index core per step as ATen
        with sw.use(include=[OP]):
            a = torch.ops.aten.embedding_dense_backward(flat_grad, flat_idx, N, -1, scale)
            b = torch.ops.aten.embedding_dense_backward(grad, nonflat_idx, N, -1, scale)
        if not torch.equal(a.view(torch.uint8), b.view(torch.uint8)):
            problems.append(f"scale {scale}: paths differ (max {(a - b).abs().max()})")
    assert sw.stats()[OP]["fallback"] == 0
    assert not problems, f"STRIDEWISE_SEED={BASE_SEED}\n" + "\n".join(problems)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.float16, torch.bfloat16])
def test_accumulation_against_float64(sw, seed, device, dtype):
    """Heavy duplicates (about 40 writers per row) in a non-flattening index."""
    g = gen(seed)
    problems = []
    for trial in range(4):
        idx = torch.randint(0, N, (40, 13), generator=g).t().to(device)
        grad = (torch.randn(13, 40, 2 * D, generator=g) * 3).to(dtype).to(device)
        for scale in (False, True):
            what = f"trial {trial} scale {scale}"
            want, got, st = native_and_ours(sw, grad, idx, -1, scale)
            ref = reference64(grad, idx, -1, scale)
            if st["fallback"] or st["copies"]:
                problems.append(f"{what}: stats {st}")
            if not scale and device == "cpu":
                if not torch.equal(got, want):
                    problems.append(f"{what}: sum differs from native")
                continue
            p = accuracy.float64_problem(what, got, want, ref)
            if p:
                problems.append(p)
            if scale and dtype in (torch.float16, torch.bfloat16):
                # rounded once: within one ulp of the correctly rounded float64 mean
                exact = ref.to(dtype)
                ulp = torch.finfo(dtype).eps * exact.double().abs().clamp_min(torch.finfo(dtype).tiny)
                off = ((got.cpu().double() - exact.double()).abs() / ulp).max().item()
                if off > 1:
                    problems.append(f"{what}: {off:.1f} ulp from the float64 mean")
                eo, en = accuracy.scaled_error(got, ref), accuracy.scaled_error(want, ref)
                if device == "cpu" and eo > en:
                    problems.append(f"{what}: err {eo:.3e} > native's {en:.3e}")
    assert not problems, f"STRIDEWISE_SEED={BASE_SEED}\n" + "\n".join(problems)


def test_bad_index_values_cpu(sw, seed):
    g = gen(seed)
    # ATen's CPU kernel (torch 2.13) raises nothing for a bad value: without scale_grad_by_freq it
    # skips it (with it, it writes outside its count buffer, so it is never run here). If it ever
    # raises, ours should take its wording: this is the check that says so.
    grad = torch.randn(5, 4, D, generator=g)
    bad_idx = torch.randint(0, N, (4, 5), generator=g).t().contiguous()
    bad_idx[2, 1] = N
    torch.ops.aten.embedding_dense_backward(grad, bad_idx, N, -1, False)

    problems, calls = [], 0
    for idt in (torch.int64, torch.int32):
        for bad in (N, N + 5, -1, -N - 1, (2**31 - 1) if idt == torch.int32 else 2**40):
            for name, idx, _ in index_layouts(g, idt):
                if idx.numel() == 0:
                    continue
                # through the view (an expanded index: every repeat of the element)
                idx[tuple(int(torch.randint(0, s, (1,), generator=g)) for s in idx.shape)] = bad
                grad = torch.randn(list(idx.shape) + [D], generator=g)
                for scale in (False, True):
                    calls += 1
                    with sw.use(include=[OP]):
                        try:
                            torch.ops.aten.embedding_dense_backward(grad, idx, N, -1, scale)
                            problems.append(f"{name} {bad} scale {scale}: no error")
                            break  # ATen ran it: never with scale (its out-of-bounds write)
                        except RuntimeError as e:
                            want = f"index {bad} is out of bounds for dimension 0 with size {N}"
                            if type(e) is not RuntimeError or str(e).split("\n")[0] != want:
                                problems.append(f"{name} {bad}: {type(e).__name__}: {e}")
    # num_weights 0: every value is out of range (ours names one of them), on both paths
    base = torch.randint(0, N, (4, 5), generator=g)
    for name, idx in (("contiguous", base), ("transposed", base.t())):
        for scale in (False, True):
            calls += 1
            with sw.use(include=[OP]):
                try:
                    torch.ops.aten.embedding_dense_backward(torch.randn(*idx.shape, D), idx, 0, -1,
                                                            scale)
                    problems.append(f"num_weights 0 {name}: no error")
                    break
                except RuntimeError as e:
                    m = re.fullmatch(r"index (\d+) is out of bounds for dimension 0 with size 0",
                                     str(e).split("\n")[0])
                    if not m or int(m.group(1)) not in base.view(-1).tolist():
                        problems.append(f"num_weights 0 {name}: {e}")
    st = sw.stats()[OP]
    if st["errors"] != calls or st["fallback"] != 0:
        problems.append(f"stats {st} after {calls} bad calls")
    assert not problems, f"STRIDEWISE_SEED={BASE_SEED}\n" + "\n".join(problems[:20])


@CUDA_SKIP
def test_bad_index_value_cuda_sync(cuda_check_mode, seed):
    sw = cuda_check_mode
    sw.set_cuda_check_mode("sync")
    g = gen(seed)
    idx = torch.randint(0, N, (4, 5), generator=g).t().contiguous().t()  # does not flatten
    idx[1, 3] = N + 2
    grad = torch.randn(4, 5, D, generator=g).cuda()
    for scale in (False, True):
        with sw.use(include=[OP]):
            with pytest.raises(RuntimeError) as ei:
                torch.ops.aten.embedding_dense_backward(grad, idx.cuda(), N, -1, scale)
        msg = str(ei.value)
        for part in ("stridewise.embedding_dense_backward",
                     f"index {N + 2} is out of bounds for dimension 0 with size {N}"):
            assert part in msg, msg
    assert sw.stats()[OP]["fallback"] == 0


@pytest.mark.parametrize("device", DEVICES)
def test_deterministic_mode_is_bitwise_repeatable(sw, seed, device):
    g = gen(seed)
    idx = torch.randint(0, 64, (64, 64), generator=g).t().to(device)  # 4096 writers, 64 rows
    grad = torch.randn(64, 64, 33, generator=g).to(device)
    before = torch.are_deterministic_algorithms_enabled()
    torch.use_deterministic_algorithms(True)
    try:
        with sw.use(include=[OP]):
            runs = [[torch.ops.aten.embedding_dense_backward(grad, idx, 64, 3, s) for s in (False, True)]
                    for _ in range(3)]
    finally:
        torch.use_deterministic_algorithms(before)
    for r in runs[1:]:
        for a, b in zip(r, runs[0]):
            assert torch.equal(a.view(torch.int32), b.view(torch.int32)), f"STRIDEWISE_SEED={BASE_SEED}"
    st = sw.stats()[OP]
    assert st["deterministic"] == 6 and st["fallback"] == 0, st


def test_cpu_result_does_not_depend_on_the_thread_count(sw, seed):
    g = gen(seed)
    # The mean runs in parallel over its rows, 512 rows a chunk at D = 64: about 3,800 rows
    idx = torch.randint(0, 4000, (100, 120), generator=g).t()
    grad = torch.randn(120, 100, 64, generator=g)
    threads = torch.get_num_threads()
    res = []
    try:
        for n in (1, 3, 8):
            torch.set_num_threads(n)
            with sw.use(include=[OP]):
                res.append([torch.ops.aten.embedding_dense_backward(grad, idx, 4000, -1, s)
                             for s in (False, True)])
    finally:
        torch.set_num_threads(threads)
    for r in res[1:]:
        for a, b in zip(r, res[0]):
            assert torch.equal(a.view(torch.int32), b.view(torch.int32)), f"STRIDEWISE_SEED={BASE_SEED}"
    assert sw.stats()[OP]["fallback"] == 0, sw.stats()[OP]


def test_autograd_through_a_transposed_index(sw, seed):
    """Autograd's formula (embedding's backward) through our kernel for an index laid out as a
    transposed batch: gradcheck in float64 (padding_idx and scale_grad_by_freq change the
    gradient on purpose, so gradcheck runs without them), and with them the float32 gradient
    against native's by the float64 rule."""
    g = gen(seed)
    w = torch.randn(N, 3, dtype=torch.float64, generator=g).requires_grad_()
    idx = torch.randint(0, N, (6, 4), generator=g).t()
    with sw.use(include=[OP]):
        assert torch.autograd.gradcheck(lambda w: torch.nn.functional.embedding(idx, w), (w,))
    up = torch.randn(4, 6, 3, dtype=torch.float64, generator=g)
    pad = int(idx[0, 0])
    problems = []
    for scale in (False, True):
        grads = {}
        for name, dt, routed in (("native", torch.float32, False), ("ours", torch.float32, True),
                                 ("ref", torch.float64, False)):
            wd = w.detach().to(dt).requires_grad_()
            with sw.use(include=[OP]) if routed else contextlib.nullcontext():
                out = torch.nn.functional.embedding(idx, wd, padding_idx=pad, scale_grad_by_freq=scale)
                (out * up.to(dt)).sum().backward()
            grads[name] = wd.grad
        p = accuracy.float64_problem(f"scale {scale}", grads["ours"], grads["native"], grads["ref"])
        if p:
            problems.append(p)
        if bool(grads["ours"][pad].any()):
            problems.append(f"scale {scale}: the padding row received a gradient")
    st = sw.stats()[OP]
    assert st["calls"] >= 3 and st["fallback"] == 0, st
    assert not problems, f"STRIDEWISE_SEED={BASE_SEED}\n" + "\n".join(problems)
