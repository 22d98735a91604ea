"""The planted kernels: a strided gather/scatter engine over raw memory with one fault knob.

Offsets are element offsets from the start of an operand's storage (storage offset plus
sum(coord * stride)), computed for the iteration space in chunks, like a GPU kernel's threads
would. Values are read from / written to raw memory views (numpy over a pointer on CPU,
__cuda_array_interface__ on CUDA) that are *not* bounded by the storage, so a wrong offset
really touches memory outside it (and faults on a guard page).
"""
from __future__ import annotations

import torch

FAULT = "none"
PENDING = None  # deferred: the first bad index seen since the last report (message)
EARLY = None  # early_write: the bad index of the chunk being written, raised once it is written
MAX_RANK = 5  # rank_limit: dims >= MAX_RANK are not walked
CHUNK = 1 << 22
SCARRED = False  # after_neg*: a call of this process wrapped a negative index (_scar)


# ---------------------------------------------------------------------------------------------
# raw memory


class _HostIface:
    def __init__(self, addr, nbytes):
        self.__array_interface__ = {"shape": (nbytes,), "typestr": "|u1", "data": (addr, False),
                                    "version": 3}


class _CudaIface:
    def __init__(self, addr, nbytes):
        self.__cuda_array_interface__ = {"shape": (nbytes,), "typestr": "|u1", "data": (addr, False),
                                         "version": 2, "strides": None}


def _window(t: torch.Tensor, lo: int, hi: int) -> torch.Tensor:
    """A 1-D view of elements [lo, hi) counted from the start of t's storage (unchecked)."""
    isz = t.element_size()
    base = t.untyped_storage().data_ptr()
    nbytes = max(0, hi - lo) * isz
    if nbytes == 0:
        return torch.empty(0, dtype=t.dtype, device=t.device)
    addr = base + lo * isz
    if t.device.type == "cpu":
        import numpy as np

        raw = torch.from_numpy(np.asarray(_HostIface(addr, nbytes)))
    else:
        raw = torch.as_tensor(_CudaIface(addr, nbytes), device=t.device)
    return raw.view(t.dtype)


def _wrap32(off):
    return ((off + 2**31) % 2**32) - 2**31


POISON = 0xA5  # what a device read before the storage returns here (guard.py's poison byte)


def _poisoned(vals: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """``vals`` with the elements under ``mask`` replaced by POISON bytes (any dtype)."""
    b = vals.contiguous().view(torch.uint8).reshape(vals.numel(), -1)
    b = torch.where(mask.reshape(-1, 1), torch.full_like(b, POISON), b)
    return b.reshape(-1).view(vals.dtype)


def read(t: torch.Tensor, off: torch.Tensor) -> torch.Tensor:
    if off.numel() == 0:
        return torch.empty(0, dtype=t.dtype, device=t.device)
    if FAULT == "overflow32":
        off = _wrap32(off)
    if t.device.type != "cpu" and bool((off < 0).any()):
        if FAULT == "overflow32":  # a wrapped 32-bit offset: stay mapped, inside the allocation
            off = off % max(1, t.untyped_storage().nbytes() // t.element_size())
        else:
            # Memory before the storage: on CPU it is read (heap garbage); on a device it may be
            # unmapped, so it reads as POISON. Not ``off % storage size``: for a storage of
            # exactly n elements that is the correct wrap of a negative index (v % n == v + n),
            # which made the neg_nowrap fault pass on CUDA.
            neg = off < 0
            return _poisoned(read(t, torch.where(neg, torch.zeros_like(off), off)), neg)
    lo, hi = int(off.min()), int(off.max()) + 1
    return _window(t, lo, hi)[off - lo]


def write(t: torch.Tensor, off: torch.Tensor, vals: torch.Tensor, accumulate=False):
    if off.numel() == 0:
        return
    if FAULT == "overflow32":
        off = _wrap32(off)
    lo, hi = int(off.min()), int(off.max()) + 1
    _window(t, lo, hi).index_put_((off - lo,), vals, accumulate=accumulate)


# ---------------------------------------------------------------------------------------------
# offsets


def coords(lin: torch.Tensor, shape) -> list:
    out = [None] * len(shape)
    rem = lin
    for k in range(len(shape) - 1, -1, -1):
        s = max(int(shape[k]), 1)
        out[k] = rem % s
        rem = rem // s
    return out


def offsets(t: torch.Tensor, cs: list, skip_dim=None, base=True) -> torch.Tensor:
    """storage_offset + sum(c_k * stride_k) over the walked dims."""
    off = torch.full_like(cs[0], t.storage_offset()) if cs else None
    if off is None:
        return None
    if not base:
        off = torch.zeros_like(off)
    for k, (c, st) in enumerate(zip(cs, t.stride())):
        if k == skip_dim or (FAULT == "rank_limit" and k >= MAX_RANK):
            continue
        off = off + c * st
    return off


def _self_base() -> bool:
    return FAULT != "offset_ignored"


def _check_index(index, ops: str, long_only=False):
    ok = (torch.int64,) if long_only else (torch.int64, torch.int32)
    if index.dtype not in ok:
        raise RuntimeError(f"{ops}(): Expected dtype int64 for index (planted backend)")


def _no_overlap(t: torch.Tensor, what="out"):
    if t.numel() <= 1:
        return
    span = 1
    for st, sz in sorted((st, sz) for sz, st in zip(t.shape, t.stride()) if sz > 1):
        if st < span:
            raise RuntimeError("unsupported operation: more than one element of the written-to "
                               f"tensor refers to a single memory location ({what}; planted backend)")
        span = st * (sz - 1) + span


def _bad(v, n, op, dim, wrap=False):
    """(values after wrapping, mask of valid positions); raises unless skip_oob, deferred or
    early_write (which raises after the valid positions are written: raise_early)."""
    global PENDING, EARLY
    if FAULT == "truncate32":  # int32 index math: cast before the bounds check, use the result
        v = _wrap32(v)  # (int32)v: 2**32+1 becomes 1 and passes the check
    if wrap and FAULT != "neg_nowrap":
        v = torch.where(v < 0, v + n, v)
    lo = -n if (wrap and FAULT == "neg_nowrap") else 0
    ok = (v >= lo) & (v < n)
    if not bool(ok.all()):
        if FAULT in ("skip_oob", "deferred", "early_write"):
            if FAULT == "early_write":
                EARLY = (f"{op}(): index {int(v[~ok][0])} is out of bounds for dimension {dim} "
                         f"with size {n} (planted backend, raised after writing)")
            if FAULT == "deferred" and PENDING is None:
                PENDING = (f"{op}(): index {int(v[~ok][0])} is out of bounds for dimension {dim} "
                           f"with size {n} (planted backend, reported later)")
            return v, ok
        bad = int(v[~ok][0])
        raise IndexError(f"{op}(): index {bad} is out of bounds for dimension {dim} with size {n} "
                         "(planted backend)")
    return v, None


def raise_early():
    """early_write: the valid positions of the chunk are written; now raise its bad index."""
    global EARLY
    msg, EARLY = EARLY, None
    if msg:
        raise IndexError(msg)


def raise_pending():
    """deferred: report the bad index a previous call met (then forget it)."""
    global PENDING
    msg, PENDING = PENDING, None
    if msg:
        raise RuntimeError(msg)


def _int32_shift(index, ioff):
    """int32_next: an int32 index is read one element on (the next value in memory where the
    storage has one): a kernel whose int32 instantiation got its offset arithmetic wrong;
    int32_contig: the same for a contiguous int32 index only (a fast path's instantiation)."""
    if FAULT not in ("int32_next", "int32_contig") or index.dtype != torch.int32:
        return ioff
    if FAULT == "int32_contig" and not index.is_contiguous():  # its fast path alone is wrong
        return ioff
    last = index.untyped_storage().nbytes() // index.element_size() - 1
    return torch.clamp(ioff + 1, max=last)


def _read_index(index, lin, cs, n, op, dim, wrap=False):
    """Index values at positions `lin` (coordinates `cs`) of `index`, checked by _bad. The
    flat_index fault reads them as if `index` were contiguous, as the seed's kernel did."""
    ioff = index.storage_offset() + lin if FAULT == "flat_index" else _offs(index, cs)
    return _bad(read(index, _int32_shift(index, ioff)).to(torch.int64), n, op, dim, wrap=wrap)


def _iter(numel):
    for s in range(0, numel, CHUNK):
        yield s, min(numel, s + CHUNK)


def _lin(s, e, device):
    return torch.arange(s, e, dtype=torch.int64, device=device)


def _shape(t):
    return list(t.shape) if t.dim() else [1]


def _cs(t, lin):
    return coords(lin, _shape(t)) if t.dim() else [torch.zeros_like(lin)]


def _stride(t):
    return list(t.stride()) if t.dim() else [1]


class _V:  # a rank-0 tensor seen as rank 1 (size 1)
    def __init__(self, t):
        self.t = t

    def storage_offset(self):
        return self.t.storage_offset()

    def stride(self):
        return _stride(self.t)


def _offs(t, cs, skip_dim=None, base=True):
    return offsets(_V(t) if t.dim() == 0 else t, cs, skip_dim, base)


# ---------------------------------------------------------------------------------------------
# gather / scatter_add


def _along_dim(index, target, dim, op):
    """The walk gather and scatter_add share: index positions in chunks, as (linear position,
    coordinates, the same coordinates with `dim` replaced by the index value, mask of the good
    values or None). `target` is the tensor the index values address."""
    _check_index(index, op)
    dim = dim % max(target.dim(), 1)
    n = target.size(dim) if target.dim() else 1
    for s, e in _iter(index.numel()):
        lin = _lin(s, e, index.device)
        cs = _cs(index, lin)
        v, ok = _read_index(index, lin, cs, n, op, dim)
        cs_t = list(cs)
        cs_t[dim] = v
        yield lin, cs, cs_t, ok


def _gather_into(self, dim, index, out):
    for lin, cs, cs_self, ok in _along_dim(index, self, dim, "gather"):
        soff = _offs(self, cs_self, base=_self_base())
        ooff = out.storage_offset() + lin if FAULT == "out_strides" else _offs(out, cs)
        if ok is not None:
            soff, ooff = soff[ok], ooff[ok]
        write(out, ooff, read(self, soff))
        raise_early()
    return out


def gather(self, dim, index, sparse_grad=False):
    out = torch.zeros(index.shape, dtype=self.dtype, device=self.device)
    return _gather_into(self, dim, index, out)


def gather_out(self, dim, index, sparse_grad=False, *, out):
    if FAULT == "out_ignored":  # computes into a fresh tensor and returns it; out untouched
        return gather(self, dim, index)
    _no_overlap(out)
    if list(out.shape) != list(index.shape):
        out.resize_(index.shape)
    return _gather_into(self, dim, index, out)


def _scatter_add_into(target, dim, index, src):
    for _, cs, cs_t, ok in _along_dim(index, target, dim, "scatter_add"):
        roff = _offs(src, cs)
        toff = _offs(target, cs_t, base=_self_base())
        if ok is not None:
            roff, toff = roff[ok], toff[ok]
        vals = read(src, roff)
        if FAULT == "lossy_accum" and (vals.is_floating_point() or vals.is_complex()):
            vals = vals.to(torch.complex64 if vals.is_complex() else torch.bfloat16).to(src.dtype)
        write(target, toff, vals, accumulate=True)
        raise_early()
    return target


def scatter_add_(self, dim, index, src):
    _no_overlap(self, "self")
    return _scatter_add_into(self, dim, index, src)


def scatter_add(self, dim, index, src):
    if FAULT == "writes_input":  # forgot to copy: the functional form updates its input
        return _scatter_add_into(self, dim, index, src)
    out = torch.empty_like(self, memory_format=torch.contiguous_format)
    out.copy_(self)
    return _scatter_add_into(out, dim, index, src)


def scatter_add_out(self, dim, index, src, *, out):
    _no_overlap(out)
    if list(out.shape) != list(self.shape):
        out.resize_(self.shape)
    if FAULT == "out_strides":  # copy self into out as if out were contiguous
        write(out, out.storage_offset() + _lin(0, self.numel(), self.device),
              self.reshape(-1))
        tmp = torch.empty(out.shape, dtype=out.dtype, device=out.device)
        tmp.copy_(self)
        _scatter_add_into(tmp, dim, index, src)
        write(out, out.storage_offset() + _lin(0, tmp.numel(), tmp.device), tmp.reshape(-1))
        return out
    out.copy_(self)
    return _scatter_add_into(out, dim, index, src)


# ---------------------------------------------------------------------------------------------
# index_select / take


def _index_select_into(self, dim, index, out):
    _check_index(index, "index_select")
    if index.dim() > 1:
        raise IndexError("index_select(): Index is supposed to be a vector (planted backend)")
    dim = dim % max(self.dim(), 1)
    n = self.size(dim) if self.dim() else 1
    for s, e in _iter(out.numel()):
        lin = _lin(s, e, out.device)
        cs = _cs(out, lin)
        pos = cs[dim] if self.dim() else torch.zeros_like(lin)
        istride = index.stride(0) if index.dim() else 1
        ioff = index.storage_offset() + (pos if FAULT == "flat_index" else pos * istride)
        v, ok = _bad(read(index, _int32_shift(index, ioff)).to(torch.int64), n, "index_select", dim)
        cs_self = list(cs)
        cs_self[dim] = v
        soff = _offs(self, cs_self, base=_self_base())
        ooff = out.storage_offset() + lin if FAULT == "out_strides" else _offs(out, cs)
        if ok is not None:
            soff, ooff = soff[ok], ooff[ok]
        write(out, ooff, read(self, soff))
        raise_early()
    return out


def _select_shape(self, dim, index):
    if self.dim() == 0:
        return []
    shape = list(self.shape)
    shape[dim % self.dim()] = index.numel()
    return shape


def index_select(self, dim, index):
    out = torch.zeros(_select_shape(self, dim, index), dtype=self.dtype, device=self.device)
    return _index_select_into(self, dim, index, out)


def index_select_out(self, dim, index, *, out):
    _no_overlap(out)
    shape = _select_shape(self, dim, index)
    if list(out.shape) != shape:
        out.resize_(shape)
    return _index_select_into(self, dim, index, out)


def _take_into(self, index, out):
    _check_index(index, "take", long_only=True)
    n = self.numel()
    for s, e in _iter(index.numel()):
        lin = _lin(s, e, index.device)
        cs = _cs(index, lin)
        v, ok = _read_index(index, lin, cs, n, "take", 0, wrap=True)
        if self.dim():
            soff = _offs(self, coords(v, list(self.shape)), base=_self_base())
            if FAULT == "neg_nowrap":  # a negative linear index walks backwards from the start
                soff = torch.where(v < 0, self.storage_offset() + v, soff)
        else:
            soff = torch.full_like(v, self.storage_offset() if _self_base() else 0) + \
                (v if FAULT == "neg_nowrap" else 0)
        ooff = out.storage_offset() + lin if FAULT == "out_strides" else _offs(out, cs)
        if ok is not None:
            soff, ooff = soff[ok], ooff[ok]
        write(out, ooff, read(self, soff))
        raise_early()
    return out


def _scar(self, index, out):
    """after_neg / after_neg_crash: a call that wrapped a negative index leaves state behind (a
    cache of the negative path's offsets, say) that a later float16 call of this process trips
    on: a wrong first element, or an abort. Alone, every call is right."""
    global SCARRED
    if FAULT not in ("after_neg", "after_neg_crash"):
        return out
    if SCARRED and out.dtype == torch.float16 and out.numel():
        if FAULT == "after_neg_crash":
            import os

            os.abort()
        out.view(-1)[:1] += 1  # a view of out: the caller's memory
    if index.numel() and bool((index < 0).any()):
        SCARRED = True
    return out


def take(self, index):
    out = torch.zeros(index.shape, dtype=self.dtype, device=self.device)
    return _scar(self, index, _take_into(self, index, out))


def take_out(self, index, *, out):
    _no_overlap(out)
    if list(out.shape) != list(index.shape):
        out.resize_(index.shape)
    return _take_into(self, index, out)


# ---------------------------------------------------------------------------------------------
# index_add


def _index_add_into(target, dim, index, source, alpha):
    """target.index_add_(dim, index, source, alpha): every source position, at its coordinates
    with `dim` replaced by index[its coordinate along dim], accumulated into target."""
    _check_index(index, "index_add")
    if index.dim() > 1:
        raise IndexError("index_add_(): Index is supposed to be a vector (planted backend)")
    dim = dim % max(target.dim(), 1)
    n = target.size(dim) if target.dim() else 1
    istride = index.stride(0) if index.dim() else 1
    for s, e in _iter(source.numel()):
        lin = _lin(s, e, source.device)
        cs = _cs(source, lin)
        pos = cs[dim] if source.dim() else torch.zeros_like(lin)
        ioff = index.storage_offset() + (pos if FAULT == "flat_index" else pos * istride)
        v, ok = _bad(read(index, _int32_shift(index, ioff)).to(torch.int64), n, "index_add", dim)
        cs_t = list(cs)
        cs_t[dim] = v
        roff = _offs(source, cs)
        toff = _offs(target, cs_t, base=_self_base())
        if ok is not None:
            roff, toff = roff[ok], toff[ok]
        vals = read(source, roff)
        write(target, toff, vals if alpha == 1 else vals * alpha, accumulate=True)
        raise_early()
    return target


def index_add_(self, dim, index, source, *, alpha=1):
    _no_overlap(self, "self")
    return _index_add_into(self, dim, index, source, alpha)


def index_add(self, dim, index, source, *, alpha=1):
    out = torch.empty_like(self, memory_format=torch.contiguous_format)
    out.copy_(self)
    return _index_add_into(out, dim, index, source, alpha)


def index_add_out(self, dim, index, source, *, alpha=1, out):
    _no_overlap(out)
    if list(out.shape) != list(self.shape):
        out.resize_(self.shape)
    out.copy_(self)
    return _index_add_into(out, dim, index, source, alpha)
