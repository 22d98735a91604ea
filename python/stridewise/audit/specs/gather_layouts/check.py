"""The gather check: the entry points (``RUNNERS``), the native reference, ``check_gather``
(returns problems instead of asserting, so the harness itself can be tested), error parity and
the backward check."""
from __future__ import annotations

import dataclasses
import random
import sys
from typing import Callable, Optional

import torch

from ....testing import layouts
from .cases import GatherCase, _sub, build_inputs, describe_inputs
from .routing import native, stats_snapshot
from .values import _gen, bitwise_mismatch, raw_bytes, storage_bytes

# ---------------------------------------------------------------------------------------
# entry points
# ---------------------------------------------------------------------------------------

@dataclasses.dataclass(frozen=True)
class Runner:
    """One way to invoke gather. ``fn(self, dim, index)`` returns the result; ``out_fn(self,
    dim, index, out)`` writes ``out`` and returns what the call returned."""
    name: str
    fn: Optional[Callable] = None
    out_fn: Optional[Callable] = None
    stridewise: bool = True  # stats must move
    needs_same_shape: bool = False  # take_along_dim broadcasts: index shape == self shape
    # False when the entry point hands gather other tensors than the caller's (ATen's
    # take_along_dim broadcasts and materializes the index), so noncontig_* do not apply.
    operands_passed_through: bool = True


def _routed(call):
    def run(*a, **kw):
        sw = sys.modules["stridewise"]
        with sw.use(include=["gather"]):
            return call(*a, **kw)
    return run


def _op(s, d, i):
    return torch.ops.stridewise.gather(s, d, i)


def _op_out(s, d, i, o):
    return torch.ops.stridewise.gather.out(s, d, i, out=o)


RUNNERS = {
    "op": Runner("op", fn=_op, out_fn=_op_out),
    "aten": Runner("aten", fn=_routed(lambda s, d, i: torch.gather(s, d, i)),
                   out_fn=_routed(lambda s, d, i, o: torch.gather(s, d, i, out=o))),
    "method": Runner("method", fn=_routed(lambda s, d, i: s.gather(d, i))),
    "take_along_dim": Runner("take_along_dim",
                             fn=_routed(lambda s, d, i: torch.take_along_dim(s, i, d)),
                             out_fn=_routed(lambda s, d, i, o: torch.take_along_dim(s, i, d, out=o)),
                             needs_same_shape=True, operands_passed_through=False),
}


def native_runner(bits: bool = True) -> Runner:
    """Native torch.gather as a runner (the harness checking itself). With ``bits`` it runs
    on the integer view of the same element size (exact); without, in the op's dtype (ATen's
    CPU kernel changes float16/bfloat16 NaN payloads, which the bitwise check reports)."""
    bv = bits_view if bits else (lambda t: t)

    def fn(s, d, i):
        with native():
            return torch.gather(bv(s), d, i).view(s.dtype)

    def out_fn(s, d, i, o):
        with native():
            torch.gather(bv(s), d, i, out=bv(o))
        return o
    return Runner("native" if bits else "native-in-dtype", fn=fn, out_fn=out_fn, stridewise=False)


_BITS_DTYPE = {1: torch.uint8, 2: torch.int16, 4: torch.int32, 8: torch.int64}


def bits_view(t: torch.Tensor) -> torch.Tensor:
    """``t`` reinterpreted as the integer dtype of the same size (same strides, same
    storage); 16-byte dtypes stay as they are."""
    it = _BITS_DTYPE.get(t.element_size())
    return t if it is None or t.dtype == it else t.view(it)


def reference(inputs: dict) -> torch.Tensor:
    """Native torch.gather on the same device, stridewise routing off, run on the bits
    (an integer view of self of the same element size): ATen's CPU gather moves float16 /
    bfloat16 NaNs through float and changes their payload, so the reference for a data
    movement op is native gather of the bits. ``reference_in_dtype`` is the plain call."""
    s = inputs["self"]
    with native():
        return torch.gather(bits_view(s), inputs["dim"], inputs["index"]).view(s.dtype)


def reference_in_dtype(inputs: dict) -> torch.Tensor:
    with native():
        return torch.gather(inputs["self"], inputs["dim"], inputs["index"])


def nan_tolerant_mismatch(actual: torch.Tensor, expected: torch.Tensor, what: str) -> Optional[str]:
    """bitwise_mismatch, except that positions holding a NaN in both are accepted."""
    m = bitwise_mismatch(actual, expected, what=what)
    if m is None or actual.shape != expected.shape or actual.dtype != expected.dtype:
        return m
    try:
        both_nan = (torch.isnan(actual.detach().cpu()) & torch.isnan(expected.detach().cpu())).reshape(-1)
    except (RuntimeError, TypeError):
        return m
    differ = (raw_bytes(actual) != raw_bytes(expected)).any(dim=1) & ~both_nan
    return m if differ.any() else None


# ---------------------------------------------------------------------------------------
# the check
# ---------------------------------------------------------------------------------------

#: Stats counters a check verifies when the runner is a stridewise one.
NONCONTIG_COUNTERS = (("noncontig_index", "index"), ("noncontig_self", "self"), ("noncontig_out", "out"))


def check_gather(case: GatherCase, runner: Runner, device="cpu", *, compare_cpu: bool = True,
                 check_stats: bool = True, snapshot_limit: int = 64 << 20) -> list:
    """Run ``case`` through ``runner`` on ``device``; return a list of problems (empty = OK)."""
    problems: list = []
    inputs = build_inputs(case, device)
    ctx = f"[{case.id} seed={case.seed} device={device} runner={runner.name}] {describe_inputs(inputs)}"
    s, d, i = inputs["self"], inputs["dim"], inputs["index"]
    use_out = "out" in inputs
    if use_out and runner.out_fn is None:
        return [f"{ctx}: runner has no out= form"]

    expected = reference(inputs)

    snaps = {}
    for k in ("self", "index"):
        t = inputs[k]
        if t.untyped_storage().nbytes() <= snapshot_limit:
            snaps[k] = storage_bytes(t).clone()
    if use_out:
        out = inputs["out"]
        out_ptr = out.data_ptr()
        out_storage_ptr = out.untyped_storage().data_ptr()
        out_geom = (tuple(out.shape), out.stride(), out.storage_offset())
        out_before = storage_bytes(out).clone()
        # native gather.out on an identical poisoned view: the whole storage must match after.
        twin = build_inputs(case, device)["out"]
        with native():
            torch.gather(bits_view(s), d, i, out=bits_view(twin))
        twin_after = storage_bytes(twin).clone()

    st0 = stats_snapshot() if (runner.stridewise and check_stats) else None
    try:
        if use_out:
            result = runner.out_fn(s, d, i, out)
        else:
            result = runner.fn(s, d, i)
        if str(device).startswith("cuda"):
            torch.cuda.synchronize()
    except Exception as e:  # noqa: BLE001
        return [f"{ctx}: raised {type(e).__name__}: {e}"]
    st1 = stats_snapshot() if st0 is not None else None

    if use_out:
        if result is not out and (not isinstance(result, torch.Tensor) or result.data_ptr() != out_ptr):
            problems.append("out=: the call did not return the out tensor")
        if out.data_ptr() != out_ptr or out.untyped_storage().data_ptr() != out_storage_ptr:
            problems.append("out=: out was reallocated (data_ptr changed), not written in place")
        if (tuple(out.shape), out.stride(), out.storage_offset()) != out_geom:
            problems.append(f"out=: out's geometry changed to {layouts.describe(out)}")
        m = bitwise_mismatch(out, expected, what="out")
        if m:
            problems.append(m)
        after = storage_bytes(out).cpu()
        if after.numel() == out_before.numel():
            mask = view_mask(out)
            outside = ~mask
            changed = (after != out_before.cpu()) & outside
            if changed.any():
                pos = changed.nonzero().flatten()[:4].tolist()
                problems.append(f"out=: {int(changed.sum())} storage bytes outside the view were "
                                f"modified (byte offsets {pos})")
            if not torch.equal(after, twin_after.cpu()):
                diff = (after != twin_after.cpu()).nonzero().flatten()[:4].tolist()
                problems.append(f"out=: whole storage differs from native gather.out's at byte offsets {diff}")
        else:
            problems.append("out=: storage size changed")
    else:
        m = bitwise_mismatch(result, expected)
        if m:
            problems.append(m)
        elif _significant_strides(result) != _significant_strides(expected):
            problems.append(f"result strides {result.stride()} != native's {expected.stride()}")
        if isinstance(result, torch.Tensor) and result.device != expected.device:
            problems.append(f"result on {result.device}, expected {expected.device}")

    if not problems and (case.dtype.is_floating_point or case.dtype.is_complex):
        # and ATen in the op's own dtype agrees, up to NaN payloads
        got = out if use_out else result
        try:
            in_dtype = reference_in_dtype(inputs)
        except NotImplementedError:  # native has no kernel for this dtype: bits reference only
            in_dtype = None
        m = nan_tolerant_mismatch(got, in_dtype, "vs native gather in dtype") if in_dtype is not None else None
        if m:
            problems.append(m)

    for k, snap in snaps.items():
        if not torch.equal(storage_bytes(inputs[k]), snap):
            problems.append(f"{k}'s storage was modified by the call")

    if st0 is not None:
        problems += _stats_problems(st0, st1, inputs if runner.operands_passed_through else {}, device)

    if compare_cpu and str(device).startswith("cuda") and not problems:
        cpu_expected = reference(build_inputs(case, "cpu"))
        got = out if use_out else result
        m = bitwise_mismatch(got.cpu(), cpu_expected, what="CUDA result vs CPU native")
        if m:
            problems.append(m)
    return [f"{ctx}: {p}" for p in problems]


def _significant_strides(t: torch.Tensor) -> tuple:
    """Strides of the dims of size > 1 (the others never address memory)."""
    if t.numel() <= 1:
        return ()
    return tuple(st if sz > 1 else None for sz, st in zip(t.shape, t.stride()))


def _stats_problems(st0, st1, inputs, device) -> list:
    problems = []
    if st0 is None or st1 is None:
        return ["stats unavailable"]

    def delta(k):
        return st1.get(k, 0) - st0.get(k, 0)
    if delta("calls") != 1:
        problems.append(f"stats: calls moved by {delta('calls')}, expected 1")
    dev = "cuda" if str(device).startswith("cuda") else "cpu"
    if delta(dev) != 1:
        problems.append(f"stats: {dev} moved by {delta(dev)}, expected 1")
    if st1.get("copies", 0) != 0 or delta("copies") != 0:
        problems.append(f"stats: copies = {st1.get('copies')} (must stay 0)")
    for key, operand in NONCONTIG_COUNTERS:
        if operand not in inputs or key not in st1:
            continue
        want = 0 if inputs[operand].is_contiguous() else 1
        if delta(key) != want:
            problems.append(f"stats: {key} moved by {delta(key)}, expected {want} "
                            f"({operand} is_contiguous={inputs[operand].is_contiguous()})")
    return problems


def view_mask(t: torch.Tensor) -> torch.Tensor:
    """Bool mask over the storage bytes of ``t``: True where some element of the view lives."""
    nbytes = t.untyped_storage().nbytes()
    es = t.element_size()
    mask = torch.zeros(nbytes, dtype=torch.bool)
    if t.numel() == 0:
        return mask
    pos = torch.arange(nbytes // es, dtype=torch.int64)
    elems = pos.as_strided(tuple(t.shape), t.stride(), t.storage_offset()).reshape(-1)
    m = torch.zeros(nbytes // es, dtype=torch.bool)
    m[elems] = True
    mask[: m.numel() * es] = m.repeat_interleave(es)
    return mask


# ---------------------------------------------------------------------------------------
# error parity
# ---------------------------------------------------------------------------------------

def capture(fn: Callable) -> tuple:
    """(None, result) or (exception type, message) of calling ``fn``."""
    try:
        return None, fn()
    except Exception as e:  # noqa: BLE001
        return type(e), str(e)


def first_line(msg: str) -> str:
    return msg.split("\n")[0].strip()


def check_error_parity(native_fn: Callable, ours_fn: Callable, what: str = "") -> list:
    """Both calls must raise the same exception type with the same first message line
    (or both succeed with bitwise equal results). Returns problems."""
    with native():
        n_type, n_val = capture(native_fn)
    o_type, o_val = capture(ours_fn)
    if n_type is None and o_type is None:
        m = bitwise_mismatch(o_val, n_val) if isinstance(n_val, torch.Tensor) else None
        return [f"{what}: {m}"] if m else []
    if n_type is None:
        return [f"{what}: native succeeded, ours raised {o_type.__name__}: {o_val}"]
    if o_type is None:
        return [f"{what}: native raised {n_type.__name__}: {first_line(n_val)}; ours did not raise"]
    if o_type is not n_type or first_line(o_val) != first_line(n_val):
        return [f"{what}:\n native: {n_type.__name__}: {n_val}\n ours:   {o_type.__name__}: {o_val}"]
    return []


def check_gather_backward(case: GatherCase, fn: Callable, device="cpu", *, exact: Optional[bool] = None,
                          rtol: float = 1e-12, atol: float = 1e-12) -> list:
    """Gradient of sum(gather(x) * gout) w.r.t. x through ``fn(x, dim, index)`` vs native.
    Forward bitwise; gradient bitwise when ``exact`` (default: on the CPU), else allclose.
    ``x`` is a finite random leaf (self layout 'transpose' gives a non-contiguous leaf)."""
    inp = build_inputs(case, device)
    idx, dim = inp["index"], case.dim
    g = _gen(_sub(case.seed, "backward"))
    x0 = layouts.make_layout_ex(case.self_layout if case.self_layout in ("contiguous", "transpose", "permute")
                                else "contiguous", case.self_shape,
                                lambda s: torch.randn(list(s), generator=g, dtype=torch.float64).to(case.dtype).to(device),
                                random.Random(case.seed))
    gout = torch.randn(list(idx.shape), generator=g, dtype=torch.float64).to(case.dtype).to(device)
    exact = (not str(device).startswith("cuda")) if exact is None else exact

    def run(f):
        x = x0.detach().clone(memory_format=torch.preserve_format).requires_grad_(True)
        y = f(x, dim, idx)
        y.backward(gout)
        return y.detach(), x.grad

    def native_fn(x, d, i):
        with native():
            return torch.gather(x, d, i)
    ctx = f"[{case.id} seed={case.seed} device={device} backward] index {layouts.describe(idx)}"
    y_n, g_n = run(native_fn)
    try:
        y_o, g_o = run(fn)
    except Exception as e:  # noqa: BLE001
        return [f"{ctx}: raised {type(e).__name__}: {e}"]
    problems = []
    m = bitwise_mismatch(y_o, y_n, what="forward")
    if m:
        problems.append(m)
    if g_o is None:
        problems.append("no gradient reached x")
    elif g_o.layout != g_n.layout:
        problems.append(f"gradient layout {g_o.layout} != native {g_n.layout}")
    else:
        a, b = (g_o.to_dense(), g_n.to_dense()) if g_o.is_sparse else (g_o, g_n)
        if exact:
            m = bitwise_mismatch(a, b, what="grad")
            if m:
                problems.append(m)
        elif not torch.allclose(a, b, rtol=rtol, atol=atol):
            problems.append(f"grad not allclose: max abs diff {(a - b).abs().max().item():.3e}")
    return [f"{ctx}: {p}" for p in problems]
