"""Running under compute-sanitizer, and the native CUDA kernels memcheck flags in ATen itself.

The contract with the device script (scripts/gpu_all.sh): every process it runs under
compute-sanitizer has ``STRIDEWISE_SANITIZER`` set to the tool's name (``memcheck``,
``racecheck``; ``initcheck`` and ``synccheck`` are accepted too). :func:`sanitizer` reads it;
unset, empty, ``0`` or ``none`` mean no sanitizer. Any other value is a ValueError (a typo in the
device script must not silently turn the avoidance off). Fallback when the variable is unset:
compute-sanitizer loads its tool into the target process through the injection mechanism and
tells it how to reach the tool's front end. Under compute-sanitizer 2025 (CUDA 13.0) on the
H200 (2026-12-02, docs/known_issues/aten_cuda_narrow_atomic_cas.py printed them) the target
sees ``NV_SANITIZER_INJECTION_PORT_BASE`` and the other ``NV_SANITIZER_INJECTION_*`` variables,
and ``NVTX_INJECTION64_PATH=libsanitizer-collection.so``; ``CUDA_INJECTION64_PATH`` was not
set. Either says a tool is loaded but not which, so :func:`sanitizer` returns ``"unknown"``
then, and :func:`memcheck_active` treats it as memcheck.

The flagged class (ATen, aten/src/ATen/cuda/Atomic.cuh and native/cuda/KernelUtils.cuh, torch
2.11-2.13): CUDA has no 1- or 2-byte atomic add/mul/max/min for most types, so ATen emulates
them with a 4-byte compare-and-swap on the aligned 32-bit word that contains the element
(``Atomic*IntegerImpl<T, 1|2>``, ``AtomicFPOp<Half|BFloat16>``), and float16/bfloat16 additions
with a 4-byte ``atomicAdd(__half2*)`` on the aligned pair (``fastSpecializedAtomicAdd``, whose
``index < numel - 1`` guard is relative to the element's row in the scatter kernel, not to the
tensor). When the written allocation's byte size is not a multiple of 4, an element in its last
partial word makes that 4-byte access reach up to 3 bytes past the allocation: memcheck reports
an invalid global read (H200, torch 2.11: ``_scatter_gather_elementwise_kernel<..., bool,
long>`` with ReduceAdd, 2 bytes past a 210-byte allocation) and the error poisons the CUDA
context. NVIDIA CCCL has the same class of bug (NVIDIA/cccl#6430). The class, per combine:

  add, mean:  bool (a || b, since torch 2.x's GPU_ATOMIC_INTEGER(Add, a || b, bool)), uint8,
              int8, int16 (CAS); float16, bfloat16 (the __half2 pair: an "Invalid
              __global__ atomic of size 4 bytes" on the H200)
  mul, max, min:  uint8, int8, int16 (CAS); float16, bfloat16 (AtomicFPOp CAS)
  never:      int32, int64, float32, float64, complex (native 4/8-byte atomics or a CAS on the
              element's own word), and copies (scatter src/value, gather: plain stores)

ATen's CUDA kernels of mul/mean/max/min have no bool or complex instantiation (they raise
NotImplementedError before launching anything). The ops: scatter (reduce add/multiply, src or
value), scatter_add, scatter_reduce (sum, prod, mean, amax, amin), index_add, index_reduce and
put (accumulate=True) -- the last three through the same Atomic.cuh functions. scatter_reduce's
mean also adds into a count tensor of the result's dtype and shape (numel * itemsize bytes).
Seen on the H200 (2026-12-02, torch 2.11.0+cu130, compute-sanitizer memcheck, caching allocator
off; docs/known_issues/aten_cuda_narrow_atomic_cas.py, one case per process): an invalid 4-byte
access at byte 208 of a 210-byte allocation (105 for int16/float16) in
``_scatter_gather_elementwise_kernel`` for bool and uint8 scatter_add, int16 amax, float16 prod
and the float16 add pair (an atomic), in ``indexFuncSmallIndex`` for int8 index_add, in
``index_elementwise_kernel`` for int16 put with accumulate; the two controls (a 212-byte bool
tensor, a float32 one) stayed clean. bfloat16, index_reduce and the mean count are read from
the source, not run.

:func:`cas_overrun` decides one call; :func:`native_guard` (inside ``specs.native()``, the one
place every test's native call goes through) runs the flagged CUDA calls on CPU copies under
memcheck and puts the result back on the device, with a :class:`SanitizerReroute` warning that
names the issue (exact for bool and integers; for float16/bfloat16 the CPU result is a valid
reference with its own summation order). The auditor's known issue (audit/known.py) uses the
same predicate.
"""
from __future__ import annotations

import contextlib
import os
import warnings
from typing import Iterable, Optional

import torch

ENV = "STRIDEWISE_SANITIZER"
TOOLS = ("memcheck", "racecheck", "initcheck", "synccheck")
ISSUE = "aten-cuda-narrow-atomic-cas"  # the auditor's known-issue name (audit/known.py)
ISSUE_REFS = "NVIDIA/cccl#6430 (same class); docs/known_issues/aten_cuda_narrow_atomic_cas.py (repro)"


# Where compute-sanitizer's injection shows in a target process's environment (see above).
INJECTION_VARS = ("NV_SANITIZER_INJECTION_PORT_BASE", "NVTX_INJECTION64_PATH", "CUDA_INJECTION64_PATH")


def _injected() -> bool:
    if os.environ.get("NV_SANITIZER_INJECTION_PORT_BASE"):
        return True
    return any("sanitizer" in os.path.basename(os.environ.get(k, "")).lower()
               for k in ("NVTX_INJECTION64_PATH", "CUDA_INJECTION64_PATH"))


def sanitizer() -> Optional[str]:
    """The compute-sanitizer tool this process runs under: 'memcheck', 'racecheck', ... from
    $STRIDEWISE_SANITIZER; 'unknown' when only compute-sanitizer's injection is seen; None."""
    v = os.environ.get(ENV, "").strip().lower()
    if v in ("", "0", "none"):
        return "unknown" if _injected() else None
    if v not in TOOLS:
        raise ValueError(f"{ENV}={os.environ.get(ENV)!r}: expected one of {', '.join(TOOLS)} "
                         "(or unset / none)")
    return v


def memcheck_active() -> bool:
    """True under memcheck, or under a compute-sanitizer tool we cannot name (conservative: the
    avoidance only costs checking ATen's own kernel)."""
    return sanitizer() in ("memcheck", "unknown")


# combine -> dtypes whose atomics take the containing-word path
_BYTE_INTS = (torch.bool, torch.uint8, torch.int8, torch.int16)
_HALVES = (torch.float16, torch.bfloat16)
CLASS = {
    "add": _BYTE_INTS + _HALVES,
    "mean": _BYTE_INTS + _HALVES,
    "mul": _BYTE_INTS[1:] + _HALVES,
    "max": _BYTE_INTS[1:] + _HALVES,
    "min": _BYTE_INTS[1:] + _HALVES,
}
# op (the auditor's spec names) -> how its reduce argument maps to a combine
_COMBINE = {
    "scatter_add": lambda reduce: "add",
    "index_add": lambda reduce: "add",
    "put": lambda reduce: "add",
    "scatter.reduce": lambda reduce: {"add": "add", "multiply": "mul"}.get(reduce),
    "scatter.value_reduce": lambda reduce: {"add": "add", "multiply": "mul"}.get(reduce),
    "scatter_reduce": lambda reduce: {"sum": "add", "prod": "mul", "mean": "mean",
                                      "amax": "max", "amin": "min"}.get(reduce),
    "index_reduce": lambda reduce: {"prod": "mul", "mean": "mean", "amax": "max",
                                    "amin": "min"}.get(reduce),
}
OPS = tuple(_COMBINE)


def combine_of(op: str, reduce: Optional[str] = None) -> Optional[str]:
    f = _COMBINE.get(op)
    return f(reduce) if f else None


def cas_overrun(op: str, reduce: Optional[str], dtype: torch.dtype, nbytes: Iterable[int]) -> Optional[str]:
    """Why ATen's CUDA kernel for this call may access up to 3 bytes past a written allocation
    (the flagged class above), or None. ``op``: a spec name of :data:`OPS` (others: None);
    ``reduce``: its reduce argument (None for scatter_add, index_add, put); ``nbytes``: the byte
    sizes of the allocations it adds into (the written tensor's storage; for a functional call
    the fresh result, numel * itemsize; for mean also the count tensor's)."""
    c = combine_of(op, reduce)
    if c is None or dtype not in CLASS[c]:
        return None
    odd = sorted({int(n) for n in nbytes if int(n) % 4})
    if not odd:
        return None
    how = ("a 4-byte atomicAdd on the aligned float16/bfloat16 pair" if c in ("add", "mean") and dtype in _HALVES
           else "a 4-byte compare-and-swap on the aligned word around each element")
    return (f"ATen CUDA {op}{f' (reduce={reduce})' if reduce else ''} on {str(dtype)[6:]} emulates "
            f"the {c} with {how}: into an allocation of {odd[0]} bytes (not a multiple of 4) it "
            f"reaches past the end (memcheck: invalid global read; {ISSUE}, {ISSUE_REFS})")


def added_into(self_: torch.Tensor, dest: Optional[torch.Tensor], reduce: Optional[str]) -> list:
    """The byte sizes of the allocations an accumulating call adds into: the written tensor's
    storage (``dest``: in-place self or out=), else the fresh result (self's numel * itemsize);
    for reduce='mean' also the count tensor, of the result's dtype and shape."""
    fresh = self_.numel() * self_.element_size()
    sizes = [dest.untyped_storage().nbytes()] if dest is not None else [fresh]
    if reduce == "mean":
        sizes.append(fresh)
    return sizes


# ---------------------------------------------------------------------------------------------
# The switch for tests: native CUDA calls of the class run on the CPU under memcheck

# aten overload name (without the trailing "_" of in-place forms) -> the spec name cas_overrun
# knows; "scatter" is split by its reduce argument (src or value form)
_ATEN_OPS = {"scatter_add": "scatter_add", "scatter_reduce": "scatter_reduce",
             "index_add": "index_add", "index_reduce": "index_reduce", "put": "put",
             "scatter": None}


class SanitizerReroute(UserWarning):
    """A native CUDA call of the flagged class ran on the CPU instead (the message says why)."""


REROUTED: list = []  # (overload, reason) of every call native_guard ran on the CPU, in order


def on_cuda(t) -> bool:
    """Whether a tensor is on a CUDA device (the one device check of the switch; tests
    monkeypatch it to drive the switch with CPU tensors)."""
    return isinstance(t, torch.Tensor) and t.device.type == "cuda"


def _bind(func, args, kwargs) -> dict:
    out = {}
    for k, a in enumerate(func._schema.arguments):
        if k < len(args):
            out[a.name] = args[k]
        elif a.name in kwargs:
            out[a.name] = kwargs[a.name]
    return out


def call_reason(func, args, kwargs) -> Optional[str]:
    """For one aten overload call: why it is in the flagged class on CUDA, or None."""
    name = func._schema.name.split("::")[-1]
    inplace = name.endswith("_")
    base = name.rstrip("_")
    if base not in _ATEN_OPS:
        return None
    b = _bind(func, args, kwargs)
    self_, out = b.get("self"), b.get("out")
    if not isinstance(self_, torch.Tensor):
        return None
    dest = out if isinstance(out, torch.Tensor) else (self_ if inplace else None)
    if not on_cuda(dest if dest is not None else self_):
        return None
    reduce = b.get("reduce")
    op = _ATEN_OPS[base]
    if base == "scatter":
        if reduce is None:
            return None  # a copy
        op = "scatter.reduce" if isinstance(b.get("src"), torch.Tensor) else "scatter.value_reduce"
    if base == "put" and not b.get("accumulate", False):
        return None
    return cas_overrun(op, reduce, self_.dtype, added_into(self_, dest, reduce))


def _cpu(x):
    return x.cpu() if isinstance(x, torch.Tensor) else x


def _run_on_cpu(func, args, kwargs, reason: str):
    name = func._schema.name.split("::")[-1]
    cargs = [[_cpu(y) for y in x] if isinstance(x, (list, tuple)) else _cpu(x) for x in args]
    ckw = {k: _cpu(v) for k, v in kwargs.items()}
    res = func(*cargs, **ckw)
    b, cb = _bind(func, args, kwargs), _bind(func, cargs, ckw)
    REROUTED.append((str(func), reason))
    warnings.warn(SanitizerReroute(f"{func}: ran natively on the CPU instead of CUDA under "
                                   f"compute-sanitizer memcheck: {reason}"), stacklevel=2)
    dest = b.get("out") if isinstance(b.get("out"), torch.Tensor) else (b["self"] if name.endswith("_") else None)
    if dest is not None:
        src = cb["out"] if dest is b.get("out") else cb["self"]
        if tuple(dest.shape) != tuple(src.shape):
            dest.resize_(src.shape)
        dest.copy_(src)
        return dest
    r = torch.empty_strided(res.shape, res.stride(), dtype=res.dtype, device=b["self"].device)
    return r.copy_(res)


def _mode():
    from torch.utils._python_dispatch import TorchDispatchMode

    class _NativeOnCpu(TorchDispatchMode):
        @classmethod
        def _should_skip_dynamo(cls):  # torch >= 2.12 would wrap the hook (imports dynamo)
            return False

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            kwargs = kwargs or {}
            why = call_reason(func, args, kwargs)
            if why is None:
                return func(*args, **kwargs)
            return _run_on_cpu(func, args, kwargs, why)

    return _NativeOnCpu()


@contextlib.contextmanager
def native_guard():
    """Inside: native aten calls of the flagged class on CUDA run on CPU copies when memcheck is
    active (the result is put back on the device); every other call is untouched. Outside
    memcheck this is a no-op."""
    if not memcheck_active():
        yield
        return
    with _mode():
        yield


__all__ = ["ENV", "TOOLS", "ISSUE", "sanitizer", "memcheck_active", "cas_overrun", "combine_of",
           "added_into", "call_reason", "native_guard", "SanitizerReroute", "REROUTED", "on_cuda", "CLASS", "OPS"]
