"""The dim-indexed ops on stridewise (adapter/index_dim.*): index_select, index_add, index_copy,
index_reduce, embedding and embedding_dense_backward, run as gather/scatter over views.

What the audit matrix (tests/test_index_dim_matrix.py) does not check:
- ATen's exact exception type and wording, CPU: bad index values per op and path (index_select
  has two wordings, index_add two), and argument errors (shapes, dtypes, dims, out=, overlap);
- a failed in-place call leaves self bit for bit (ours writes nothing; ATen may write part);
- stats(): each op routed (calls on the device, copies 0, no fallback on the common layouts),
  and the fallback cases counted (index_add with a floating alpha for an integral self,
  index_select of uint16, embedding backward with a grad of another shape than the index's);
- autograd: gradcheck in float64 with routing on (ATen's formulas through our kernels), and the
  gradients of index_select (index_add_ backward) and embedding equal native;
- deterministic mode: bitwise repeatable accumulation.

Every test draws fresh data (STRIDEWISE_SEED, printed on failure) and poisons outputs.
"""
from __future__ import annotations

import warnings

import pytest
import torch

from conftest import BASE_SEED, DEVICES, HAVE_CUDA

OPS = ["index_select", "index_add", "index_copy", "index_reduce", "embedding",
       "embedding_dense_backward"]


def gen(seed):
    return torch.Generator().manual_seed(seed)


def nc(t: torch.Tensor) -> torch.Tensor:
    """The same values in a transposed (non-contiguous) layout."""
    if t.dim() < 2:
        return t
    return t.transpose(0, -1).contiguous().transpose(0, -1)


def outcome(fn):
    try:
        return ("ok", fn())
    except Exception as e:  # noqa: BLE001 - compared as (type, message)
        return (type(e).__name__, str(e).split("\n")[0])


def routed(sw, fn, ops=OPS):
    with sw.use(include=ops):
        return outcome(fn)


def same_outcome(a, b) -> bool:
    if a[0] != b[0]:
        return False
    if a[0] != "ok":
        return a[1] == b[1]
    x, y = a[1], b[1]
    return x.shape == y.shape and x.dtype == y.dtype and torch.equal(x, y)


# --------------------------------------------------------------------------------------------
# bad index values: ATen's wording on the CPU, nothing written


def bad_index_calls(seed):
    g = gen(seed)
    x3 = nc(torch.randn(4, 5, 6, generator=g))
    x2 = torch.randn(5, 6, generator=g)
    x1 = torch.randn(5, generator=g)
    calls = {}
    for bad in (7, -1, 2**32 + 1, -(2**33)):
        for idt in (torch.int64, torch.int32):
            if idt == torch.int32 and abs(bad) > 2**31:
                continue
            i = torch.tensor([0, bad, 1], dtype=idt)
            s3 = torch.randn(4, 3, 6, generator=g)
            tag = f"{bad}/{str(idt)[6:]}"
            calls[f"select d1 r3 {tag}"] = lambda i=i: x3.index_select(1, i)
            calls[f"select d1 r2 {tag}"] = lambda i=i: x2.index_select(0, i)
            calls[f"select d0 r1 {tag}"] = lambda i=i: x1.index_select(0, i)
            calls[f"select out nc {tag}"] = lambda i=i: torch.index_select(
                x2, 1, i, out=torch.empty(3, 5).t())
            calls[f"add d1 r3 {tag}"] = lambda i=i, s=s3: x3.clone().index_add_(1, i, s)
            calls[f"add d1 r2 {tag}"] = lambda i=i: x2.clone().index_add_(1, i, torch.ones(5, 3))
            calls[f"add d0 r1 {tag}"] = lambda i=i: x1.clone().index_add_(0, i, torch.ones(3))
            calls[f"reduce d1 r3 {tag}"] = lambda i=i, s=s3: x3.clone().index_reduce_(1, i, s, "amax")
            calls[f"emb {tag}"] = lambda i=i: torch.nn.functional.embedding(i.view(3, 1), x2)
            if idt == torch.int64:
                calls[f"copy d1 r3 {tag}"] = lambda i=i, s=s3: x3.clone().index_copy_(1, i, s)
    return calls


def test_bad_index_errors_match_aten_cpu(sw, seed):
    problems = []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # index_reduce's beta warning
        for name, fn in bad_index_calls(seed).items():
            want, got = outcome(fn), routed(sw, fn)
            if want[0] == "ok" or not same_outcome(want, got):
                problems.append(f"{name}: native {want[:2]} vs stridewise {got[:2]}")
    st = sw.stats()
    for op in ("index_select", "index_add", "index_copy", "index_reduce", "embedding"):
        if st[op]["errors"] == 0 or st[op]["fallback"] != 0:
            problems.append(f"{op}: errors {st[op]['errors']}, fallback {st[op]['fallback']}")
    assert not problems, f"STRIDEWISE_SEED={BASE_SEED}\n" + "\n".join(problems)


@pytest.mark.parametrize("op", ["add", "copy", "reduce"])
def test_failed_in_place_call_writes_nothing(sw, seed, op):
    """ATen's CPU kernels write the rows before the bad one; ours checks every index value
    first and leaves self as it was, bit for bit."""
    g = gen(seed)
    x = nc(torch.randn(4, 7, 5, generator=g))
    before = x.clone()
    i = torch.randint(0, 7, (6,), generator=g)
    i[4] = 7
    src = torch.randn(4, 6, 5, generator=g)
    fn = {"add": lambda: x.index_add_(1, i, src), "copy": lambda: x.index_copy_(1, i, src),
          "reduce": lambda: x.index_reduce_(1, i, src, "prod")}[op]
    with sw.use(include=OPS), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with pytest.raises(IndexError):
            fn()
    assert torch.equal(x.view(torch.int32), before.view(torch.int32)), f"STRIDEWISE_SEED={BASE_SEED}"


# --------------------------------------------------------------------------------------------
# argument errors: ATen's type and wording


def argument_error_calls(seed):
    g = gen(seed)
    x = torch.randn(4, 5, generator=g)
    i = torch.tensor([0, 2])
    s = torch.randn(4, 2, generator=g)
    w = torch.randn(6, 3, generator=g)
    return {
        "select 2-D index": lambda: x.index_select(1, i.view(1, 2)),
        "select float index": lambda: x.index_select(1, i.float()),
        "select bad dim": lambda: x.index_select(2, i),
        "select out dtype": lambda: torch.index_select(x, 1, i, out=torch.empty(4, 2, dtype=torch.float64)),
        "select out overlaps self": lambda: torch.index_select(x, 1, i, out=x[:, :2]),
        "select scalar self": lambda: torch.tensor(1.0).index_select(0, torch.tensor([0, 0])),
        "add dtype": lambda: x.clone().index_add_(1, i, s.double()),
        "add count": lambda: x.clone().index_add_(1, torch.tensor([0, 1, 2]), s),
        "add 2-D index": lambda: x.clone().index_add_(1, i.view(2, 1), s),
        "add float index": lambda: x.clone().index_add_(1, i.float(), s),
        "add bad dim": lambda: x.clone().index_add_(3, i, s),
        "add out dtype": lambda: torch.index_add(x, 1, i, s, out=torch.empty(4, 5, dtype=torch.int64)),
        "add out overlaps source": lambda: torch.index_add(s.expand(4, 2).clone(), 1, i, s, out=s),
        "add expanded self": lambda: torch.zeros(1, 5).expand(4, 5).index_add_(1, i, s),
        "add partial overlap": lambda: torch.index_add(x, 1, i, s, out=torch.cat([x, x], 1)[:, 1:6]),
        "copy int32 index": lambda: x.clone().index_copy_(1, i.int(), s),
        "copy slice shapes": lambda: x.clone().index_copy_(1, i, torch.randn(3, 2)),
        "reduce bad reduce": lambda: x.clone().index_reduce_(1, i, s, "sum"),
        "reduce bool": lambda: x.bool().index_reduce_(1, i, s.bool(), "amax"),
        "reduce complex": lambda: x.cfloat().index_reduce_(1, i, s.cfloat(), "prod"),
        "emb 3-D weight": lambda: torch.embedding(w.view(2, 3, 3), i),
        "emb float indices": lambda: torch.embedding(w, i.float()),
        "emb backward float indices": lambda: torch.ops.aten.embedding_dense_backward(s, i.float(), 6, -1, False),
    }


def test_argument_checks_match_aten_cpu(sw, seed):
    """Same exception type and first line as native; where native accepts a call that looks
    wrong (an out= that partially overlaps self, index_reduce of bool or complex from rank 2
    up), the same result."""
    problems, raised = [], 0
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for name, fn in argument_error_calls(seed).items():
            want, got = outcome(fn), routed(sw, fn)
            raised += want[0] != "ok"
            if not same_outcome(want, got):
                problems.append(f"{name}: native {want[:2]} vs stridewise {got[:2]}")
    assert not problems, f"STRIDEWISE_SEED={BASE_SEED}\n" + "\n".join(problems)
    assert raised >= 18, raised  # the calls still exercise the checks


# --------------------------------------------------------------------------------------------
# routing, statistics, fallbacks


def routed_calls(seed, device):
    """One call of each op with non-contiguous operands; (name, fn, op)."""
    g = gen(seed)
    r = lambda *s: torch.randn(*s, generator=g).to(device)  # noqa: E731
    x = nc(r(6, 9, 5))
    i = torch.randint(0, 9, (12,), generator=g).to(device)[::2]  # step-sliced index
    perm = torch.randperm(9, generator=g)[:3].to(device)
    src = nc(r(6, 6, 5))
    w = nc(r(9, 7))
    idx2 = torch.randint(0, 9, (4, 3), generator=g).to(device)
    grad = r(4, 3, 7)[:, :, ::1]
    return [
        ("index_select", lambda: x.index_select(1, i)),
        ("index_add", lambda: x.index_add(1, i, src)),
        ("index_copy", lambda: x.index_copy(1, perm, src[:, :3])),
        ("index_reduce", lambda: x.index_reduce(1, i, src, "mean", include_self=False)),
        ("embedding", lambda: torch.nn.functional.embedding(idx2.t(), w)),
        ("embedding_dense_backward",
         lambda: torch.ops.aten.embedding_dense_backward(grad, idx2, 9, -1, False)),
    ]


@pytest.mark.parametrize("device", DEVICES)
def test_each_op_routed_without_copies(sw, seed, device):
    problems = []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for op, fn in routed_calls(seed, device):
            want = fn()
            sw.reset_stats()
            with sw.use(include=[op]):
                got = fn()
            st = sw.stats()[op]
            if op in ("index_add", "index_reduce", "embedding_dense_backward") and device != "cpu":
                ok = torch.allclose(got, want, rtol=1e-5, atol=1e-5)
            else:
                ok = torch.equal(got, want)
            if not ok:
                problems.append(f"{op}: differs from native (max {(got - want).abs().max()})")
            if (st["calls"], st[device], st["copies"], st["fallback"]) != (1, 1, 0, 0):
                problems.append(f"{op}: stats {st}")
            if op != "embedding_dense_backward" and st["noncontig_self"] != 1:
                problems.append(f"{op}: non-contiguous self not counted: {st}")
    assert not problems, f"STRIDEWISE_SEED={BASE_SEED}\n" + "\n".join(problems)


def test_fallback_cases_give_aten_results_and_are_counted(sw, seed):
    g = gen(seed)
    x = torch.randn(5, 4, generator=g)
    i = torch.tensor([1, 3, 1])
    s = torch.randn(3, 4, generator=g)
    u = torch.randint(0, 100, (5, 4), generator=g).to(torch.uint16)
    idx = torch.randint(0, 5, (2, 3), generator=g)
    gr = torch.randn(2, 3, 4, generator=g)
    xi = torch.randint(-9, 9, (5, 4), generator=g)
    cases = [
        ("index_add", lambda: xi.index_add(0, i, xi[:3], alpha=2.5)),
        # uint16: ATen's index_copy has no kernel (its error); index_select moves it, and so do
        # we (tests/test_dtype_rules.py)
        ("index_copy", lambda: u.index_copy(0, i, u[:3])),
        # a grad of another shape than the index's plus D (ATen reads it as (numel, D)) whose
        # rows do not flatten with the index's (every layout of the index itself runs on the
        # core: tests/test_embedding_backward_kindex.py)
        ("embedding_dense_backward",
         lambda: torch.ops.aten.embedding_dense_backward(gr.view(6, 4), idx.t().contiguous().t(), 5,
                                                         -1, False)),
    ]
    problems = []
    for op, fn in cases:
        want = outcome(fn)
        sw.reset_stats()
        got = routed(sw, fn)
        st = sw.stats()[op]
        if not same_outcome(want, got):
            problems.append(f"{op}: native {want[:2]} vs stridewise {got[:2]}")
        if (st["calls"], st["fallback"]) != (1, 1):
            problems.append(f"{op}: a fallback not counted: {st}")
    assert not problems, f"STRIDEWISE_SEED={BASE_SEED}\n" + "\n".join(problems)


# --------------------------------------------------------------------------------------------
# autograd


def test_gradcheck_float64_with_routing(sw, seed):
    g = gen(seed)
    x = nc(torch.randn(3, 5, 4, dtype=torch.float64, generator=g)).requires_grad_()
    i = torch.randint(0, 5, (6,), generator=g)
    src = nc(torch.randn(3, 6, 4, dtype=torch.float64, generator=g)).requires_grad_()
    w = torch.randn(7, 3, dtype=torch.float64, generator=g).requires_grad_()
    idx = torch.randint(0, 7, (2, 4), generator=g).t()
    perm = torch.randperm(5, generator=g)[:4]
    src4 = torch.randn(3, 4, 4, dtype=torch.float64, generator=g).requires_grad_()
    checks = {
        "index_select": (lambda a: a.index_select(1, i), (x,)),
        "index_add": (lambda a, b: a.index_add(1, i, b, alpha=1), (x, src)),
        "index_copy": (lambda a, b: a.index_copy(1, perm, b), (x, src4)),
        "index_reduce": (lambda a, b: a.index_reduce(1, perm, b, "prod"), (x, src4)),
        "embedding": (lambda a: torch.nn.functional.embedding(idx, a), (w,)),
    }
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with sw.use(include=OPS):
            for name, (fn, args) in checks.items():
                assert torch.autograd.gradcheck(fn, args), name
    st = sw.stats()
    for op in ("index_select", "index_add", "index_copy", "index_reduce", "embedding",
               "embedding_dense_backward"):
        assert st[op]["calls"] > 0, (op, st[op])


@pytest.mark.parametrize("device", DEVICES)
def test_gradients_equal_native(sw, seed, device):
    """index_select's backward is index_add_ into zeros, embedding's is
    embedding_dense_backward: with every op routed they run on ours."""
    g = gen(seed)
    x = nc(torch.randn(4, 50, 8, generator=g)).to(device).requires_grad_()
    i = torch.randint(0, 50, (200,), generator=g).to(device)  # heavy duplicates
    w = torch.randn(30, 16, generator=g).to(device).requires_grad_()
    idx = torch.randint(0, 30, (5, 40), generator=g).to(device)
    up1 = torch.randn(4, 200, 8, generator=g).to(device)
    up2 = torch.randn(5, 40, 16, generator=g).to(device)

    def grads():
        x.grad = w.grad = None
        (x.index_select(1, i) * up1).sum().backward()
        (torch.nn.functional.embedding(idx, w) * up2).sum().backward()
        return x.grad.clone(), w.grad.clone()

    want = grads()
    with sw.use(include=OPS):
        got = grads()
    st = sw.stats()
    for a, b in zip(got, want):
        # CPU: the same order as ATen's loops; CUDA: atomics in any order
        if device == "cpu":
            assert torch.allclose(a, b, rtol=1e-6, atol=1e-6), (a - b).abs().max()
        else:
            assert torch.allclose(a, b, rtol=1e-5, atol=1e-5), (a - b).abs().max()
    assert st["index_add"]["calls"] == 1 and st["embedding_dense_backward"]["calls"] == 1, st


@pytest.mark.parametrize("device", DEVICES)
def test_deterministic_mode_is_bitwise_repeatable(sw, seed, device):
    g = gen(seed)
    x = torch.randn(64, 33, generator=g).to(device)
    i = torch.randint(0, 64, (4096,), generator=g).to(device)
    src = torch.randn(4096, 33, generator=g).to(device)
    grad = torch.randn(4096, 33, generator=g).to(device)
    before = torch.are_deterministic_algorithms_enabled()
    torch.use_deterministic_algorithms(True)
    try:
        with sw.use(include=OPS), warnings.catch_warnings():
            warnings.simplefilter("ignore")
            runs = [(x.index_add(0, i, src), x.index_reduce(0, i, src, "mean"),
                     x.index_copy(0, i, src),
                     torch.ops.aten.embedding_dense_backward(grad, i, 64, -1, False))
                    for _ in range(3)]
    finally:
        torch.use_deterministic_algorithms(before)
    for r in runs[1:]:
        for a, b in zip(r, runs[0]):
            assert torch.equal(a.view(torch.int32), b.view(torch.int32))
    # index_copy with duplicates: the last writer in index order (ATen's deterministic mode)
    last = {int(v): k for k, v in enumerate(i.tolist())}
    ref = x.clone()
    ref[list(last)] = src[list(last.values())]
    assert torch.equal(runs[0][2], ref)
    st = sw.stats()
    assert st["index_add"]["deterministic"] == 3 and st["index_copy"]["fallback"] == 0, st


@pytest.mark.parametrize("device", DEVICES)
def test_index_add_alpha_in_the_core(sw, seed, device):
    """alpha is the scatter's src scale (ScatterArgs::has_alpha), not ATen's kernel: exact for
    integers and bool, the float64 rule for floating types (ATen's CPU kernel fuses the
    multiply-add; ours multiplies, then adds in the accumulation type)."""
    from stridewise.testing import accuracy

    g = gen(seed)
    i = torch.randint(0, 40, (300,), generator=g).to(device)
    problems = []
    for dtype, alpha in [(torch.float32, 0.37), (torch.float16, -3), (torch.bfloat16, 2.5),
                         (torch.float64, 1e-3), (torch.complex64, 2 - 1j), (torch.int64, -7),
                         (torch.int8, 3), (torch.bool, True)]:
        base = torch.randn(40, 3, 8, generator=g) * 4
        srcb = torch.randn(300, 3, 8, generator=g) * 4
        x = nc(base.to(dtype)).to(device)
        src = srcb.to(dtype).to(device).transpose(1, 2).contiguous().transpose(1, 2)
        want = x.index_add(0, i, src, alpha=alpha)
        sw.reset_stats()
        with sw.use(include=["index_add"]):
            got = x.index_add(0, i, src, alpha=alpha)
        st = sw.stats()["index_add"]
        if st["fallback"] != 0 or st["calls"] != 1:
            problems.append(f"{dtype}: not run by the core: {st}")
        if not (dtype.is_floating_point or dtype.is_complex):
            if not torch.equal(got, want):
                problems.append(f"{dtype}: differs from native")
            continue
        ref = x.to(torch.complex128 if dtype.is_complex else torch.float64).index_add(
            0, i, src.to(torch.complex128 if dtype.is_complex else torch.float64), alpha=alpha)
        p = accuracy.float64_problem(f"index_add {dtype} alpha={alpha}", got, want, ref)
        if p:
            problems.append(p)
    assert not problems, f"STRIDEWISE_SEED={BASE_SEED}\n" + "\n".join(problems)


@pytest.mark.parametrize("device", DEVICES)
def test_embedding_backward_padding_and_scale(sw, seed, device):
    """padding_idx: ATen skips those indices (the row stays zero); ours adds them, then clears
    the row. scale_grad_by_freq: each row's sum divided by its count (ours: a mean)."""
    g = gen(seed)
    idx = torch.randint(0, 12, (6, 50), generator=g).to(device)
    grad = torch.randn(6, 50, 16, generator=g).to(device)
    problems = []
    for pad in (-1, 0, 5, 11, 40):
        for scale in (False, True):
            want = torch.ops.aten.embedding_dense_backward(grad, idx, 12, pad, scale)
            sw.reset_stats()
            with sw.use(include=["embedding_dense_backward"]):
                got = torch.ops.aten.embedding_dense_backward(grad, idx, 12, pad, scale)
            st = sw.stats()["embedding_dense_backward"]
            if (st["calls"], st["fallback"]) != (1, 0):
                problems.append(f"pad {pad} scale {scale}: {st}")
            if not torch.allclose(got, want, rtol=1e-5, atol=1e-6):
                problems.append(f"pad {pad} scale {scale}: max diff {(got - want).abs().max()}")
            if 0 <= pad < 12 and bool(got[pad].any()):
                problems.append(f"pad {pad} scale {scale}: the padding row is not zero")
    assert not problems, f"STRIDEWISE_SEED={BASE_SEED}\n" + "\n".join(problems)
