"""Advanced indexing on stridewise (issue 22): index.Tensor (x[i], x[:, i], x[i, j], x[mask]),
index_put / index_put_ / _index_put_impl_ (accumulate both ways), take, put / put_, routed by
the names "index", "index_put", "take" and "put".

What this file checks (the audit matrix, tests/test_index_adv_matrix.py, checks the layout space
through the auditor's specs; PyTorch's own cases are in tests/test_index_adv_torch.py):
- each op routed: stats()[name] counts the call on its device, 'copies' 0, 'fallback' 0, the
  non-contiguous operands counted; results bitwise equal to native;
- the layout matrix (stridewise.testing.layouts: contiguous, expand, expand_all, transpose,
  permute, step_slice, offset, compound) for self, every index tensor and values, ranks 0..8
  and 10, size-0 and size-1 dims: x[i], x[:, i], x[..., i], x[i, j] adjacent, x[i, :, j]
  separated (broadcast dims first), broadcasting index tensors ((3, 1) with (4,)), bool and
  uint8 masks over one and two dims, int32 and int64 indices, negative indices (an expanded
  negative index among them: FlagGems' bug), duplicates, empty indices;
- every dtype ATen accepts; index_put_ with broadcast values (0-dim, trailing, (1, n));
  accumulate true and false; take/put on a non-contiguous self written where it lives (the
  bytes between a step-sliced self's elements compared too: nothing reshaped or copied);
- out= (index.Tensor_out, take.out, put.out, index_put.out), non-contiguous and poisoned (NaN);
- ATen's exception types and first lines for bad arguments and out-of-range values (CPU), the
  in-place write ops leaving self bit for bit as it was after a bad value;
- autograd: gradcheck in float64 with routing on; gradients of x[i] and x[:, i] on a
  non-contiguous x equal native, their backward (index_put with accumulate) counted;
- deterministic mode: accumulation bitwise repeatable, and x[i] = v with duplicates keeps the
  last writer in index order.

Data: fresh random values (STRIDEWISE_SEED, printed in every failure), never zeros; outputs
poisoned with NaN / sentinels. Data movement is compared bitwise with native; accumulation of
floating types with the float64 rule (stridewise.testing.accuracy.float64_problem), integers
exactly.

Routing: until the adapter registers these names, `routing()` runs the calls natively (so the
value checks run) and every stats assertion fails, naming the missing op.

The planted faults (2026-12-02, by hand, then reverted; against the adapter of 25c9246): a
TorchDispatchMode (kept out of the repo) entered by routing() together with sw.use(), so every
routed call still ran on stridewise and then was corrupted, one kind at a time:
  wrong          the first element of every index.Tensor / take / index_put / put result (and of
                 self after index_put_ / put_ / _index_put_impl_) moved by 1% of the scale (bool:
                 negated);
  acc            the same, by half the scale, on accumulating index_put / put calls only;
  swallow        an IndexError from these ops swallowed (self returned);
  first_writer   deterministic x[i] = v with duplicates run with index and values reversed;
  out_untouched  every *.out call returning out unwritten.
What failed:
  wrong: test_each_op_routed (11 calls "differs from native"), test_index_layout_matrix and
    test_index_put_layout_matrix (every case), test_index_python_syntax, test_dtypes,
    test_index_put_broadcast_values (each dtype), test_take_put_noncontig, test_gradcheck_*
    (Jacobian mismatch), test_gradients_equal_native, test_deterministic;
  acc: test_dtypes, test_index_put_broadcast_values (float32 and bfloat16 by the float64 rule,
    int64 exactly), test_index_put_layout_matrix, test_take_put_noncontig, test_each_op_routed,
    test_gradients_equal_native (float64 rule), test_gradcheck_float64_with_routing;
  swallow: test_bad_index_values_match_aten_cpu (54 calls: native IndexError vs ours 'ok'),
    test_argument_errors_match_aten_cpu (11), test_index_layout_matrix (masks of the wrong shape);
  first_writer: test_deterministic ("not the last writer in index order");
  out_untouched: test_out_forms (every out=), test_index_layout_matrix (index.Tensor_out),
    test_argument_errors_match_aten_cpu (out dtype errors not raised).
"""
from __future__ import annotations

import contextlib
import random
import warnings

import pytest
import torch

from conftest import BASE_SEED, DEVICES
from stridewise.testing import accuracy, layouts

ADV_OPS = ["index", "index_put", "take", "put"]
A = torch.ops.aten

# dtypes ATen's CPU index/index_put/take/put accept (the uint16/32/64 shells excepted)
ALL_DTYPES = [torch.float32, torch.float64, torch.float16, torch.bfloat16, torch.complex64,
              torch.complex128, torch.int8, torch.int16, torch.int32, torch.int64, torch.uint8,
              torch.bool]


# --------------------------------------------------------------------------------------------
# helpers (shared with test_index_adv_torch.py and test_e2e_index_adv.py)


def fail_msg(problems) -> str:
    return f"STRIDEWISE_SEED={BASE_SEED}\n" + "\n".join(problems)


def routing(sw, ops=ADV_OPS):
    """sw.use(include=ops) once the adapter registers the names; before that, native (so the
    value checks run and the stats checks fail)."""
    if set(ops) <= set(sw.supported_ops()):
        return sw.use(include=ops)
    return contextlib.nullcontext()


def stats_problems(sw, op, device, least=1, fallback_ok=False, want=(), fallback=0) -> list:
    """stats()[op]: at least `least` calls, all on `device`, no copy, `fallback` fallbacks (the
    calls ATen runs by design), and each counter in `want` above 0."""
    st = sw.stats().get(op)
    if st is None:
        return [f"stats() has no {op!r}: not routed by this build"]
    p = []
    if st["calls"] < least:
        p.append(f"stats[{op!r}]['calls'] == {st['calls']} < {least}")
    if st.get(device, 0) != st["calls"]:
        p.append(f"stats[{op!r}][{device!r}] == {st.get(device)} != calls {st['calls']}")
    if st.get("copies", 0) != 0:
        p.append(f"stats[{op!r}]['copies'] == {st['copies']}")
    if not fallback_ok and st.get("fallback", 0) != fallback:
        p.append(f"stats[{op!r}]['fallback'] == {st['fallback']}")
    for k in want:
        if st.get(k, 0) <= 0:
            p.append(f"stats[{op!r}][{k!r}] == {st.get(k)}: not counted")
    return p


def atens_by_design(name, args, kwargs) -> bool:
    """The calls the adapter leaves to ATen by design (adapter/index_adv.cpp, counted as
    'fallback'): no index tensor at all (only None / 0-dim masks), more than 4 index terms, and
    on CUDA index_put_ of one CPU value through a mask without accumulate (ATen's masked_fill_,
    which needs no nonzero(); the CPU runs it on the core)."""
    if name not in ("index", "index_put"):
        return False
    terms = 0
    for t in args[1]:
        if t is None:
            continue
        terms += t.dim() if t.dtype in (torch.bool, torch.uint8) else 1
    if terms < 1 or terms > 4:
        return True
    if name == "index_put":
        acc = args[3] if len(args) > 3 else kwargs.get("accumulate", False)
        mask = any(t is not None and t.dtype in (torch.bool, torch.uint8) for t in args[1])
        # ATen's canDispatchToMaskedFill: one value, on the CPU (a CUDA 0-dim value is not one)
        return bool(mask and not acc and args[2].numel() == 1 and args[2].device.type == "cpu"
                    and args[0].device.type != "cpu")
    return False


def bits(t: torch.Tensor) -> torch.Tensor:
    """The same elements as integers of the same width (so -0.0 != 0.0 and NaN == NaN)."""
    if t.dtype.is_complex:
        t = torch.view_as_real(t.resolve_conj())
    if t.is_floating_point():
        return t.view({2: torch.int16, 4: torch.int32, 8: torch.int64}[t.element_size()])
    return t


def same_bits(a, b) -> bool:
    return (isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor) and a.shape == b.shape
            and a.dtype == b.dtype and a.device == b.device and torch.equal(bits(a), bits(b)))


def twin(t: torch.Tensor) -> torch.Tensor:
    """A copy of t with the same sizes, strides and storage offset over a copy of its whole
    storage (clone() would make a step-sliced tensor contiguous)."""
    s = t.untyped_storage().clone()
    return torch.empty(0, dtype=t.dtype, device=t.device).set_(s, t.storage_offset(), t.size(), t.stride())


def storage_bits(t: torch.Tensor) -> torch.Tensor:
    """Every byte of t's storage (the gaps of a strided view included)."""
    return torch.empty(0, dtype=torch.uint8, device=t.device).set_(t.untyped_storage())


def outcome(fn):
    try:
        return ("ok", fn())
    except Exception as e:  # noqa: BLE001 - compared as (type, first line)
        return (type(e).__name__, str(e).split("\n")[0])


def same_outcome(a, b) -> bool:
    if a[0] != b[0]:
        return False
    if a[0] != "ok":
        return a[1] == b[1]
    return same_bits(a[1], b[1])


def values(shape, dtype, g, device="cpu"):
    """Fresh random values (never all zero)."""
    shape = list(shape)
    if dtype.is_complex:
        real = torch.float64 if dtype == torch.complex128 else torch.float32
        v = torch.complex(torch.randn(shape, generator=g, dtype=real), torch.randn(shape, generator=g, dtype=real))
    elif dtype.is_floating_point:
        v = torch.randn(shape, generator=g, dtype=torch.float64)
    elif dtype == torch.bool:
        v = torch.randint(0, 2, shape, generator=g)
    elif dtype == torch.uint8:
        v = torch.randint(1, 200, shape, generator=g)
    else:
        v = torch.randint(-100, 100, shape, generator=g)
        v = torch.where(v == 0, 7, v)  # (not v[v == 0] = 7: an index_put inside routed calls)
    return v.to(dtype).to(device)


def indices(shape, n, g, device="cpu", dtype=torch.int64, neg=True):
    """Index values in [-n, n) (negative ones where ATen wraps them)."""
    lo = -n if neg else 0
    if n == 0:
        return torch.zeros(shape, dtype=dtype).to(device) if 0 in list(shape) else None
    return torch.randint(lo, n, list(shape), generator=g).to(dtype).to(device)


def in_layout(kind, t_make, shape, rng):
    return layouts.make_layout_ex(kind, list(shape), t_make, rng)


def poisoned(shape, dtype, device, layout="contiguous", rng=None):
    """An out= tensor filled with NaN (floating) or a sentinel, in a writable layout."""
    def make(s):
        t = torch.empty(list(s), dtype=dtype, device=device)
        if dtype.is_floating_point or dtype.is_complex:
            return t.fill_(float("nan"))
        return t.fill_(True if dtype == torch.bool else 123 if dtype == torch.uint8 else -123)
    return layouts.make_layout_ex(layout, list(shape), make, rng or random.Random(0))


def ref64(t):
    if t.dtype.is_complex:
        return t.to(torch.complex128)
    return t.to(torch.float64)


def accum_problem(what, got, want, run64):
    """Integers and bool: exact. Floating: the float64 rule (run64() = the same native call in
    float64 / complex128)."""
    if not (want.dtype.is_floating_point or want.dtype.is_complex):
        return None if same_bits(got, want) else f"{what}: differs from native ({want.dtype})"
    return accuracy.float64_problem(what, got, want, run64())


def gaps_equal(a, b) -> bool:
    """Whether the storages of two twins differ only inside the view (b's elements copied into
    a twin of a give b's storage)."""
    c = twin(a)
    c.copy_(b)
    return torch.equal(storage_bits(c), storage_bits(b))


# --------------------------------------------------------------------------------------------
# 1. each op routed


def routed_calls(g, device):
    """(stats name, description, fn) with non-contiguous operands; fn() -> a result tensor.
    The in-place calls write into a twin() of a shared non-contiguous self."""
    r = lambda *s: torch.randn(*s, generator=g, dtype=torch.float64).float().to(device)  # noqa: E731
    x = r(7, 9, 5).transpose(0, 2)                      # (5, 9, 7), non-contiguous
    i = torch.randint(-5, 5, (12,), generator=g).to(device)[::2]   # step-sliced index, negatives
    j = torch.randint(0, 9, (6,), generator=g).to(device)
    perm = torch.randperm(9, generator=g)[:4].to(device)
    mask = (torch.rand(5, 9, generator=g) > 0.4).to(device)
    v_perm = r(7, 4, 5).permute(2, 1, 0)                # (5, 4, 7), non-contiguous values
    v_acc = r(7, 9, 6).permute(2, 1, 0)                 # (6, 9, 7)
    v_mask = r(14)[::2]                                 # (7,), step-sliced, broadcast over the rows
    flat = torch.randint(-x.numel(), x.numel(), (4, 3), generator=g).to(device).t()  # (3, 4) transposed
    uperm = torch.randperm(x.numel(), generator=g)[:10].to(device)
    src = r(10)
    src_acc = r(4, 3).t()
    return [
        ("index", "x[i]", lambda: x[i]),
        ("index", "x[:, j]", lambda: x[:, j]),
        ("index", "x[i, j]", lambda: x[i, j]),
        ("index", "x[i, :, j]", lambda: x[i, :, j % 7]),
        ("index", "x[mask]", lambda: x[mask]),
        ("index_put", "x[:, perm] = v", lambda: A.index_put_(twin(x), [None, perm], v_perm)),
        ("index_put", "index_put accumulate", lambda: A.index_put(x, [i], v_acc, True)),
        ("index_put", "x[mask] = row", lambda: A.index_put_(twin(x), [mask], v_mask, False)),
        ("take", "take", lambda: torch.take(x, flat)),
        ("put", "put_", lambda: twin(x).put_(uperm, src)),
        ("put", "put accumulate", lambda: torch.put(x, flat, src_acc, True)),
    ]


@pytest.mark.parametrize("device", DEVICES)
def test_each_op_routed(sw, seed, device):
    g = torch.Generator().manual_seed(seed)
    problems = []
    for op, what, fn in routed_calls(g, device):
        want = fn()
        sw.reset_stats()
        with routing(sw, [op]):
            got = fn()
        accumulating = "accumulate" in what
        if accumulating and device != "cpu":
            p = None if torch.allclose(got, want, rtol=1e-5, atol=1e-5) else f"{what}: differs from native"
        elif accumulating:
            # the CPU adds in index order, as ATen's loops do
            p = None if torch.allclose(got, want, rtol=1e-6, atol=1e-6) else f"{what}: differs from native"
        else:
            p = None if same_bits(got, want) else f"{what}: differs from native"
        if p:
            problems.append(p)
        want_counts = ["noncontig_self"]
        problems += [f"{what}: {q}" for q in stats_problems(sw, op, device, want=want_counts)]
    assert not problems, fail_msg(problems)


# --------------------------------------------------------------------------------------------
# 2. the layout matrix: reads


RANKS = (0, 1, 2, 3, 4, 5, 6, 7, 8, 10)
PATTERNS = ("first", "mid", "last", "two_adjacent", "two_separated", "broadcast", "mask1", "mask2")


def small_shape(rank, rng, zero=False, one=False):
    cap = 3 if rank <= 4 else 2
    s = [rng.randint(2, cap + 1) for _ in range(rank)]
    if rank and one:
        s[rng.randrange(rank)] = 1
    if rank and zero:
        s[rng.randrange(rank)] = 0
    return s


def index_list(pattern, shape, rng, g, device, idx_layout, idx_dtype, mask_dtype=torch.bool,
               empty=False, unique=False):
    """An aten index list (None = the whole dim) for `pattern` over `shape`, or None when the
    pattern does not fit the rank."""
    r = len(shape)
    mk_rng = random.Random(rng.random())

    def idx(bshape, n):
        numel = 1
        for s_ in bshape:
            numel *= s_
        if unique:
            # distinct positions (a permutation, a third of it negated) placed into a view of a
            # writable layout (copied in: the layout generators make their own shapes)
            if numel > n:
                return None
            p = torch.randperm(n, generator=g)[:numel]
            p = torch.where(torch.rand(numel, generator=g) < 0.3, p - n, p).view(bshape)
            kind = idx_layout if idx_layout in layouts.WRITABLE_LAYOUTS else "contiguous"
            t = in_layout(kind, lambda s_: torch.full(list(s_), -(10**6), dtype=idx_dtype, device=device),
                          bshape, mk_rng)
            return t.copy_(p.to(idx_dtype))
        if n == 0 and numel:
            return None

        def make(s_):
            return indices(s_, n, g, device, idx_dtype) if n else torch.zeros(list(s_), dtype=idx_dtype, device=device)
        return in_layout(idx_layout, make, bshape, mk_rng)

    nb = 0 if empty else rng.randint(1, 4)
    if pattern in ("first", "mid", "last"):
        if r < 1:
            return None
        d = {"first": 0, "mid": r // 2, "last": r - 1}[pattern]
        bshape = [nb] if rng.random() < 0.7 else [2, nb]
        t = idx(bshape, shape[d])
        return None if t is None else [None] * d + [t]
    if pattern == "two_adjacent" or pattern == "two_separated":
        if r < (2 if pattern == "two_adjacent" else 3) or unique:
            return None
        d0 = rng.randrange(r - (1 if pattern == "two_adjacent" else 2))
        d1 = d0 + 1 if pattern == "two_adjacent" else rng.randrange(d0 + 2, r)
        a, b = idx([nb], shape[d0]), idx([nb], shape[d1])
        if a is None or b is None:
            return None
        out = [None] * (d1 + 1)
        out[d0], out[d1] = a, b
        return out
    if pattern == "broadcast":
        if r < 2 or unique:
            return None
        d0 = rng.randrange(r - 1)
        a, b = idx([3, 1], shape[d0]), idx([max(nb, 1) if not empty else 0], shape[d0 + 1])
        if a is None or b is None:
            return None
        return [None] * d0 + [a, b]
    if pattern in ("mask1", "mask2"):
        m = min(r, 1 if pattern == "mask1" else 2)  # rank 0: a 0-dim mask
        if pattern == "mask2" and r < 2:
            return None
        d = rng.randrange(r - m + 1)
        mshape = shape[d:d + m]

        def make(s):
            return (torch.rand(list(s), generator=g) < (0.0 if empty else 0.5)).to(mask_dtype).to(device)
        return [None] * d + [in_layout(idx_layout, make, mshape, mk_rng)]
    raise KeyError(pattern)


def index_cases(seed, device, n_per_rank=8):
    """(description, self, index list) over ranks, layouts of self and indices, patterns, index
    dtypes, size-0/1 dims, empty indices, masks of both dtypes."""
    rng = random.Random(seed)
    g = torch.Generator().manual_seed(seed)
    cases = []
    lays = list(layouts.LAYOUTS)
    k = 0
    for r in RANKS:
        for n in range(n_per_rank if r else 3):
            k += 1
            pattern = PATTERNS[k % len(PATTERNS)] if r else "mask1"
            self_lay = lays[k % len(lays)]
            idx_lay = lays[(k * 3 + r) % len(lays)]
            dtype = [torch.float32, torch.int64, torch.float16, torch.uint8, torch.complex128][k % 5]
            idt = torch.int32 if k % 3 == 0 else torch.int64
            mdt = torch.uint8 if k % 4 == 0 else torch.bool
            zero, one, empty = k % 11 == 0, k % 5 == 0, k % 13 == 0
            shape = small_shape(r, rng, zero, one)
            x = in_layout(self_lay, lambda s: values(s, dtype, g, device), shape, rng)
            il = None
            for pat in (pattern,) + PATTERNS:
                il = index_list(pat, shape, rng, g, device, idx_lay, idt, mdt, empty=empty)
                if il is not None:
                    pattern = pat
                    break
            if il is None:
                continue
            desc = (f"r{r} {pattern} self={self_lay} idx={idx_lay} {str(dtype)[6:]} "
                    f"{str(idt)[6:] if 'mask' not in pattern else str(mdt)[6:]} shape={shape}"
                    f"{' empty' if empty else ''} | {layouts.describe(x)}")
            cases.append((desc, x, il))
    return cases


@pytest.mark.parametrize("device", DEVICES)
def test_index_layout_matrix(sw, seed, device):
    """x[indices] over the layout matrix, bitwise equal to native; plus out= into a poisoned
    non-contiguous out. Every index tensor goes in as given (aten.index.Tensor directly: Python's
    x[...] would turn int32 indices into int64 and uint8 masks into bool before the op)."""
    problems, n, outs = [], 0, 0
    sw.reset_stats()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # uint8 masks are deprecated
        for desc, x, il in index_cases(seed, device):
            want = outcome(lambda: A.index.Tensor(x, il))
            with routing(sw):
                got = outcome(lambda: A.index.Tensor(x, il))
            n += 1
            if not same_outcome(want, got):
                problems.append(f"{desc}: native {want[0]} vs stridewise {got[0]} "
                                f"{'' if got[0] != 'ok' or want[0] != 'ok' else 'values differ'} {got[1] if got[0] != 'ok' else ''}")
                continue
            if want[0] != "ok" or want[1].dim() == 0 or want[1].numel() == 0:
                continue
            out = poisoned(want[1].shape, x.dtype, device, "transpose" if want[1].dim() > 1 else "step_slice",
                           random.Random(n))
            with routing(sw):
                r = A.index.Tensor_out(x, il, out=out)
            outs += 1
            if r is not out or not same_bits(out, want[1]):
                problems.append(f"{desc}: index.Tensor_out into {layouts.describe(out)}: out not written as native")
    assert n > 50, n
    problems += stats_problems(sw, "index", device, least=n // 2,
                               want=("noncontig_self", "noncontig_index", "expanded_index", "noncontig_out"))
    assert not problems, fail_msg(problems[:25])


@pytest.mark.parametrize("device", DEVICES)
def test_index_python_syntax(sw, seed, device):
    """The frontend forms that reach index.Tensor: Ellipsis, None (newaxis) and slices between
    index tensors, scalars with tensors, int lists, a negative expanded index."""
    g = torch.Generator().manual_seed(seed)
    x = values([6, 5, 4, 3], torch.float32, g, device).permute(2, 0, 3, 1)   # (4, 6, 3, 5)
    i = torch.randint(-4, 4, (5,), generator=g).to(device)
    j = torch.randint(0, 5, (3, 1), generator=g).to(device)
    k = torch.randint(0, 3, (4,), generator=g).to(device)
    neg = torch.tensor([-1], device=device).expand(7)  # an expanded negative index
    keys = {
        "x[i]": lambda: x[i], "x[:, k]": lambda: x[:, k[:3]], "x[..., j]": lambda: x[..., j],
        "x[i, ..., j]": lambda: x[i[:3], ..., j[:, 0]],
        "x[None, i, None, 1:4]": lambda: x[None, i, None, 1:4],
        "x[1:3, None, k, ::2]": lambda: x[1:3, None, k[:3] if k.numel() else k, ::2],
        "x[i, :, k[:1], j]": lambda: x[i[:1], :, k[:1] % 3, j],
        "x[j, i[None]]": lambda: x[j % 4, i[None] % 6],
        "x[2, i % 6]": lambda: x[2, i % 6],
        "x[[0, 3, -1]]": lambda: x[[0, 3, -1]],
        "x[neg]": lambda: x[neg], "x[:, neg]": lambda: x[:, neg], "x[..., neg]": lambda: x[..., neg],
        "x[neg, neg]": lambda: x[neg, neg],
        "x[x > 0]": lambda: x[x > 0], "x[:, m2]": lambda: x[:, x[0, :, :, 0] > 0],
        "x[empty]": lambda: x[torch.tensor([], dtype=torch.long, device=device)],
        "x[:, empty2d]": lambda: x[:, torch.empty(0, 2, dtype=torch.long, device=device)],
    }
    problems = []
    for name, fn in keys.items():
        want = outcome(fn)
        sw.reset_stats()
        with routing(sw):
            got = outcome(fn)
        if want[0] != "ok":
            problems.append(f"{name}: native raised {want} (test data problem)")
        elif not same_outcome(want, got):
            problems.append(f"{name}: native {want[0]} vs stridewise {got[0]}")
        problems += [f"{name}: {q}" for q in stats_problems(sw, "index", device)]
    assert not problems, fail_msg(problems)


# --------------------------------------------------------------------------------------------
# 3. the layout matrix: writes


def put_cases(seed, device):
    rng = random.Random(seed + 1)
    g = torch.Generator().manual_seed(seed + 1)
    lays = list(layouts.WRITABLE_LAYOUTS)
    all_lays = list(layouts.LAYOUTS)
    cases = []
    k = 0
    for r in RANKS[1:]:
        for n in range(6):
            k += 1
            accumulate = k % 2 == 0
            pattern = PATTERNS[(k // 2) % len(PATTERNS)]
            # copies: distinct positions (or a mask); accumulate: anything, duplicates included
            dtype = ([torch.int64, torch.int32, torch.int16, torch.int8] if accumulate else
                     [torch.float32, torch.float16, torch.complex128, torch.uint8, torch.bool])[k % (4 if accumulate else 5)]
            idt = torch.int32 if k % 3 == 0 else torch.int64
            shape = small_shape(r, rng, zero=k % 9 == 0, one=k % 4 == 0)
            x = in_layout(lays[k % len(lays)], lambda s: values(s, dtype, g, device), shape, rng)
            il = None
            idx_lay = all_lays[(k * 5) % len(all_lays)] if accumulate else lays[(k * 5) % len(lays)]
            for pat in (pattern,) + PATTERNS:
                unique = not accumulate and "mask" not in pat
                il = index_list(pat, shape, rng, g, device, idx_lay, idt, empty=k % 10 == 0, unique=unique)
                if il is not None:
                    pattern = pat
                    break
            if il is None:
                continue
            try:
                res_shape = A.index.Tensor(x, il).shape
            except Exception:  # noqa: BLE001
                continue
            vk = k % 4  # values: full, trailing dim only, 0-dim, expanded
            if vk == 1 and len(res_shape):
                vshape = list(res_shape[-1:])
            elif vk == 2:
                vshape = []
            else:
                vshape = list(res_shape)
            v = in_layout("expand" if vk == 3 else all_lays[k % len(all_lays)],
                          lambda s: values(s, dtype, g, device), vshape, rng)
            desc = (f"r{r} {pattern} acc={accumulate} self={layouts.describe(x)} idx={idx_lay} "
                    f"{str(idt)[6:]} values={layouts.describe(v)}")
            cases.append((desc, x, il, v, accumulate))
    return cases


@pytest.mark.parametrize("device", DEVICES)
def test_index_put_layout_matrix(sw, seed, device):
    """index_put_ (in place, written where self lives: the whole storage compared, the gaps of a
    step-sliced self included), index_put (functional) and _index_put_impl_, bitwise equal to
    native: distinct positions for copies, integer dtypes for accumulation (exact)."""
    problems, n, by_design = [], 0, 0
    sw.reset_stats()
    for desc, x, il, v, acc in put_cases(seed, device):
        a, b = twin(x), twin(x)
        want = outcome(lambda: A.index_put_(a, il, v, acc))
        with routing(sw):
            got = outcome(lambda: A.index_put_(b, il, v, acc))
        n += 1
        by_design += atens_by_design("index_put", (b, il, v, acc), {}) * (3 if n % 3 == 0 else 1)
        if want[0] != got[0] or (want[0] != "ok" and want[1] != got[1]):
            problems.append(f"{desc}: native {want} vs stridewise {got}")
            continue
        if want[0] == "ok" and (got[1] is not b or not torch.equal(storage_bits(a), storage_bits(b))):
            problems.append(f"{desc}: index_put_ differs from native (storage bytes)")
        if n % 3 == 0:
            c = twin(x)
            with routing(sw):
                f = outcome(lambda: A.index_put(x, il, v, acc))
                A._index_put_impl_(c, il, v, acc, False)
            if want[0] == "ok" and not (same_outcome(("ok", a), f) and same_bits(c, a)):
                problems.append(f"{desc}: index_put / _index_put_impl_ differ from native")
    assert n > 30, n
    problems += stats_problems(sw, "index_put", device, least=n, fallback=by_design,
                               want=("noncontig_self", "noncontig_index", "noncontig_src", "expanded_src"))
    assert not problems, fail_msg(problems[:25])


# --------------------------------------------------------------------------------------------
# 4. dtypes


@pytest.mark.parametrize("device", DEVICES)
def test_dtypes(sw, seed, device):
    """Every dtype ATen accepts, through each op: copies bitwise, accumulation exact for
    integers and bool, the float64 rule for floating types."""
    g = torch.Generator().manual_seed(seed)
    problems = []
    for dtype in ALL_DTYPES:
        x = values([6, 40, 5], dtype, g, device).transpose(0, 2)        # (5, 40, 6)
        i = torch.randint(-5, 5, (30,), generator=g).to(device)
        j = torch.randint(0, 40, (30,), generator=g).to(device)
        perm = torch.randperm(40, generator=g)[:25].to(device)
        mask = (torch.rand(5, 40, generator=g) > 0.5).to(device)
        v = values([5, 25, 6], dtype, g, device)
        va = values([30, 6], dtype, g, device)
        flat = torch.randint(-x.numel(), x.numel(), (50,), generator=g).to(device)
        vflat = values([50], dtype, g, device)
        nm = int(mask.sum())
        vm = values([nm, 6], dtype, g, device)
        perm50 = torch.randperm(x.numel(), generator=g)[:50].to(device)
        copies = {
            "x[i, j]": lambda: x[i, j],
            "x[:, perm]": lambda: x[:, perm],
            "x[mask]": lambda: x[mask],
            "take": lambda: torch.take(x, flat),
            "x[:, perm] = v": lambda: A.index_put(x, [None, perm], v, False),
            "x[mask] = v": lambda: A.index_put(x, [mask], vm, False),
            "put_ distinct": lambda: twin(x).put_(perm50, vflat),
        }
        accs = {
            "x[i, j] += v": (lambda t: A.index_put(t, [i, j], va.to(t.dtype), True)),
            "put accumulate": (lambda t: torch.put(t, flat, vflat.to(t.dtype), True)),
        }
        sw.reset_stats()
        for name, fn in copies.items():
            want = outcome(fn)
            with routing(sw):
                got = outcome(fn)
            if want[0] != "ok":
                problems.append(f"{dtype} {name}: native raised {want}")
            elif not same_outcome(want, got):
                problems.append(f"{dtype} {name}: differs from native ({got[0]})")
        for name, fn in accs.items():
            want = fn(x)
            with routing(sw):
                got = fn(x)
            p = accum_problem(f"{dtype} {name}", got, want, lambda: fn(ref64(x)))
            if p:
                problems.append(p)
        for op in ADV_OPS:
            problems += [f"{dtype}: {q}" for q in stats_problems(sw, op, device)]
    assert not problems, fail_msg(problems)


# --------------------------------------------------------------------------------------------
# 5. index_put_ with broadcast values, accumulate both ways


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.int64])
def test_index_put_broadcast_values(sw, seed, device, dtype):
    g = torch.Generator().manual_seed(seed)
    x = values([8, 30, 6], dtype, g, device)[:, ::2].transpose(0, 1)     # (15, 8, 6), step and transpose
    i = torch.randint(-15, 15, (40,), generator=g).to(device)           # duplicates
    perm = torch.randperm(15, generator=g)[:9].to(device)
    j = torch.randint(0, 8, (3, 1), generator=g).to(device)
    k = torch.randint(0, 6, (4,), generator=g).to(device)
    problems = []
    sw.reset_stats()
    for acc in (False, True):
        for key, il in (("x[i]" if acc else "x[perm]", [i] if acc else [perm]), ("x[:, j, k]", [None, j, k])):
            if not acc and key == "x[:, j, k]":
                continue  # (j, k) pairs may repeat: copies with duplicates are test_deterministic's
            res = list(A.index.Tensor(x, il).shape)
            vals = {
                "0-dim": values([], dtype, g, device),
                "(1,)": values([1], dtype, g, device),
                "trailing": values(res[-1:], dtype, g, device),
                "(1, n) expanded": values([1, 1], dtype, g, device).expand(1, res[-1]),
                "(m, 1, ..)": values(res[:1] + [1] * (len(res) - 1), dtype, g, device),
            }
            for vname, v in vals.items():
                a, b = twin(x), twin(x)
                A.index_put_(a, il, v, acc)
                with routing(sw):
                    A.index_put_(b, il, v, acc)
                what = f"{key} {'+=' if acc else '='} {vname}"
                if acc:
                    c = ref64(x).clone()
                    A.index_put_(c, il, ref64(v), True)
                    p = accum_problem(what, b, a, lambda c=c: c)
                    if not gaps_equal(a, b):
                        p = f"{what}: wrote outside self's elements"
                else:
                    p = None if torch.equal(storage_bits(a), storage_bits(b)) else f"{what}: differs from native"
                if p:
                    problems.append(p)
    problems += stats_problems(sw, "index_put", device, want=("expanded_src", "noncontig_self"))
    assert not problems, fail_msg(problems)


# --------------------------------------------------------------------------------------------
# 6. take / put on a non-contiguous self, put accumulate


@pytest.mark.parametrize("device", DEVICES)
def test_take_put_noncontig(sw, seed, device):
    """take/put index self's logical (row-major) order; self is never reshaped: put_ writes
    through its strides (the bytes between the elements of a step-sliced self stay as they
    were), and the result of take is the same as native for every layout."""
    g = torch.Generator().manual_seed(seed)
    rng = random.Random(seed)
    problems = []
    sw.reset_stats()
    for kind in ("transpose", "step_slice@1:3", "permute", "compound_writable", "offset@5", "expand@0"):
        for dtype in (torch.float32, torch.int16, torch.complex64):
            x = in_layout(kind, lambda s: values(s, dtype, g, device), [4, 6, 5], rng)
            n = x.numel()
            flat = in_layout(rng.choice(layouts.LAYOUTS), lambda s: indices(s, n, g, device), [3, 7], rng)
            src = values([3, 7], dtype, g, device)
            want = torch.take(x, flat)
            with routing(sw):
                got = torch.take(x, flat)
            if not same_bits(got, want):
                problems.append(f"take {kind} {dtype}: differs from native")
            if kind.startswith("expand"):
                continue  # put_ into an expanded self is an error (test_argument_errors)
            uniq = torch.randperm(n, generator=g)[:21].view(3, 7).to(device)
            uniq = torch.where(uniq % 2 == 0, uniq - n, uniq)
            for acc, idx in ((False, uniq), (True, flat)):
                a, b = twin(x), twin(x)
                a.put_(idx, src, accumulate=acc)
                with routing(sw):
                    r = b.put_(idx, src, accumulate=acc)
                what = f"put_ {kind} {dtype} acc={acc}"
                if r is not b:
                    problems.append(f"{what}: did not return self")
                if not gaps_equal(a, b):
                    problems.append(f"{what}: wrote outside self's elements (or reshaped self)")
                if (dtype.is_floating_point or dtype.is_complex) and acc:
                    c = ref64(x).clone().put_(idx, ref64(src), accumulate=True)
                    p = accum_problem(what, b, a, lambda c=c: c)
                    if p:
                        problems.append(p)
                elif not torch.equal(storage_bits(a), storage_bits(b)):
                    problems.append(f"{what}: differs from native (storage bytes)")
            # functional put: a new tensor, self untouched
            before = twin(x)
            with routing(sw):
                f = torch.put(x, uniq, src)
            if not (same_bits(f, torch.put(x, uniq, src)) and same_bits(x, before)):
                problems.append(f"put {kind} {dtype}: differs from native or wrote self")
    problems += stats_problems(sw, "take", device, want=("noncontig_self", "noncontig_index", "expanded_index"))
    problems += stats_problems(sw, "put", device, want=("noncontig_self",))
    assert not problems, fail_msg(problems)


# --------------------------------------------------------------------------------------------
# 7. out= forms


@pytest.mark.parametrize("device", DEVICES)
def test_out_forms(sw, seed, device):
    """index.Tensor_out, take.out, put.out and index_put.out into poisoned outs: contiguous,
    transposed, step-sliced, and one of the wrong size (resized as ATen resizes it)."""
    g = torch.Generator().manual_seed(seed)
    rng = random.Random(seed)
    x = values([5, 9, 4], torch.float32, g, device).permute(1, 2, 0)      # (9, 4, 5)
    i = torch.randint(-9, 9, (6,), generator=g).to(device)
    j = torch.randint(0, 5, (6,), generator=g).to(device)
    flat = torch.randint(-x.numel(), x.numel(), (4, 6), generator=g).to(device)
    perm = torch.randperm(x.numel(), generator=g)[:24].view(4, 6).to(device)
    src = values([4, 6], torch.float32, g, device)
    v = values([6, 4], torch.float32, g, device)
    calls = {
        "index.Tensor_out": (lambda out: A.index.Tensor_out(x, [i, None, j], out=out), A.index.Tensor(x, [i, None, j])),
        "take.out": (lambda out: torch.take(x, flat, out=out), torch.take(x, flat)),
        "put.out": (lambda out: A.put.out(x, perm, src, False, out=out), torch.put(x, perm, src)),
        "index_put.out": (lambda out: A.index_put.out(x, [i, None, j], v, True, out=out),
                          A.index_put(x, [i, None, j], v, True)),
    }
    problems = []
    sw.reset_stats()
    for name, (fn, want) in calls.items():
        for k, lay in enumerate(("contiguous", "transpose", "step_slice", "wrong size")):
            def make_out():
                if lay == "wrong size":
                    return poisoned([3], x.dtype, device)   # resized, with ATen's warning
                return poisoned(want.shape, x.dtype, device, lay, random.Random(seed + k))
            out_n, out = make_out(), make_out()
            with warnings.catch_warnings(record=True) as w_n:
                warnings.simplefilter("always")
                fn(out_n)
            with routing(sw), warnings.catch_warnings(record=True) as w_s:
                warnings.simplefilter("always")
                r = outcome(lambda: fn(out))
            if r[0] != "ok" or r[1] is not out:
                problems.append(f"{name} {lay}: {r[0]} {r[1] if r[0] != 'ok' else 'returned another tensor'}")
                continue
            if [str(m.message).splitlines()[0] for m in w_s] != [str(m.message).splitlines()[0] for m in w_n]:
                problems.append(f"{name} {lay}: warnings {[str(m.message)[:60] for m in w_s]} vs native "
                                f"{[str(m.message)[:60] for m in w_n]}")
            if out.stride() != out_n.stride():
                problems.append(f"{name} {lay}: out strides {out.stride()} vs native {out_n.stride()}")
            if name == "index_put.out":
                ok = out.shape == want.shape and torch.allclose(out, want, rtol=1e-6, atol=1e-6)
            else:
                ok = same_bits(out, want) and same_bits(out, out_n)
            if not ok:
                problems.append(f"{name} into {lay} out: out not written as native")
    for op in ADV_OPS:
        problems += stats_problems(sw, op, device, want=("noncontig_out",))
    assert not problems, fail_msg(problems)


# --------------------------------------------------------------------------------------------
# 8. errors: ATen's types and first lines (CPU)


def argument_error_calls(g):
    x = torch.randn(5, 6, generator=g)
    i = torch.tensor([0, 2, 4])
    r = {s: torch.randn(*s, generator=g) for s in [(2, 6), (3, 6), (6,), (1, 6), (3,), (4,)]}
    r64 = torch.randn(3, 6, generator=g, dtype=torch.float64)
    return {
        "float index": lambda: A.index.Tensor(x, [i.float()]),
        "too many indices": lambda: A.index.Tensor(x, [i, i, i]),
        "mask shape": lambda: A.index.Tensor(x, [torch.ones(4, dtype=torch.bool)]),
        "uint8 mask shape": lambda: A.index.Tensor(x, [None, torch.ones(5, dtype=torch.uint8)]),
        "no broadcast": lambda: A.index.Tensor(x, [i, torch.tensor([0, 1])]),
        "empty list": lambda: A.index.Tensor(x, []),
        "index on size-0 dim": lambda: A.index.Tensor(torch.empty(10, 0), [None, torch.tensor([0, 1])]),
        "out dtype": lambda: A.index.Tensor_out(x, [i], out=torch.empty(3, 6, dtype=torch.float64)),
        "out overlaps self": lambda: A.index.Tensor_out(x, [torch.tensor([0])], out=x[1:2]),
        "put values shape": lambda: A.index_put(x, [i], r[(2, 6)], False),
        "put values dtype": lambda: A.index_put(x, [i], r64, False),
        "put bool values into float": lambda: A.index_put(x, [i], torch.ones(3, 6, dtype=torch.bool), True),
        "put float index": lambda: A.index_put(x, [i.double()], r[(6,)], False),
        "put into expanded self": lambda: A.index_put_(r[(1, 6)].clone().expand(5, 6), [i], r[(6,)], False),
        "put values overlap self": lambda: A.index_put_(x.clone(), [None, torch.tensor([0])], x[:, 1:2], False),
        "put 0-dim self empty list": lambda: A.index_put(torch.rand([]), [], torch.tensor([1.0]), True),
        "mask values mismatch": lambda: x.clone().__setitem__(x > 0, r[(3,)]),
        "take int32 index": lambda: torch.take(x, i.int()),
        "take float index": lambda: torch.take(x, i.float()),
        "take out dtype": lambda: torch.take(x, i, out=torch.empty(3, dtype=torch.float64)),
        "put_ int32 index": lambda: x.clone().put_(i.int(), r[(3,)]),
        "put_ numel": lambda: x.clone().put_(i, r[(4,)]),
        "put_ dtype": lambda: x.clone().put_(i, r64[0, :3]),
        "put_ expanded self": lambda: r[(1, 6)].clone().expand(5, 6).put_(i, r[(3,)]),
        "put_ empty self": lambda: torch.empty(0).put_(i, r[(3,)]),
        "take empty self": lambda: torch.take(torch.empty(0, 3), i),
    }


def test_argument_errors_match_aten_cpu(sw, seed):
    g = torch.Generator().manual_seed(seed)
    problems, raised = [], 0
    sw.reset_stats()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for name, fn in argument_error_calls(g).items():
            want = outcome(fn)
            with routing(sw):
                got = outcome(fn)
            raised += want[0] != "ok"
            if not same_outcome(want, got):
                problems.append(f"{name}: native {want[:2] if want[0] != 'ok' else 'ok'} vs "
                                f"stridewise {got[:2] if got[0] != 'ok' else 'ok'}")
    assert not problems, fail_msg(problems)
    assert raised >= len(argument_error_calls(g)) - 3, raised  # the calls exercise the checks


def bad_index_calls(g):
    """(name, fn, self or None): fn raises natively for an out-of-range value; self is what an
    in-place call writes into."""
    base = torch.randn(5, 7, 5, generator=g).transpose(0, 2)   # (5, 7, 5), non-contiguous
    calls = []
    for bad in (5, -6, 2**33, -(2**40)):
        for idt in (torch.int64, torch.int32):
            if idt == torch.int32 and abs(bad) >= 2**31:
                continue
            i = torch.tensor([0, 1, 2, 3, bad], dtype=idt)   # the bad value last: ATen writes the others
            j = torch.tensor([0, 6, 1, 2, 3], dtype=idt)
            tag = f"{bad}/{str(idt)[6:]}"
            calls.append((f"x[i] {tag}", lambda i=i: A.index.Tensor(base, [i]), None))
            calls.append((f"x[:, j, i] {tag}", lambda i=i, j=j: A.index.Tensor(base, [None, j, i]), None))
            calls.append((f"x[i] expanded {tag}", lambda i=i: A.index.Tensor(base, [i[-1:].expand(4)]), None))
            for acc in (False, True):
                s = twin(base)
                calls.append((f"x[i] = v acc={acc} {tag}",
                              lambda i=i, s=s, acc=acc: A.index_put_(s, [i], torch.ones(5, 7, 5), acc), s))
                s2 = twin(base)
                calls.append((f"x[:, j, i] = v acc={acc} {tag}",
                              lambda i=i, j=j, s=s2, acc=acc: A.index_put_(s, [None, j, i], torch.ones(5, 5), acc), s2))
        n = base.numel()
        flat = torch.tensor([0, 3, 7, (n + bad) if bad > 0 else (bad - n)]) if abs(bad) < 2**31 else torch.tensor([0, 3, bad])
        calls.append((f"take {bad}", lambda f=flat: torch.take(base, f), None))
        for acc in (False, True):
            s = twin(base)
            calls.append((f"put_ acc={acc} {bad}",
                          lambda f=flat, s=s, acc=acc: s.put_(f, torch.ones(f.numel()), accumulate=acc), s))
    return calls


def test_bad_index_values_match_aten_cpu(sw, seed):
    """Same exception type and first line as native; the in-place calls leave self bit for bit
    (ATen's CPU loops write the elements before the bad one: ours checks every value first)."""
    g = torch.Generator().manual_seed(seed)
    problems = []
    sw.reset_stats()
    native_wrote = 0
    for name, fn, s in bad_index_calls(g):
        before = twin(s) if s is not None else None
        want = outcome(fn)
        if s is not None:
            native_wrote += not torch.equal(storage_bits(s), storage_bits(before))
            s.copy_(before)
        with routing(sw):
            got = outcome(fn)
        if want[0] == "ok":
            problems.append(f"{name}: native did not raise (test data problem)")
        elif not same_outcome(want, got):
            problems.append(f"{name}: native {want[:2]} vs stridewise {got[:2] if got[0] != 'ok' else 'ok'}")
        if s is not None and not torch.equal(storage_bits(s), storage_bits(before)):
            problems.append(f"{name}: the failed call wrote into self")
    for op in ADV_OPS:
        st = sw.stats().get(op)
        if not st or st["errors"] == 0:
            problems.append(f"stats[{op!r}]['errors'] not counted: {st}")
    assert not problems, fail_msg(problems)
    assert native_wrote > 0  # the check has teeth: native's failed calls did write


# --------------------------------------------------------------------------------------------
# 9. autograd


def test_gradcheck_float64_with_routing(sw, seed):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(6, 5, 4, dtype=torch.float64, generator=g).transpose(0, 2).requires_grad_()  # (4, 5, 6)
    i = torch.randint(-4, 4, (7,), generator=g)            # duplicates: the backward accumulates
    j = torch.randint(0, 5, (7,), generator=g)
    sw.reset_stats()
    with routing(sw):
        assert torch.autograd.gradcheck(lambda a: a[i], (x,))
        assert torch.autograd.gradcheck(lambda a: a[i, j], (x,))
        assert torch.autograd.gradcheck(lambda a: a[:, j], (x,))
    problems = stats_problems(sw, "index", "cpu") + stats_problems(sw, "index_put", "cpu")
    assert not problems, fail_msg(problems)


@pytest.mark.parametrize("device", DEVICES)
def test_gradients_equal_native(sw, seed, device):
    """The backward of x[i] and x[:, i] is index_put with accumulate into zeros: with routing on
    it runs on ours (counted during the backward alone)."""
    g = torch.Generator().manual_seed(seed)
    base = torch.randn(40, 3, 70, generator=g)
    i = torch.randint(-40, 40, (300,), generator=g).to(device)     # heavy duplicates
    j = torch.randint(0, 70, (90,), generator=g).to(device)
    up1 = torch.randn(300, 70, generator=g).to(device)
    up2 = torch.randn(40, 90, generator=g).to(device)

    def run(dtype, route):
        x = base.to(dtype).to(device)[:, 1, :].requires_grad_()      # (40, 70), rows of stride 210
        ctx = (lambda: routing(sw)) if route else contextlib.nullcontext
        sw.reset_stats()
        with ctx():
            y = x[i] * up1.to(dtype) + 0
            z = x.t()[:, i[:50]]  # transposed view, column gather
            w = x[:, j] * up2.to(dtype)
            loss = y.sum() + (z * 1.5).sum() + w.sum()
        fwd = sw.stats().get("index", {}).get("calls", 0)
        sw.reset_stats()
        with ctx():
            loss.backward()
        bwd = sw.stats().get("index_put", {}).get("calls", 0)
        return x.grad, (fwd, bwd), (y.detach(), w.detach())

    want, _, outs_n = run(torch.float32, False)
    got, (fwd, bwd), outs_s = run(torch.float32, True)
    ref, _, _ = run(torch.float64, False)
    problems = []
    for a, b in zip(outs_s, outs_n):
        if not same_bits(a, b):
            problems.append("forward differs from native")
    p = accuracy.float64_problem("x.grad", got, want, ref)
    if p:
        problems.append(p)
    if device == "cpu" and not torch.allclose(got, want, rtol=1e-6, atol=1e-6):
        problems.append(f"x.grad differs from native: {(got - want).abs().max():.3e}")
    if fwd < 3:
        problems.append(f"forward: stats['index']['calls'] == {fwd} < 3")
    if bwd < 3:
        problems.append(f"backward: stats['index_put']['calls'] == {bwd} < 3 (the backward's index_put ran natively)")
    assert not problems, fail_msg(problems)


# --------------------------------------------------------------------------------------------
# 10. deterministic mode


@pytest.mark.parametrize("device", DEVICES)
def test_deterministic(sw, seed, device):
    """torch.use_deterministic_algorithms(True): every accumulating call bitwise repeatable, and
    x[i] = v with duplicates keeps the last writer in index order (as ATen's deterministic mode)."""
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(64, 33, generator=g).to(device)[:, 1:]          # rows of stride 33
    i = torch.randint(-64, 64, (4000,), generator=g).to(device)
    v = torch.randn(4000, 32, generator=g).to(device)
    flat = torch.randint(-x.numel(), x.numel(), (5000,), generator=g).to(device)
    vf = torch.randn(5000, generator=g).to(device)
    before = torch.are_deterministic_algorithms_enabled()
    torch.use_deterministic_algorithms(True)
    try:
        sw.reset_stats()
        with routing(sw):
            runs = [(A.index_put(x, [i], v, True), A.index_put(x, [i], v.bfloat16().float(), True),
                     torch.put(x, flat, vf, True), A.index_put(x, [i], v, False),
                     A.index_put(x.bfloat16(), [i], v.bfloat16(), True))
                    for _ in range(3)]
    finally:
        torch.use_deterministic_algorithms(before)
    problems = []
    for r in runs[1:]:
        for k, (a, b) in enumerate(zip(r, runs[0])):
            if not same_bits(a, b):
                problems.append(f"result {k} not bitwise repeatable")
    last = {}
    for pos, row in enumerate(i.tolist()):
        last[row % 64] = pos
    ref = x.clone()
    rows = torch.tensor(list(last), device=device)
    ref[rows] = v[torch.tensor(list(last.values()), device=device)]
    if not same_bits(runs[0][3], ref):
        problems.append("x[i] = v with duplicates: not the last writer in index order")
    problems += stats_problems(sw, "index_put", device, want=("deterministic",))
    assert not problems, fail_msg(problems)
