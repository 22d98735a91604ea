"""Declarative op specs: valid inputs of a given layout, the reference, the comparison.

One spec per op drives the pytest matrix (``tests/test_gather_*.py``), the auditor and the
benchmark shape sets. Nothing here imports pytest or calls the native library directly
(``stridewise`` is used only when it is already imported, to switch routing off for the
reference and to read ``stats()``); note that importing ``stridewise.testing`` runs the
package's ``__init__``, which loads the native library (tests/conftest.py falls back to a
namespace stand-in when that fails, so the harness tests still run).

gather
------
``GatherCase`` says what to build: shapes, dim (may be negative), dtypes, the layout kind
of each operand (any kind ``layouts.make_layout_ex`` accepts; ``out_layout=None`` means the
functional form) and how index values are drawn. ``build_inputs(case, device)`` turns it
into tensors; the same case and seed give the same views and the same values on every
device, so a CUDA result can be compared with the CPU one.

Data is fresh random data, never zeros: integers are drawn away from 0 and +-1, floats are
random finite values with a sprinkle of specials (-0.0, +-inf, NaNs with varied payloads,
subnormals) because gather is data movement and must move bits exactly. ``out=`` tensors
and their whole storage are poisoned with 0xFF bytes (a NaN for every float type, -1 or
the maximum for integers, an invalid byte for bool), a value no input ever holds.

The reference is native ``torch.gather`` on the same device with stridewise routing off
(``native()``), run on an integer view of ``self`` of the same element size
(``bits_view``): ATen's CPU gather moves float16/bfloat16 values through float and changes
NaN payloads (0x7C01 -> 0x7E01, bf16 sNaN -> 0xFFFF or 0x7FC0), so only the integer view
gives a bit-exact reference. Native gather in the op's own dtype must agree too, up to NaN
payloads (``reference_in_dtype``, ``nan_tolerant_mismatch``). The comparison is bitwise:
raw bytes of contiguous copies (``bitwise_mismatch``), so NaN payloads and -0.0 count.

``check_gather(case, runner, device)`` runs one case through one entry point (``RUNNERS``:
the stridewise op, its out= overload, aten routing, the Tensor method, take_along_dim) and
returns a list of problems, empty when everything holds:
  result bitwise equal to native; same shape, dtype, strides as native; on CUDA also equal
  to the CPU result; inputs' storages untouched; for out=: written in place (same storage,
  same data_ptr), storage bytes outside the view untouched and the whole storage equal to
  what native gather.out leaves; the stridewise stats moved as documented (calls +1, cpu or
  cuda +1, noncontig_* +1 exactly when that operand is not contiguous, copies +0).
Because it returns problems instead of asserting, the harness itself can be tested
(``tests/test_gather_planted.py`` feeds it deliberately broken kernels).
"""
from __future__ import annotations

import contextlib
import dataclasses
import math
import random
import sys
import warnings
import zlib
from typing import Callable, Iterable, Optional, Sequence

import torch

from . import layouts
from . import sanitizer as _sanitizer

#: The compute-sanitizer tool this process runs under, or None ($STRIDEWISE_SANITIZER; see
#: stridewise.testing.sanitizer for the contract with the device script).
sanitizer = _sanitizer.sanitizer

# ---------------------------------------------------------------------------------------
# dtypes
# ---------------------------------------------------------------------------------------

#: dtypes ATen's gather supports on CPU and CUDA in every torch we target.
CORE_DTYPES = (
    torch.bool,
    torch.uint8,
    torch.int8,
    torch.int16,
    torch.int32,
    torch.int64,
    torch.float16,
    torch.bfloat16,
    torch.float32,
    torch.float64,
    torch.complex64,
    torch.complex128,
)


def _opt_dtypes() -> tuple:
    names = (
        "uint16", "uint32", "uint64", "complex32",
        "float8_e4m3fn", "float8_e5m2", "float8_e4m3fnuz", "float8_e5m2fnuz", "float8_e8m0fnu",
    )
    return tuple(getattr(torch, n) for n in names if hasattr(torch, n))


#: dtypes native gather may or may not support depending on torch version and device.
OPTIONAL_DTYPES = _opt_dtypes()
INDEX_DTYPES = (torch.int64, torch.int32)


def dtype_name(dt: torch.dtype) -> str:
    return str(dt).replace("torch.", "")


_native_support_cache: dict = {}


def native_supports(dtype: torch.dtype, device: str) -> Optional[str]:
    """None when native gather (functional and out=) handles ``dtype`` on ``device`` for
    both a contiguous and an expanded index; otherwise the native error text."""
    key = (dtype, str(device))
    if key in _native_support_cache:
        return _native_support_cache[key]
    why = None
    try:
        with native(), warnings.catch_warnings():
            warnings.simplefilter("ignore")  # "ComplexHalf support is experimental"
            x = torch.empty(3, 4, dtype=dtype, device=device)  # values do not matter here
            for idx in (
                torch.tensor([[1, 0], [2, 3], [0, 0]], device=device),
                torch.tensor([[1], [0], [2]], device=device).expand(3, 5),
            ):
                torch.gather(x, 1, idx)
                torch.gather(x, 1, idx, out=torch.empty(idx.shape, dtype=dtype, device=device))
    except Exception as e:  # noqa: BLE001 - we report whatever native says
        why = f"{type(e).__name__}: {str(e).splitlines()[0]}"
    _native_support_cache[key] = why
    return why


# ---------------------------------------------------------------------------------------
# values
# ---------------------------------------------------------------------------------------

POISON_BYTE = 0xFF


def _gen(seed: int) -> torch.Generator:
    g = torch.Generator(device="cpu")
    g.manual_seed(seed & 0x7FFF_FFFF_FFFF_FFFF)
    return g


def _int_pool_value_range(dtype):
    info = torch.iinfo(dtype)
    hi = min(info.max, 120) if dtype.itemsize == 1 else min(info.max, 1 << 20)
    return hi


def random_values(shape: Sequence[int], dtype: torch.dtype, g: torch.Generator) -> torch.Tensor:
    """Fresh random, never-zero values of ``shape`` (contiguous, CPU)."""
    shape = list(shape)
    n = math.prod(shape)
    if dtype == torch.bool:
        v = torch.randint(0, 2, (n,), generator=g).bool()
        if n:
            v[0] = True  # bool cannot avoid False; make sure both values appear
        return v.reshape(shape)
    if dtype in (torch.uint8, torch.uint16, torch.uint32, torch.uint64):
        hi = 250 if dtype == torch.uint8 else (1 << 15)
        v = torch.randint(2, hi, (n,), generator=g)
        return v.to(dtype).reshape(shape)
    if not dtype.is_floating_point and not dtype.is_complex:
        hi = _int_pool_value_range(dtype)
        mag = torch.randint(2, hi, (n,), generator=g)
        sign = torch.randint(0, 2, (n,), generator=g) * 2 - 1
        v = mag * sign
        if dtype == torch.int64 and n:
            v = v * (1 << 33) + mag  # use the high bytes too
        return v.to(dtype).reshape(shape)
    if dtype.is_complex:
        real_dt = {torch.complex64: torch.float32, torch.complex128: torch.float64}.get(dtype, torch.float16)
        parts = random_values(shape + [2], real_dt, g)
        return torch.view_as_complex(parts.contiguous())
    if dtype.itemsize == 1:  # float8 kinds: random bytes, never 0x00 / 0x80 / 0xFF
        b = torch.randint(1, 0x7F, (n,), generator=g, dtype=torch.int16)
        b = b + torch.randint(0, 2, (n,), generator=g, dtype=torch.int16) * 0x80
        return b.to(torch.uint8).view(dtype).reshape(shape)
    v = torch.randn(n, generator=g, dtype=torch.float64) * 4
    v = torch.where(v == 0, torch.ones_like(v), v).to(dtype)
    v = torch.where(v == 0, torch.ones_like(v), v)
    if n >= 8:
        # specials at random positions: -0.0, +-inf, NaNs with payloads, a subnormal
        itemsize = dtype.itemsize
        int_dt = {2: torch.int16, 4: torch.int32, 8: torch.int64}[itemsize]
        bits = v.view(int_dt)
        nbits = itemsize * 8
        mant = {torch.float16: 10, torch.bfloat16: 7, torch.float32: 23, torch.float64: 52}[dtype]
        exp_all = ((1 << (nbits - 1 - mant)) - 1) << mant
        specials = [
            1 << (nbits - 1),          # -0.0
            exp_all,                   # +inf
            exp_all | 1,               # NaN, smallest payload (signalling on most hw)
            exp_all | (1 << (mant - 1)) | 5,   # quiet NaN with a payload
            3,                         # a subnormal
        ]
        count = max(len(specials), n // 50)
        pos = torch.randperm(n, generator=g)[:count]
        for k, p in enumerate(pos.tolist()):
            s = specials[k % len(specials)]
            if s >= 1 << (nbits - 1):
                s -= 1 << nbits
            bits[p] = s
    return v.reshape(shape)


def random_index(shape: Sequence[int], high: int, dtype: torch.dtype, g: torch.Generator,
                 mode: str = "random") -> torch.Tensor:
    """Index values in [0, high). mode: random | dup (one value everywhere) | max | min."""
    shape = list(shape)
    n = math.prod(shape)
    if n and high <= 0:
        raise ValueError(f"no valid index value for a dim of size {high}")
    if mode == "random":
        v = torch.randint(0, max(high, 1), (n,), generator=g)
        if n >= 2 and high >= 2:  # make sure duplicates exist
            v[-1] = v[0]
    elif mode == "dup":
        v = torch.full((n,), int(torch.randint(0, max(high, 1), (1,), generator=g)))
    elif mode == "max":
        v = torch.full((n,), high - 1)
    elif mode == "min":
        v = torch.zeros(n, dtype=torch.int64)
    else:
        raise ValueError(mode)
    return v.to(dtype).reshape(shape)


def poison(shape: Sequence[int], dtype: torch.dtype) -> torch.Tensor:
    nbytes = math.prod(shape) * dtype.itemsize
    return torch.full((nbytes,), POISON_BYTE, dtype=torch.uint8).view(dtype).reshape(list(shape))


# ---------------------------------------------------------------------------------------
# comparison
# ---------------------------------------------------------------------------------------

def raw_bytes(t: torch.Tensor) -> torch.Tensor:
    """The element bytes of ``t`` in logical (row-major) order, as a (numel, itemsize)
    uint8 tensor on the CPU."""
    c = torch.empty(t.numel(), dtype=t.dtype, device=t.device)
    c.copy_(t.detach().reshape(-1))
    b = c.view(torch.uint8).reshape(c.numel(), t.element_size())
    return b.cpu()


def storage_bytes(t: torch.Tensor) -> torch.Tensor:
    """A uint8 tensor aliasing the whole storage under ``t`` (same device)."""
    s = t.untyped_storage()
    return torch.empty(0, dtype=torch.uint8, device=t.device).set_(s, 0, (s.nbytes(),), (1,))


def bitwise_mismatch(actual, expected, *, what: str = "result", limit: int = 4) -> Optional[str]:
    """None when ``actual`` and ``expected`` hold the same bits in the same shape and dtype;
    otherwise a short description with the first differing positions."""
    if not isinstance(actual, torch.Tensor):
        return f"{what}: expected a Tensor, got {type(actual).__name__}"
    if actual.dtype != expected.dtype:
        return f"{what}: dtype {actual.dtype} != expected {expected.dtype}"
    if tuple(actual.shape) != tuple(expected.shape):
        return f"{what}: shape {tuple(actual.shape)} != expected {tuple(expected.shape)}"
    if actual.numel() == 0:
        return None
    a, e = raw_bytes(actual), raw_bytes(expected)
    bad = (a != e).any(dim=1).nonzero().flatten()
    if bad.numel() == 0:
        return None
    shape = tuple(actual.shape)
    parts = []
    for p in bad[:limit].tolist():
        coord = _unravel(p, shape)
        parts.append(f"at {coord}: got 0x{_hex(a[p])} expected 0x{_hex(e[p])}")
    return (f"{what}: {bad.numel()} of {actual.numel()} elements differ bitwise; "
            + "; ".join(parts))


def _hex(row: torch.Tensor) -> str:
    return "".join(f"{int(x):02x}" for x in reversed(row.tolist()))  # little endian


def _unravel(p: int, shape) -> tuple:
    out = []
    for s in reversed(shape):
        out.append(p % s)
        p //= s
    return tuple(reversed(out))


# ---------------------------------------------------------------------------------------
# routing state
# ---------------------------------------------------------------------------------------

def _sw():
    sw = sys.modules.get("stridewise")
    return sw if sw is not None and hasattr(sw, "stats") else None


@contextlib.contextmanager
def native():
    """Native ATen kernels inside (stridewise routing off); the previous state after. Under
    compute-sanitizer memcheck, the native CUDA calls that memcheck flags in ATen itself run on
    CPU copies instead (sanitizer.native_guard: the one place every test's native call goes
    through; each such call warns SanitizerReroute, naming the issue)."""
    with _routing_off(), _sanitizer.native_guard():
        yield


@contextlib.contextmanager
def _routing_off():
    sw = _sw()
    if sw is None:
        yield
        return
    before = _enabled_ops(sw)
    if not before:
        yield
        return
    sw.disable()
    try:
        yield
    finally:
        sw.enable(include=sorted(before))


def _enabled_ops(sw) -> set:
    e = sw.enabled()
    if isinstance(e, bool):
        return set(sw.supported_ops()) if e else set()
    if isinstance(e, dict):
        return {k for k, v in e.items() if v}
    return set(e or ())


def stats_snapshot() -> Optional[dict]:
    sw = _sw()
    if sw is None:
        return None
    return dict(sw.stats().get("gather", {}))


# ---------------------------------------------------------------------------------------
# cases
# ---------------------------------------------------------------------------------------

@dataclasses.dataclass(frozen=True)
class GatherCase:
    self_shape: tuple
    index_shape: tuple
    dim: int
    dtype: torch.dtype = torch.float32
    index_dtype: torch.dtype = torch.int64
    self_layout: str = "contiguous"
    index_layout: str = "contiguous"
    out_layout: Optional[str] = None  # None: functional form
    index_values: str = "random"      # random | dup | max | min
    seed: int = 0
    name: str = ""

    @property
    def id(self) -> str:
        if self.name:
            return self.name
        out = f"-out={self.out_layout}" if self.out_layout else ""
        return (f"r{len(self.self_shape)}-dim{self.dim}-{dtype_name(self.dtype)}-"
                f"{dtype_name(self.index_dtype)}-self={self.self_layout}-"
                f"index={self.index_layout}{out}")

    def with_seed(self, seed: int) -> "GatherCase":
        return dataclasses.replace(self, seed=seed)

    def replace(self, **kw) -> "GatherCase":
        return dataclasses.replace(self, **kw)


def case_seed(base: int, *parts) -> int:
    """A per-test seed derived from a base seed and names (stable across runs)."""
    return zlib.crc32(repr((base,) + tuple(parts)).encode()) ^ (base & 0xFFFF_FFFF)


def _sub(seed: int, what: str) -> int:
    return zlib.crc32(f"{seed}:{what}".encode())


def build_inputs(case: GatherCase, device="cpu", place: Optional[Callable] = None) -> dict:
    """self, index and (for out= cases) a poisoned out, as views of the case's layouts.
    Deterministic in ``case`` (the device only changes where the tensors live).

    ``place(t) -> Tensor``, when given, receives every contiguous CPU buffer the layouts are
    carved from and returns the tensor to carve from instead (same shape, dtype and values),
    e.g. a copy in guarded memory whose storage ends at an inaccessible page."""
    dim_size = case.self_shape[case.dim] if case.self_shape else 1

    def maker(fn, what):
        g = _gen(_sub(case.seed, what + "/values"))
        if place is not None:
            return lambda shape: place(fn(list(shape), g))
        return lambda shape: fn(list(shape), g).to(device)

    rng = random.Random(_sub(case.seed, "layout"))
    self_ = layouts.make_layout_ex(
        case.self_layout, case.self_shape,
        maker(lambda s, g: random_values(s, case.dtype, g), "self"), rng)
    index = layouts.make_layout_ex(
        case.index_layout, case.index_shape,
        maker(lambda s, g: random_index(s, dim_size, case.index_dtype, g, case.index_values), "index"),
        rng)
    inputs = {"self": self_, "index": index, "dim": case.dim}
    if case.out_layout is not None:
        inputs["out"] = layouts.make_layout_ex(
            case.out_layout, case.index_shape,
            (lambda s: place(poison(s, case.dtype))) if place is not None
            else (lambda s: poison(s, case.dtype).to(device)), rng)
    return inputs


def describe_inputs(inputs: dict) -> str:
    parts = [f"dim={inputs['dim']}"]
    for k in ("self", "index", "out"):
        if k in inputs:
            parts.append(f"{k}: {layouts.describe(inputs[k])}")
    return " | ".join(parts)


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


# ---------------------------------------------------------------------------------------
# case sets (shared by the pytest matrix, the auditor and the benchmarks)
# ---------------------------------------------------------------------------------------

SEED_REPRO = GatherCase((4, 16, 384), (4, 1, 384), 1, torch.float16, torch.int64,
                        "contiguous", "expand@2", index_values="max", name="seed-repro")


def seed_matrix() -> list:
    """The seed's 9 cases: index made non-contiguous by expand / transpose / slice, gather
    along dim 0 / 1 / 2 (x (4,16,384) fp16), plus the repro and the contiguous fast path."""
    cases = [SEED_REPRO]
    base = (4, 16, 384)
    for d in range(3):
        other = 2 if d != 2 else 1
        ishape = list(base)
        ishape[d] = 3
        cases.append(GatherCase(base, tuple(ishape), d, torch.float16, index_layout=f"expand@{d}",
                                name=f"seed-expand-dim{d}"))
        ishape_t = list(base)
        ishape_t[other] = 8  # index smaller than self on a non-gather dim
        cases.append(GatherCase(base, tuple(ishape_t), d, torch.float16,
                                index_layout=f"transpose@{d},{other}", name=f"seed-transpose-dim{d}"))
        cases.append(GatherCase(base, tuple(ishape), d, torch.float16, index_layout=f"step_slice@{d}:2",
                                name=f"seed-slice-dim{d}"))
    cases.append(GatherCase(base, (4, 5, 384), 1, torch.float16, name="seed-contiguous-fast-path"))
    return cases


def layout_cross_cases(out: bool = False) -> list:
    """Every layout class for self x index (functional); with ``out``: x every writable out."""
    cases = []
    self_shape, index_shape = (5, 6, 7), (4, 9, 6)
    for sl in layouts.LAYOUTS:
        for il in layouts.LAYOUTS:
            if not out:
                cases.append(GatherCase(self_shape, index_shape, 1, torch.float32,
                                        self_layout=sl, index_layout=il))
            else:
                for ol in layouts.WRITABLE_LAYOUTS:
                    cases.append(GatherCase(self_shape, index_shape, -2, torch.float32,
                                            self_layout=sl, index_layout=il, out_layout=ol))
    return cases


RANKS = (0, 1, 2, 3, 4, 5, 6, 7, 8, 10, 25)


def rank_shapes(rank: int, rng: random.Random) -> tuple:
    """(self_shape, index_shape, dim) for ``rank``: small sizes, index no larger than self
    on non-gather dims (and smaller on some), rank 25 mostly size-1 dims."""
    if rank == 0:
        return (), (), 0
    if rank >= 16:
        s = [1] * rank
        for d in rng.sample(range(rank), 4):
            s[d] = rng.choice([2, 3])
    else:
        budget = 4096
        s = []
        for _ in range(rank):
            v = rng.choice([1, 2, 3, 4, 5] if rank <= 4 else [1, 2, 2, 3])
            s.append(v)
        while math.prod(s) > budget:
            s[s.index(max(s))] -= 1
    big = [d for d in range(rank) if s[d] > 1]
    dim = rng.choice(big) if big else rank - 1
    idx = list(s)
    for d in range(rank):
        if d != dim and idx[d] > 1 and rng.random() < 0.4:
            idx[d] -= 1
    idx[dim] = rng.choice([1, 2, s[dim] + 1])
    return tuple(s), tuple(idx), dim


def rank_cases(base_seed: int = 0) -> list:
    """Ranks 0..8, 10 and 25; per rank each layout class on self, on index and on out (the
    other operands contiguous), plus deep compound views on all three at once."""
    cases = []
    for r in RANKS:
        rng = random.Random(1000 + r)
        ss, ishape, dim = rank_shapes(r, rng)
        ndim = dim - r if r and (r % 2 == 1) else dim  # negative dim on odd ranks
        mk = lambda **kw: GatherCase(ss, ishape, ndim, torch.float32, **kw)
        for l in layouts.LAYOUTS:
            cases.append(mk(self_layout=l, name=f"rank{r}-self={l}"))
            cases.append(mk(index_layout=l, name=f"rank{r}-index={l}"))
        for l in layouts.WRITABLE_LAYOUTS:
            cases.append(mk(out_layout=l, name=f"rank{r}-out={l}"))
        if r >= 2:
            cases.append(mk(self_layout="deep_compound", index_layout="deep_compound",
                            out_layout="compound_writable", name=f"rank{r}-all=compound"))
    return cases


def dtype_cases(dtypes: Iterable = CORE_DTYPES) -> list:
    """Every dtype x index dtype on: the contiguous fast path, an expanded-index (vector
    friendly) layout with a ragged tail, transposed self and a compound view."""
    cases = []
    for dt in dtypes:
        for it in INDEX_DTYPES:
            n = f"{dtype_name(dt)}-{dtype_name(it)}"
            cases.append(GatherCase((4, 16, 64), (4, 3, 64), 1, dt, it, name=f"{n}-contiguous"))
            cases.append(GatherCase((3, 7, 37), (3, 2, 37), 1, dt, it, index_layout="expand@2",
                                    name=f"{n}-expanded-index"))
            cases.append(GatherCase((6, 5, 4), (6, 5, 4), -1, dt, it, self_layout="transpose",
                                    index_layout="permute", out_layout="step_slice",
                                    name=f"{n}-transposed-out"))
            cases.append(GatherCase((6, 5, 4), (5, 5, 3), 0, dt, it, self_layout="compound",
                                    index_layout="compound", out_layout="compound_writable",
                                    name=f"{n}-compound"))
    return cases


def edge_cases() -> list:
    """0-dim, empty, size-1, duplicates, index larger than self along dim, negative dims."""
    f = torch.float32
    return [
        GatherCase((), (), 0, f, name="0dim-dim0"),
        GatherCase((), (), -1, f, name="0dim-dim-1"),
        GatherCase((), (), 0, f, out_layout="contiguous", name="0dim-out"),
        GatherCase((3, 0), (3, 0), 1, f, name="empty-self-empty-index"),
        GatherCase((3, 4), (0, 2), 1, f, name="empty-index"),
        GatherCase((3, 4), (3, 0), 1, f, out_layout="contiguous", name="empty-index-out"),
        GatherCase((0, 4), (0, 2), 1, f, name="empty-self-rows"),
        GatherCase((3, 4), (3, 0), 0, f, index_layout="transpose", name="empty-index-transposed"),
        GatherCase((1, 1, 1), (1, 1, 1), 2, f, name="all-size-1"),
        GatherCase((5, 7), (5, 40), 1, f, index_values="dup", name="duplicates-all-same"),
        GatherCase((5, 7), (5, 40), 1, f, index_layout="expand_all", name="duplicates-expand-all"),
        GatherCase((5, 7), (5, 7), 1, f, index_values="max", name="index-max-value"),
        GatherCase((5, 7), (5, 7), 0, f, index_values="min", name="index-min-value"),
        GatherCase((5, 7), (2, 30), 1, f, name="index-larger-along-dim"),
        GatherCase((5, 7, 3), (2, 3, 1), -3, f, index_layout="step_slice", name="negative-dim-3"),
        GatherCase((5, 7, 3), (2, 3, 1), -1, f, self_layout="expand", name="negative-dim-1"),
        GatherCase((1,), (9,), 0, f, name="self-size-1-along-dim"),
        GatherCase((7, 1, 5), (7, 1, 5), 1, f, index_layout="expand_all", self_layout="expand",
                   name="expanded-size1-dim"),
    ]


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


def large_cases() -> list:
    """Cases above the CPU kernel's parallel grain (tens of thousands of elements) so the
    work is split in chunks that start in the middle of rows: every layout class on index
    and on self, writable outs, the seed's layout, both index dtypes."""
    cases = []
    sshape, ishape = (40, 33, 65), (37, 41, 64)   # 97,088 index elements
    for l in layouts.LAYOUTS:
        cases.append(GatherCase(sshape, ishape, 1, torch.float32, index_layout=l,
                                name=f"large-index={l}"))
        cases.append(GatherCase(sshape, ishape, 1, torch.float16, torch.int32, self_layout=l,
                                name=f"large-self={l}-int32"))
    for l in layouts.WRITABLE_LAYOUTS:
        cases.append(GatherCase(sshape, ishape, -2, torch.uint8, index_layout="compound",
                                self_layout="permute", out_layout=l, name=f"large-out={l}"))
    cases.append(GatherCase((64, 16, 384), (64, 1, 384), 1, torch.float16, index_layout="expand@2",
                            name="large-seed-layout"))
    cases.append(GatherCase((3, 5, 7, 11, 13, 2), (3, 5, 7, 11, 13, 9), 5, torch.float64,
                            index_layout="deep_compound", self_layout="deep_compound",
                            out_layout="compound_writable", name="large-rank6-compound"))
    # The CUDA tile kernel: the index runs along another dim than out, both >= 32, partial
    # tiles at both edges (45 = 32 + 13, 70 = 2 * 32 + 6); also into a transposed out=.
    for dt, it in ((torch.float32, torch.int64), (torch.float16, torch.int32),
                   (torch.complex128, torch.int64)):
        cases.append(GatherCase((3, 50, 70), (3, 45, 70), 1, dt, it, index_layout="transpose@1,2",
                                name=f"large-tile-{str(dt)[6:]}-{str(it)[6:]}"))
    cases.append(GatherCase((3, 50, 70), (3, 45, 70), 2, torch.float32, index_layout="transpose@1,2",
                            out_layout="transpose@0,2", name="large-tile-dim2-out-transposed"))
    # The blocked elems walk: every operand permuted, dims of 4..8 (sector-sized inner parts).
    cases.append(GatherCase((4, 8, 12, 8, 4, 8), (4, 8, 6, 8, 4, 8), 2, torch.float32,
                            index_layout="permute", self_layout="permute",
                            name="large-rank6-permuted"))
    return cases


def all_cases() -> list:
    """Every case set above (seed matrix, layout cross products, ranks, dtypes, edges,
    large): ~850 cases, for the auditor or a benchmark sweep."""
    return (seed_matrix() + layout_cross_cases() + layout_cross_cases(out=True) + rank_cases()
            + dtype_cases() + edge_cases() + large_cases())
