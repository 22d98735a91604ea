"""Guard-page storages: each tensor's storage ends exactly where inaccessible memory begins,
so a kernel that reads or writes one element past the storage faults at once, in the case that
did it (instead of returning garbage or crashing far away).

Self-contained on purpose (only ctypes, mmap, torch): repro scripts inline this file.

CPU:  mmap an anonymous region [guard page | body | guard page], mprotect both guard pages
      PROT_NONE, place the storage so it ends at the back guard page and wrap it with
      ``torch.frombuffer`` (works on every torch >= 1.10). The slack in front of the storage is
      filled with 0xA5 bytes, so a read before the start sees poison (huge negative indices).
CUDA: the driver's virtual-memory API through ctypes on libcuda: reserve
      [granule | body | granule] of address space, cuMemCreate + cuMemMap only the body,
      cuMemSetAccess, place the storage at the end of the body and hand it to torch through
      ``__cuda_array_interface__`` (``torch.as_tensor``); the owner object unmaps on release.
      A read past the end hits reserved-but-unmapped address space: an illegal-address fault.
Other devices get no guard pages (guard_support says why); MarginAlloc is their fallback, the
poisoned-margin check, made of the device's own allocations and copies only.
"""
from __future__ import annotations

import ctypes
import mmap

import torch

POISON = 0xA5


def _round_up(n: int, m: int) -> int:
    return (n + m - 1) // m * m


class CpuGuard:
    def __init__(self):
        self.page = mmap.PAGESIZE
        libc = ctypes.CDLL(None, use_errno=True)
        libc.mprotect.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
        libc.mprotect.restype = ctypes.c_int
        self._mprotect = libc.mprotect

    def empty(self, n: int, dtype: torch.dtype, device=None) -> torch.Tensor:
        isz = torch.empty((), dtype=dtype).element_size()
        nbytes = n * isz
        if nbytes == 0:
            return torch.empty(0, dtype=dtype)
        page = self.page
        body = _round_up(nbytes, page)
        total = page + body + page
        m = mmap.mmap(-1, total, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS,
                      prot=mmap.PROT_READ | mmap.PROT_WRITE)
        anchor = ctypes.c_char.from_buffer(m)
        base = ctypes.addressof(anchor)
        del anchor  # release the buffer export (the tensor below holds its own)
        for addr in (base, base + page + body):
            if self._mprotect(addr, page, 0) != 0:  # PROT_NONE
                raise OSError(ctypes.get_errno(), "mprotect(PROT_NONE) failed for a guard page")
        start = page + body - nbytes
        if start > page:
            m[page:start] = bytes([POISON]) * (start - page)
        t = torch.frombuffer(m, dtype=torch.uint8, count=nbytes, offset=start)
        return t.view(dtype)


# ---------------------------------------------------------------------------------------------
# CUDA (driver VMM API)


class _Loc(ctypes.Structure):
    _fields_ = [("type", ctypes.c_int), ("id", ctypes.c_int)]


class _AllocFlags(ctypes.Structure):
    _fields_ = [("compressionType", ctypes.c_ubyte), ("gpuDirectRDMACapable", ctypes.c_ubyte),
                ("usage", ctypes.c_ushort), ("reserved", ctypes.c_ubyte * 4)]


class _Prop(ctypes.Structure):  # CUmemAllocationProp
    _fields_ = [("type", ctypes.c_int), ("requestedHandleTypes", ctypes.c_int),
                ("location", _Loc), ("win32HandleMetaData", ctypes.c_void_p),
                ("allocFlags", _AllocFlags)]


class _Access(ctypes.Structure):  # CUmemAccessDesc
    _fields_ = [("location", _Loc), ("flags", ctypes.c_int)]


_CU_MEM_ALLOCATION_TYPE_PINNED = 1
_CU_MEM_LOCATION_TYPE_DEVICE = 1
_CU_MEM_ACCESS_FLAGS_PROT_READWRITE = 3


class _VmmBlock:
    """Owns one reserved+mapped range; torch keeps it alive through __cuda_array_interface__."""

    def __init__(self, g: "CudaGuard", nbytes: int):
        self.g, cu = g, g.cu
        gran = g.gran
        self.body = _round_up(max(nbytes, 1), gran)
        self.total = gran + self.body + gran
        va = ctypes.c_uint64()
        g.check(cu.cuMemAddressReserve(ctypes.byref(va), ctypes.c_size_t(self.total),
                                       ctypes.c_size_t(gran), ctypes.c_uint64(0),
                                       ctypes.c_ulonglong(0)), "cuMemAddressReserve")
        self.va = va.value
        h = ctypes.c_ulonglong()
        self.h = None
        self.mapped = False
        try:
            g.check(cu.cuMemCreate(ctypes.byref(h), ctypes.c_size_t(self.body), ctypes.byref(g.prop),
                                   ctypes.c_ulonglong(0)), "cuMemCreate")
            self.h = h.value
            self.body_ptr = self.va + gran
            g.check(cu.cuMemMap(ctypes.c_uint64(self.body_ptr), ctypes.c_size_t(self.body),
                                ctypes.c_size_t(0), ctypes.c_ulonglong(self.h), ctypes.c_ulonglong(0)),
                    "cuMemMap")
            self.mapped = True
            acc = _Access(g.prop.location, _CU_MEM_ACCESS_FLAGS_PROT_READWRITE)
            g.check(cu.cuMemSetAccess(ctypes.c_uint64(self.body_ptr), ctypes.c_size_t(self.body),
                                      ctypes.byref(acc), ctypes.c_size_t(1)), "cuMemSetAccess")
        except Exception:
            self._free()
            raise
        self.start = self.body_ptr + self.body - nbytes
        self.nbytes = nbytes

    @property
    def __cuda_array_interface__(self):
        return {"shape": (self.nbytes,), "typestr": "|u1", "data": (self.start, False),
                "version": 2, "strides": None}

    def _free(self):
        cu = self.g.cu
        if self.mapped:
            cu.cuMemUnmap(ctypes.c_uint64(self.body_ptr), ctypes.c_size_t(self.body))
            self.mapped = False
        if self.h is not None:
            cu.cuMemRelease(ctypes.c_ulonglong(self.h))
            self.h = None
        if self.va:
            cu.cuMemAddressFree(ctypes.c_uint64(self.va), ctypes.c_size_t(self.total))
            self.va = 0

    def __del__(self):
        try:
            torch.cuda.synchronize()
        except Exception:
            pass
        try:
            self._free()
        except Exception:
            pass


class _Borrowed:
    """A non-owning window (for poisoning the slack in front of a storage)."""

    def __init__(self, ptr: int, nbytes: int):
        self.__cuda_array_interface__ = {"shape": (nbytes,), "typestr": "|u1",
                                         "data": (ptr, False), "version": 2, "strides": None}


class CudaGuard:
    def __init__(self, device):
        device = torch.device(device)
        torch.cuda.init()
        self.index = device.index if device.index is not None else torch.cuda.current_device()
        torch.cuda.set_device(self.index)
        torch.empty(1, device=device)  # make the primary context current in this thread
        self.cu = ctypes.CDLL("libcuda.so.1")
        self.prop = _Prop()
        self.prop.type = _CU_MEM_ALLOCATION_TYPE_PINNED
        self.prop.location = _Loc(_CU_MEM_LOCATION_TYPE_DEVICE, self.index)
        gran = ctypes.c_size_t()
        self.check(self.cu.cuMemGetAllocationGranularity(ctypes.byref(gran), ctypes.byref(self.prop),
                                                         ctypes.c_int(0)),
                   "cuMemGetAllocationGranularity")
        self.gran = gran.value
        self.device = device

    def check(self, rc: int, what: str):
        if rc != 0:
            name = ctypes.c_char_p()
            try:
                self.cu.cuGetErrorName(ctypes.c_int(rc), ctypes.byref(name))
            except Exception:
                pass
            raise RuntimeError(f"{what} failed: CUresult {rc} "
                               f"({name.value.decode() if name.value else 'unknown'})")

    def empty(self, n: int, dtype: torch.dtype, device=None) -> torch.Tensor:
        isz = torch.empty((), dtype=dtype).element_size()
        nbytes = n * isz
        if nbytes == 0:
            return torch.empty(0, dtype=dtype, device=self.device)
        blk = _VmmBlock(self, nbytes)
        slack = blk.start - blk.body_ptr
        if slack:
            torch.as_tensor(_Borrowed(blk.body_ptr, slack), device=self.device).fill_(POISON)
        t = torch.as_tensor(blk, device=self.device)
        return t.view(dtype)


class MarginAlloc:
    """The poisoned-margin check, for a device that gives no guarded memory: each storage is the
    front of one larger allocation of the device's own (``torch.empty`` + a copy: its allocator
    and ops, nothing assumed about its memory), followed by a margin of POISON bytes: the
    larger of ``POST_MIN`` bytes and the view's own size (a kernel that reads a strided view as
    if it were dense reads at most that far past the storage). A write past the storage lands
    in the margin and is found by comparing it afterwards (``split``); a read there returns
    poison (0xA5.. is a huge negative index and a large float), so it shows as an error or
    wrong values instead of silently reading a neighbour. It cannot stop a kernel that runs
    farther than the margin; guard pages can. No margin in front (``PRE`` = 0): it would shift
    every view's storage offset, so a kernel that ignores storage offsets would fail every case
    instead of the offset ones, and its diagnosis would be lost (seen on the test device);
    writes before a storage's start are the guard pages' to find."""
    PRE = 0
    POST_MIN = 256

    def __init__(self):
        self.spans: dict = {}  # storage data_ptr -> (pre, body, post) bytes

    def empty(self, n: int, dtype: torch.dtype, device=None, reach: int = 0) -> torch.Tensor:
        """``n`` elements at a storage offset inside a poisoned allocation on ``device``;
        ``reach``: the view's element count (sizes the back margin)."""
        isz = torch.empty((), dtype=dtype).element_size()
        pre = -(-self.PRE // isz)  # 0: see the class's docstring
        post = max(-(-self.POST_MIN // isz), reach)
        # poisoned as bytes: a copy in ``dtype`` may normalise the bytes (bool: 0xA5 -> 0x01)
        raw = torch.empty((pre + n + post) * isz, dtype=torch.uint8, device=device)
        raw.copy_(torch.full(raw.shape, POISON, dtype=torch.uint8))
        self.spans[raw.untyped_storage().data_ptr()] = (pre * isz, n * isz, post * isz)
        return raw.view(dtype).as_strided((n,), (1,), pre)

    def split(self, t: torch.Tensor, raw: bytes):
        """(the storage's own bytes, margin bytes no longer POISON) of ``t``'s whole allocation
        ``raw``; the margin count is None when the storage is not one of ours any more (the
        call replaced or resized it: then ``raw`` is all there is)."""
        span = self.spans.get(t.untyped_storage().data_ptr())
        if span is None or sum(span) != len(raw):
            return raw, None
        pre, body, _ = span
        margins = raw[:pre] + raw[pre + body:]
        return raw[pre:pre + body], len(margins) - margins.count(POISON)


GUARDED = ("cpu", "cuda")


def guard_support(device) -> tuple:
    """(True, "") when ``allocator`` can give ``device`` guard pages, else (False, the reason)."""
    kind = torch.device(device).type
    if kind in GUARDED:
        return True, ""
    return False, (f"{kind!r} gives no guarded memory to the auditor: guard pages need control "
                   f"of the device's virtual memory, which the auditor has for "
                   f"{' and '.join(GUARDED)} only (mmap/mprotect; the CUDA driver's VMM API)")


def allocator(device):
    """A guard allocator for ``device`` (cpu or cuda); other devices raise with the reason."""
    device = torch.device(device)
    if device.type == "cpu":
        return CpuGuard()
    if device.type == "cuda":
        return CudaGuard(device)
    raise RuntimeError(f"--guard: {guard_support(device)[1]}; run without --guard (the "
                       "poisoned-margin check runs instead)")
