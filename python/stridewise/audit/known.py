"""Known upstream bugs of native PyTorch that the audit finds.

A failing case that matches a known issue is reported with status ``known`` (its own column,
its repro script still written) instead of failing the run. They apply when auditing ATen
itself (no --backend) unless --no-known; with a backend, --known applies them too.
Each entry is precise: the conditions under which ATen takes the faulty path, and (``reasons``,
``raises``) the symptom it produces there, so a different failure of the same case still fails.
"""
from __future__ import annotations

import dataclasses
import re
from dataclasses import dataclass
from typing import Callable

import torch

from ..testing import sanitizer


@dataclass
class KnownIssue:
    name: str
    summary: str
    ops: tuple  # spec names (every variant: func, inplace, out)
    devices: tuple
    match: Callable  # (built) -> bool
    reasons: tuple = ()  # verdict reasons it explains (empty: any failing verdict)
    raises: str = ""  # regex the candidate's exception ("Type: message") must match, if set


def _expanded_index_fastpath(built) -> bool:
    """ATen CPU 'expanded index' scatter fast path (aten/src/ATen/native/TensorAdvancedIndexing
    .cpp: can_use_expanded_index_path, used by scatter_add / scatter_reduce for GNN-style
    indices): taken when dim == 0, the index has stride 1 on dim 0 and strides <= 1 elsewhere,
    src and index agree on dims >= 1, index.numel() / index.size(0) >= 16, floating dtype.
    The kernel then walks self with the index's row length, so when self is larger than the
    index on a dim >= 1 it writes src's rows contiguously into self (elements outside the
    index's extent get values, elements inside do not)."""
    t = built.tensors
    idx, src = t.get("idx"), t.get("src")
    self_ = t.get("out") if built.case.variant == "out" else t.get("self")
    dim = built.scalars.get("dim")
    if idx is None or src is None or self_ is None or dim is None or idx.dim() == 0:
        return False
    if dim % idx.dim() != 0 or not (self_.dtype.is_floating_point):
        return False
    if idx.numel() == 0 or idx.size(0) == 0 or idx.numel() // idx.size(0) < 16:
        return False
    st = idx.stride()
    if st[0] != 1 and idx.size(0) > 1:
        return False
    if any(s > 1 for s in st[1:]):
        return False
    if any(src.size(d) != idx.size(d) for d in range(1, idx.dim())):
        return False
    return any(self_.size(d) != idx.size(d) for d in range(1, idx.dim()))


def _gather_backward_fastpath(built) -> bool:
    """gather's backward is ``zeros(self.shape).scatter_add_(dim, idx, grad)`` (grad shaped as
    the index): the fast path above with self's shape and the index's. Found by the audit with
    --grad on 2026-12-06 (gather/func/idx=expand_nondim/r10/float16, index (1,2,1,1,2,1,2,2,1,1)
    with strides (1,0,1,1,0,1,0,0,1,1): ATen writes 20 of 256 gradient elements outside the
    index's extent)."""
    t = built.tensors
    idx, self_ = t.get("idx"), t.get("self")
    if not isinstance(idx, torch.Tensor) or self_ is None:
        return False
    as_scatter = type(built)(dataclasses.replace(built.case, variant="func"),
                             {"idx": idx, "src": idx, "self": self_}, built.scalars, None)
    return _expanded_index_fastpath(as_scatter)


# ATen CUDA index_select / index_add / index_reduce (aten/src/ATen/native/cuda/Indexing.cu): when
# every tensor fits 32-bit index math, the kernels read the int64 index into the 32-bit
# IndexType (unsigned int) before CUDA_KERNEL_ASSERT(index < dim size), so 2**32 + k passes the
# check as k. Seen on an H200 with torch 2.11 in the small-index kernels (index count <= 16);
# embedding (forward = weight.index_select(0, idx.reshape(-1))) with > 16 indices asserted.
# index_reduce with include_self=False first runs index_fill_, whose kernel checks the int64
# value (device-side assert): only include_self=True takes the faulty path.
TRUNC32_MAX_INDICES = 16  # the small-index kernels' limit (numIndices <= 16); None: any count
TRUNC32_OPS = ("index_select", "index_add", "index_reduce", "embedding")


def _index_truncated_to_32_bits(built) -> bool:
    """Some index value is >= 2**32 and every value is in range once truncated to 32 bits
    (v mod 2**32 < size of the indexed dim; a negative value truncates out of range)."""
    t = built.tensors
    idx, self_ = t.get("idx"), t.get("self")
    if not isinstance(idx, torch.Tensor) or self_ is None or idx.dtype != torch.int64:
        return False
    if built.case.op == "index_reduce" and not built.scalars.get("include_self", True):
        return False
    if TRUNC32_MAX_INDICES is not None and idx.numel() > TRUNC32_MAX_INDICES:
        return False
    if built.case.op == "embedding":
        n = self_.size(0)
    else:
        dim = built.scalars.get("dim", 0)
        n = self_.size(dim) if self_.dim() else 1
    v = idx.reshape(-1)
    return bool((v >= 2**32).any()) and bool(((v % 2**32) < n).all())


def _index_reduce_prod_scalar_slice(built) -> bool:
    """ATen CPU index_reduce(reduce='prod') on float16/bfloat16, self of rank >= 2, >= 2 indices,
    and a source slice (src without ``dim``) that TensorIterator sees as a scalar (every dim of
    size 1 or stride 0: one-element slices, an expanded src). The loop runs mul_stub on one
    iterator per index; the reduced-float mul kernel takes the scalar operand out of the
    iterator (iter.remove_operand(2)), so the next index's call fails ``iter.ninputs() ==
    traits::arity INTERNAL ASSERT FAILED`` (cpu/Loops.h). Not when the written tensor (in-place
    self, out) has a stride 0: ATen's internal-overlap check raises before."""
    t = built.tensors
    self_, src, idx = t.get("self"), t.get("src"), t.get("idx")
    if self_ is None or src is None or not isinstance(idx, torch.Tensor):
        return False
    if built.scalars.get("reduce") != "prod" or self_.dim() < 2 or idx.numel() < 2:
        return False
    if self_.dtype not in (torch.float16, torch.bfloat16) or src.dim() != self_.dim():
        return False
    written = t.get({"inplace": "self", "out": "out"}.get(built.case.variant, ""))
    if written is not None and any(st == 0 and sz > 1 for sz, st in zip(written.shape, written.stride())):
        return False  # ATen refuses an internally overlapping written tensor first
    dim = built.scalars.get("dim", 0) % self_.dim()
    return all(sz == 1 or st == 0 for k, (sz, st) in enumerate(zip(src.shape, src.stride())) if k != dim)


def _gather_expanded_int32_index(built) -> bool:
    """ATen CPU gather (func and out) with an int32 index in its 'expanded index' layout: dim 0,
    the index of stride 1 (or size 1) on dim 0 and stride 0 (or size 1) on every other dim,
    self floating, contiguous, of rank >= 2 and the index's size on every dim >= 1. Found by
    this audit (torch 2.13.0+cpu); every one of the seven conditions was seen necessary over
    30,000 random layouts (tests/test_audit_triage.py checks the conditions against native CPU). There the kernel
    steps through the int32 index as if its elements were 8 bytes wide: element i is read from
    int32 element 2*i, past the index's storage from i = n/2 on (the seed's bug class)."""
    t = built.tensors
    idx, self_ = t.get("idx"), t.get("self")
    dim = built.scalars.get("dim")
    if not isinstance(idx, torch.Tensor) or self_ is None or dim is None:
        return False
    if idx.dtype != torch.int32 or self_.dim() < 2 or idx.dim() != self_.dim():
        return False
    if dim % self_.dim() != 0 or not self_.dtype.is_floating_point or not self_.is_contiguous():
        return False
    st, sz = idx.stride(), idx.shape
    if not (st[0] == 1 or sz[0] == 1):
        return False
    if any(st[d] != 0 and sz[d] != 1 for d in range(1, idx.dim())):
        return False
    return all(self_.size(d) == sz[d] for d in range(1, idx.dim()))


def _narrow_atomic_cas(built) -> bool:
    """ATen CUDA accumulates 1- and 2-byte dtypes with a 4-byte access to the aligned word around
    the element (stridewise.testing.sanitizer: the class, its sources, its uncertain parts): the
    case's op, reduce and dtype are in the class, and an allocation it adds into (the written
    tensor's storage; for a functional call the fresh result; for mean also the count tensor)
    has a byte size that is not a multiple of 4."""
    t, case = built.tensors, built.case
    self_ = t.get("self")
    if not isinstance(self_, torch.Tensor):
        return False
    if case.op == "put" and not built.scalars.get("accumulate"):
        return False
    dest = t.get({"inplace": "self", "out": "out"}.get(case.variant, ""))
    reduce = built.scalars.get("reduce")
    sizes = sanitizer.added_into(self_, dest if isinstance(dest, torch.Tensor) else None, reduce)
    return sanitizer.cas_overrun(case.op, reduce, self_.dtype, sizes) is not None


KNOWN = [
    KnownIssue(
        "aten-cpu-expanded-index-scatter",
        "ATen CPU scatter_add/scatter_reduce fast path for an expanded (GNN-style) index writes "
        "src rows contiguously into self when self is larger than the index on a dim >= 1 "
        "(minimal repro: torch.zeros(2,64,4).scatter_add(0, torch.zeros(1,1,1,dtype=torch.long)"
        ".expand(1,64,3), torch.ones(1,64,3)) sets [0,0,3] and leaves [0,48:,:3] at 0)",
        ("scatter_add", "scatter_reduce", "scatter.reduce"), ("cpu",), _expanded_index_fastpath),
    KnownIssue(
        "aten-cpu-expanded-index-scatter-in-gather-backward",
        "the same ATen CPU fast path reached through gather's backward (a scatter_add of the "
        "upstream gradient into zeros of self's shape): gradient elements outside the index's "
        "extent get values, elements inside do not",
        ("gather",), ("cpu",), _gather_backward_fastpath, reasons=("backward-values",)),
    KnownIssue(
        "aten-cuda-index-truncated-to-32-bits",
        "ATen CUDA index_select / index_add / index_reduce (include_self=True) / embedding read "
        "int64 index values as 32-bit unsigned before the bounds check: a value >= 2**32 whose "
        "low 32 bits are in range is accepted and used as v mod 2**32 (minimal repro: "
        "torch.arange(3., device='cuda').index_select(0, torch.tensor([2**32 + 1], "
        "device='cuda')) returns [1.] instead of raising)",
        TRUNC32_OPS, ("cuda",), _index_truncated_to_32_bits, reasons=("missing-error",)),
    KnownIssue(
        "aten-cpu-index-reduce-prod-half-internal-assert",
        "ATen CPU index_reduce(reduce='prod') on float16/bfloat16, self of rank >= 2, >= 2 "
        "indices, src slices that are scalars to TensorIterator (one element, or expanded): "
        "RuntimeError 'iter.ninputs() == traits::arity "
        "INTERNAL ASSERT FAILED' (cpu/Loops.h) instead of a result (minimal repro: "
        "torch.ones(2, 1, dtype=torch.half).index_reduce(0, torch.tensor([0, 1]), "
        "torch.ones(2, 1, dtype=torch.half), 'prod')); the oracle computes the reference "
        "from float32 copies instead",
        ("index_reduce",), ("cpu",), _index_reduce_prod_scalar_slice,
        reasons=("spurious-error", "error-type"), raises=r"INTERNAL ASSERT FAILED"),
    KnownIssue(
        "aten-cpu-gather-expanded-int32-index",
        "ATen CPU gather with an int32 index expanded along dims >= 1 (stride 1 on dim 0, 0 "
        "elsewhere), dim 0, self floating and contiguous with the index's size on dims >= 1: the "
        "index is stepped through as if its elements were 8 bytes, so element i is read from "
        "int32 element 2*i, past the index's storage for the second half (minimal repro: "
        "torch.gather(torch.arange(8.).reshape(2, 4), 0, torch.tensor([1, 0, 1], "
        "dtype=torch.int32).as_strided((3, 4), (1, 0)))[:, 0] gives [4, 4, 4], not [4, 0, 4])",
        ("gather",), ("cpu",), _gather_expanded_int32_index, reasons=("values",)),
    KnownIssue(
        "aten-cuda-narrow-atomic-cas",
        "ATen CUDA emulates 1- and 2-byte atomics (bool/uint8/int8/int16 add, mul, max, min, "
        "mean; float16/bfloat16 mul, max, min, and add/mean through a float16 pair) with a 4-byte "
        "access to the aligned word around the element: into an allocation whose byte size is "
        "not a multiple of 4 it reads (and compare-and-swaps) up to 3 bytes past the end. "
        "compute-sanitizer memcheck reports it and the CUDA context is lost; under guard pages "
        "it faults (repro: docs/known_issues/aten_cuda_narrow_atomic_cas.py: a 210-byte bool "
        "tensor, scatter_add into its last element; the same class as NVIDIA/cccl#6430). "
        "Under memcheck the audit does not run ATen's kernel for such cases (status known, "
        "reason not-run-sanitizer)",
        sanitizer.OPS, ("cuda",), _narrow_atomic_cas, reasons=("crash",)),
]


def sanitizer_flagged(op: str, device_type: str, built):
    """The known issue that makes ATen's own kernel for this case fail under compute-sanitizer
    memcheck (whatever the result), or None. The runner does not run such cases natively under
    memcheck."""
    k = next(x for x in KNOWN if x.name == "aten-cuda-narrow-atomic-cas")
    if op not in k.ops or device_type not in k.devices:
        return None
    try:
        return k if k.match(built) else None
    except Exception:  # noqa: BLE001 - a case the predicate cannot read is run as usual
        return None


def match(op: str, device_type: str, built, reason: str = "", exc: str = ""):
    """The known issue explaining a failing verdict (``reason``; ``exc`` the candidate's
    exception, "Type: message"), or None."""
    for k in KNOWN:
        if op not in k.ops or device_type not in k.devices:
            continue
        if k.reasons and reason not in k.reasons:
            continue
        if not k.reasons and (reason or "").startswith("backward"):
            continue  # an issue of a forward explains a backward finding only where it says so
        if k.raises and not re.search(k.raises, exc or ""):
            continue
        try:
            if k.match(built):
                return k
        except Exception:  # noqa: BLE001
            continue
    return None
