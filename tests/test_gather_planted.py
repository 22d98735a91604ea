"""The harness is tested: each check family is fed a deliberately broken gather and must
report it. If one of these tests fails, the corresponding real tests could pass on a broken
kernel, i.e. they prove nothing.

Broken kernels are written in Python on top of advanced indexing (aten::index), never on
aten::gather, so they stay independent of what they imitate:
  flat_index      the seed's bug: index read as contiguous from its storage offset
  ignore_offset   self's storage offset dropped
  self_flat       self read with contiguous strides (a transposed self read row-major)
  wrong_neg_dim   negative dim wrapped with an off-by-one
  float_trip      values moved through float32 (changes float64 values, NaN payloads)
  drop_last       last element never written
  strided_result  right values, transposed result strides
  writes_self     correct, but scribbles on self's storage
  span_write      out=: writes the whole storage span of out, not just the view
  realloc_out     out=: writes into a fresh tensor and re-points out at it
  no_resize       out=: rejects a wrongly shaped out instead of resizing it
  no_overlap_chk  out=: accepts an internally overlapping out
  clamp           out-of-range index values clamped instead of rejected
  wrong_message   out-of-range error with its own wording
  scatter_bwd     backward with scatter (duplicates lost) instead of scatter_add
Plus: the routing/stats check on a runner that never reaches stridewise, and the end-to-end
comparisons with a broken aten::gather kernel registered through torch.library.
"""
from __future__ import annotations

import contextlib

import pytest
import torch

from stridewise.audit.specs import gather_layouts as specs
from stridewise.audit.specs.gather_layouts import GatherCase, Runner, check_gather


# --- a correct Python gather and its broken variants --------------------------------------

def _coords(shape, device):
    if len(shape) == 0:
        return []
    grids = torch.meshgrid(*[torch.arange(s, device=device) for s in shape], indexing="ij")
    return list(grids)


def _py_gather(self_, dim, index, *, index_values=None, self_view=None, dim_fix=None):
    """gather via advanced indexing; hooks let a variant plant one fault."""
    r = self_.dim()
    d = (dim_fix or (lambda d, r: d % max(r, 1)))(dim, r)
    vals = index if index_values is None else index_values(index)
    src = self_ if self_view is None else self_view(self_)
    if r == 0:
        if int(vals) != 0:
            raise RuntimeError(f"index {int(vals)} is out of bounds for dimension 0 with size 1")
        return src.clone()
    size = self_.shape[d]
    if vals.numel():
        bad = (vals < 0) | (vals >= size)
        if bad.any():
            v = int(vals.reshape(-1)[bad.reshape(-1).nonzero()[0]])
            raise RuntimeError(f"index {v} is out of bounds for dimension {d} with size {size}")
    co = _coords(tuple(index.shape), self_.device)
    co[d] = vals.long()
    return src[tuple(co)].contiguous()


def _storage_1d(t):
    n = t.untyped_storage().nbytes() // t.element_size()
    return torch.empty(0, dtype=t.dtype, device=t.device).set_(t.untyped_storage(), 0, (n,), (1,))


def _flat_index(index):
    """The seed's read: numel elements from the storage offset on, as if contiguous. Past the
    storage the seed read garbage; here "garbage" is a fixed pseudo-random value per position
    (no real out-of-bounds read). The caller folds values into the valid range."""
    st = _storage_1d(index)
    n = index.numel()
    pos = torch.arange(n, device=index.device) + index.storage_offset()
    inside = pos < st.numel()
    vals = st[pos.clamp(max=max(st.numel() - 1, 0))] if st.numel() else torch.zeros_like(pos)
    garbage = (pos * 7919 + 13) % 1000003
    return torch.where(inside, vals.long(), garbage).reshape(index.shape)


def _contig_strides(shape):
    st, acc = [], 1
    for s in reversed(shape):
        st.append(acc)
        acc *= max(s, 1)
    return tuple(reversed(st))


BROKEN = {
    "correct": lambda s, d, i: _py_gather(s, d, i),
    "flat_index": lambda s, d, i: _py_gather(s, d, i, index_values=lambda ix: _flat_index(ix) % max(s.shape[d] if s.dim() else 1, 1)),
    "ignore_offset": lambda s, d, i: _py_gather(s, d, i, self_view=lambda t: t.as_strided(t.shape, t.stride(), 0)),
    "self_flat": lambda s, d, i: _py_gather(s, d, i, self_view=lambda t: _storage_1d(t)[
        (torch.arange(t.numel(), device=t.device) + t.storage_offset()) % _storage_1d(t).numel()].reshape(t.shape)),
    "wrong_neg_dim": lambda s, d, i: _py_gather(s, d, i, dim_fix=lambda d, r: d + r - 1 if d < 0 else d),
    "float_trip": lambda s, d, i: _py_gather(s.float(), d, i).to(s.dtype),
    "strided_result": lambda s, d, i: _py_gather(s, d, i).mT.contiguous().mT if s.dim() >= 2 else _py_gather(s, d, i),
}


def _drop_last(s, d, i):
    r = _py_gather(s, d, i)
    if r.numel():
        r.view(-1)[-1:].view(torch.uint8).fill_(specs.POISON_BYTE)
    return r


def _writes_self(s, d, i):
    r = _py_gather(s, d, i)
    st = _storage_1d(s)
    if st.numel():
        st.view(torch.uint8)[0] ^= 1
    return r


BROKEN["drop_last"] = _drop_last
BROKEN["writes_self"] = _writes_self


def _out_correct(s, d, i, o):
    o.copy_(_py_gather(s, d, i))
    return o


def _span_write(s, d, i, o):
    _storage_1d(o).view(torch.uint8).fill_(0)  # clobbers everything around the view
    o.copy_(_py_gather(s, d, i))
    return o


def _realloc_out(s, d, i, o):
    o.set_(_py_gather(s, d, i).contiguous())
    return o


def _runner(name, fn=None, out_fn=None):
    return Runner(name, fn=fn, out_fn=out_fn or (lambda s, d, i, o: o.copy_(fn(s, d, i))), stridewise=False)


# --- 1. the layout matrix check (check_gather) --------------------------------------------

# (fault, case that must expose it, substring expected in a problem)
MATRIX_PLANTS = [
    ("flat_index", specs.SEED_REPRO, "differ bitwise"),
    ("flat_index", GatherCase((5, 6, 7), (4, 9, 6), 1, index_layout="transpose"), "differ bitwise"),
    ("flat_index", GatherCase((5, 6, 7), (4, 9, 6), 1, index_layout="compound"), "differ bitwise"),
    ("ignore_offset", GatherCase((5, 6, 7), (4, 9, 6), 1, self_layout="offset"), "differ bitwise"),
    ("self_flat", GatherCase((5, 6, 7), (4, 9, 6), 1, self_layout="transpose"), "differ bitwise"),
    ("self_flat", GatherCase((5, 6, 7), (4, 9, 6), 1, self_layout="step_slice"), "differ bitwise"),
    ("wrong_neg_dim", GatherCase((5, 7, 3), (2, 3, 1), -1, self_layout="expand"), ""),
    ("float_trip", GatherCase((4, 16, 64), (4, 3, 64), 1, torch.float64), "differ bitwise"),
    # float16 survives a float32 round trip except for signalling NaNs (~16 among self's 4096
    # values): a full-depth index reads each of them with probability 1 - (15/16)**16, so all
    # are missed with probability ~1e-7 (a (4, 3, 64) index missed them in ~4% of seeds).
    ("float_trip", GatherCase((4, 16, 64), (4, 16, 64), 1, torch.float16), "differ bitwise"),
    ("float_trip", GatherCase((4, 16, 64), (4, 3, 64), 1, torch.int64), "differ bitwise"),
    ("drop_last", GatherCase((5, 6, 7), (4, 9, 6), 1), "differ bitwise"),
    ("strided_result", GatherCase((5, 6, 7), (4, 9, 6), 1), "strides"),
    ("writes_self", GatherCase((5, 6, 7), (4, 9, 6), 1), "self's storage was modified"),
]


def test_correct_python_gather_passes_the_harness(seed):
    """The planted kernels' base is right: the harness accepts it on the whole matrix."""
    run = _runner("correct", BROKEN["correct"], _out_correct)
    problems = []
    for k, case in enumerate(specs.seed_matrix() + specs.layout_cross_cases() + specs.rank_cases()
                             + specs.edge_cases() + specs.layout_cross_cases(out=True)[::7]):
        problems += check_gather(case.with_seed(seed + k), run, "cpu")
    assert not problems, "\n".join(problems[:5])


@pytest.mark.parametrize("fault,case,expect", MATRIX_PLANTS,
                         ids=[f"{f}-{c.id}" for f, c, _ in MATRIX_PLANTS])
def test_matrix_check_catches(fault, case, expect, seed):
    problems = check_gather(case.with_seed(seed), _runner(fault, BROKEN[fault]), "cpu")
    assert problems, f"planted fault {fault!r} passed the matrix check on {case.id}"
    assert any(expect in p for p in problems), problems


def test_native_in_dtype_is_caught_on_half_nans(seed):
    """ATen's own CPU gather changes float16 NaN payloads; bitwise comparison notices."""
    case = GatherCase((4, 16, 64), (4, 16, 64), 1, torch.float16, index_layout="expand")
    found = any(check_gather(case.with_seed(seed + k), specs.native_runner(bits=False), "cpu")
                for k in range(8))
    assert found, "NaN payload changes went unnoticed"


def test_matrix_catches_flat_index_somewhere_in_the_seed_matrix(seed):
    """The seed's 9-case matrix: the flat reader fails on the non-contiguous ones (as the
    seed reported: 9/9 fail before the fix) and passes the contiguous fast path."""
    run = _runner("flat_index", BROKEN["flat_index"])
    failing = {c.id for c in specs.seed_matrix() if check_gather(c.with_seed(seed), run, "cpu")}
    assert "seed-contiguous-fast-path" not in failing
    expected = {c.id for c in specs.seed_matrix()} - {"seed-contiguous-fast-path"}
    assert failing == expected, f"not caught: {sorted(expected - failing)}"


# --- 2. out= checks -----------------------------------------------------------------------

OUT_CASE = GatherCase((5, 6, 7), (4, 9, 6), 1, out_layout="step_slice")


@pytest.mark.parametrize("fault,out_fn,expect", [
    ("span_write", _span_write, "outside the view were modified"),
    ("realloc_out", _realloc_out, "not written in place"),
    ("drop_last", lambda s, d, i, o: o.copy_(_drop_last(s, d, i)), "differ bitwise"),
])
def test_out_check_catches(fault, out_fn, expect, seed):
    problems = check_gather(OUT_CASE.with_seed(seed), _runner(fault, BROKEN["correct"], out_fn), "cpu")
    assert any(expect in p for p in problems), problems


def _no_resize(s, d, i, o):
    if tuple(o.shape) != tuple(i.shape):
        raise RuntimeError("out has the wrong shape")
    return _out_correct(s, d, i, o)


def _no_overlap_check(s, d, i, o):
    return o.copy_(_py_gather(s, d, i)) if not o.stride().count(0) else o


def test_out_error_parity_catches():
    x = torch.randn(5, 6)
    i = torch.randint(0, 6, (5, 4))
    # resize: native resizes a (7, 9) out, the planted kernel refuses
    p = specs.check_error_parity(lambda: torch.gather(x, 1, i, out=torch.empty(0)),
                                 lambda: _no_resize(x, 1, i, torch.empty(0)), "resize")
    assert p and "native succeeded" in p[0], p
    # internal overlap: native rejects, the planted kernel accepts
    ov = lambda: torch.empty(5, 1).expand(5, 4)  # noqa: E731
    p = specs.check_error_parity(lambda: torch.gather(x, 1, i, out=ov()),
                                 lambda: _no_overlap_check(x, 1, i, ov()), "overlap")
    assert p and "did not raise" in p[0], p
    # dtype: a different message is a failure
    def wrong_words():
        raise RuntimeError("out dtype mismatch")
    p = specs.check_error_parity(lambda: torch.gather(x, 1, i, out=torch.empty(5, 4, dtype=torch.float64)),
                                 wrong_words, "dtype")
    assert p and "native:" in p[0], p


# --- 3. error parity on bad index values ---------------------------------------------------

def test_out_of_range_parity_catches():
    x = torch.randn(4, 16, 24)
    i = torch.randint(0, 16, (4, 3, 24))
    i[1, 2, 3] = 16
    clamp = lambda: _py_gather(x, 1, i.clamp(0, 15))  # noqa: E731
    p = specs.check_error_parity(lambda: torch.gather(x, 1, i), clamp, "clamp")
    assert p and "did not raise" in p[0], p

    def wrong_message():
        raise RuntimeError("gather: index out of range")
    p = specs.check_error_parity(lambda: torch.gather(x, 1, i), wrong_message, "message")
    assert p, p

    def wrong_type():
        raise IndexError("index 16 is out of bounds for dimension 1 with size 16")
    p = specs.check_error_parity(lambda: torch.gather(x, 1, i), wrong_type, "type")
    assert p, p
    # and the correct Python gather passes
    assert not specs.check_error_parity(lambda: torch.gather(x, 1, i), lambda: _py_gather(x, 1, i), "ok")


def test_cuda_message_checker_catches():
    """The CUDA error tests require op, value, dim and size in the message; ATen's own
    device-assert text has none of them."""
    from test_gather_cuda_errors import _assert_names_it
    aten_like = ("CUDA error: device-side assert triggered\nCompile with `TORCH_USE_CUDA_DSA` "
                 "to enable device-side assertions.")
    with pytest.raises(AssertionError):
        _assert_names_it(aten_like, 16)
    with pytest.raises(AssertionError):
        _assert_names_it("stridewise.gather: index 17 is out of bounds for dimension 1 with size 16", 16)
    _assert_names_it("stridewise.gather: index 16 is out of bounds for dimension 1 with size 16 "
                     "(valid range [0, 16))", 16)


# --- 4. backward ----------------------------------------------------------------------------

class _ScatterBackward(torch.autograd.Function):
    """Forward right; backward uses scatter (last write wins) instead of scatter_add."""

    @staticmethod
    def forward(ctx, x, dim, index):
        ctx.save_for_backward(index)
        ctx.dim, ctx.shape = dim, x.shape
        return _py_gather(x, dim, index)

    @staticmethod
    def backward(ctx, g):
        (index,) = ctx.saved_tensors
        return g.new_zeros(ctx.shape).scatter(ctx.dim, index, g), None, None


def test_backward_check_catches(seed):
    case = GatherCase((5, 6, 7), (4, 9, 6), 1, torch.float64, index_layout="expand", seed=seed)
    good = specs.check_gather_backward(case, lambda x, d, i: _py_gather(x, d, i), "cpu")
    assert not good, good
    bad = specs.check_gather_backward(case, lambda x, d, i: _ScatterBackward.apply(x, d, i), "cpu")
    assert bad and any("grad" in p for p in bad), bad
    # allclose mode (as on CUDA) catches it too
    bad = specs.check_gather_backward(case, lambda x, d, i: _ScatterBackward.apply(x, d, i), "cpu", exact=False)
    assert bad, bad


# --- 5. routing / stats ---------------------------------------------------------------------

def test_stats_check_catches_unrouted_runner(sw, seed):
    """A runner that claims to be stridewise but calls native: the stats check notices."""
    fake = Runner("unrouted", fn=lambda s, d, i: specs.native_runner().fn(s, d, i),
                  out_fn=lambda s, d, i, o: specs.native_runner().out_fn(s, d, i, o), stridewise=True)
    problems = check_gather(GatherCase((5, 6, 7), (4, 9, 6), 1, index_layout="expand").with_seed(seed),
                            fake, "cpu")
    assert any("calls moved by 0" in p for p in problems), problems
    assert any("noncontig_index moved by 0" in p for p in problems), problems


def test_stats_check_catches_wrong_noncontig_count():
    st0 = {k: 0 for k in ("calls", "cpu", "cuda", "noncontig_index", "noncontig_self",
                          "noncontig_out", "copies")}
    st1 = dict(st0, calls=1, cpu=1, noncontig_index=1, copies=1)
    inputs = {"self": torch.randn(3, 4), "index": torch.zeros(3, 4, dtype=torch.long)}
    problems = specs._stats_problems(st0, st1, inputs, "cpu")
    assert any("noncontig_index" in p for p in problems) and any("copies" in p for p in problems), problems


# --- 6. end to end: a broken aten::gather inside real models -------------------------------

@contextlib.contextmanager
def planted_aten_gather(fault):
    """Registers BROKEN[fault] as aten::gather's CPU kernel (stridewise routing off)."""
    lib = torch.library.Library("aten", "IMPL")
    import warnings
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        lib.impl("gather", lambda s, d, i, sparse_grad=False: BROKEN[fault](s, d, i), "CPU")
    try:
        yield
    finally:
        lib._destroy()


def test_planted_aten_override_is_removable():
    x = torch.randn(4, 5)
    i = torch.randint(0, 5, (4, 1)).expand(4, 3)
    want = torch.gather(x, 1, i)
    with planted_aten_gather("flat_index"):
        bad = torch.gather(x, 1, i)
    assert not torch.equal(bad, want), "the planted kernel did not take effect"
    assert torch.equal(torch.gather(x, 1, i), want), "the planted kernel was not removed"


@pytest.mark.parametrize("model", ["bert", "moe"])
def test_e2e_check_catches_planted_kernel(model, seed):
    pytest.importorskip("transformers") if model == "bert" else None
    import test_e2e_models as e2e
    run = {"bert": e2e.run_bert, "moe": e2e.run_moe}[model]
    native_res = run("cpu", seed, specs.native)
    with planted_aten_gather("flat_index"):
        planted_res = run("cpu", seed, contextlib.nullcontext)
    problems = e2e.compare_runs(native_res, planted_res)
    assert any("outputs" in p for p in problems), problems
