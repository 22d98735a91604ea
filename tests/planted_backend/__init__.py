"""A deliberately broken indexing backend, to prove the auditor catches real kernel bugs.

``enable(kind)`` registers, through ``torch.library`` on the CPU and CUDA dispatch keys,
kernels for aten::gather (+ .out), aten::scatter_add (+ scatter_add_, .out),
aten::index_select (+ .out) and aten::take (+ .out); aten::index_add (+ index_add_, .out) when
named in ``ops``. They behave like a real strided kernel
(they compute element offsets and read/write the operands' raw memory), are correct except
for exactly one planted fault, and misbehave the way a real kernel would:

  flat_index      the index is read as contiguous memory from its data pointer (the FlagGems
                  gather bug): an expanded index is read past its storage
  offset_ignored  self's storage offset is ignored (offsets start at the storage base)
  out_strides     out= is written as if contiguous (its strides are ignored)
  neg_nowrap      negative indices are not wrapped (take): memory before self is read
  skip_oob        out-of-range indices are silently skipped (no error)
  early_write     out-of-range indices are raised only after the valid positions were written:
                  the error is ATen's, but an in-place self / out= is left half-updated (a
                  kernel that validates while it writes; the contract says nothing is written)
  deferred        out-of-range indices are skipped and reported later, like stridewise's
                  deferred CUDA check mode: by the next call of a planted kernel, or by
                  check_errors() (the audit's --flush 'tests/planted_backend:check_errors')
  overflow32      element offsets are computed in 32 bits (wrap above 2**31 elements)
  truncate32      index values are cast to int32 before the bounds check and the truncated
                  value is used (2**32+1 becomes 1: accepted, reads row 1)
  rank_limit      only the first 5 dims are walked: coordinates of dims >= 5 are ignored
  writes_input    functional scatter_add updates (and returns) its input instead of a copy
  out_ignored     gather.out computes into a fresh tensor and returns it; out is not written
  lossy_accum     scatter_add rounds floating src values to bfloat16 before accumulating
  int32_next      an int32 index is read one element on (int64 indices are right): the
                  int32 instantiation of a kernel with its offset arithmetic wrong
  int32_contig    the same for a contiguous int32 index only (a fast path's instantiation)
  after_neg       take is right alone; after a call of the same process wrapped a negative
                  index, every float16 take gets a wrong first element (state left behind by
                  an earlier case: alone, no case fails)
  after_neg_crash the same, but the float16 take aborts the process
  none            no fault (a correct Python kernel: the auditor must pass it)

``enable(kind, ops, noise)`` with noise a dtype name ('complex128') also raises
``KeyError(noise)`` whenever an operand has that dtype: spurious errors of one message on many
cases, the noise a real backend's report buries its faults in.

Usage: ``python3 -m stridewise audit --backend 'tests/planted_backend:enable(flat_index)'``.
``disable()`` restores the native kernels. Raw memory is reached through numpy (CPU) and
``__cuda_array_interface__`` (CUDA); indexing into that raw memory uses aten::index /
aten::index_put_, which this backend never overrides.
"""
from __future__ import annotations

import warnings

import torch

from . import _engine as E

KINDS = ("flat_index", "offset_ignored", "out_strides", "neg_nowrap", "skip_oob", "early_write", "deferred",
         "overflow32", "truncate32", "rank_limit", "writes_input", "out_ignored", "lossy_accum", "int32_next",
         "int32_contig", "after_neg", "after_neg_crash",
         "none")
OPS = ("gather", "scatter_add", "index_select", "take")  # the default; index_add when named
_lib = None
_kind = None


def enable(kind: str = "flat_index", ops=None, noise=None):
    """Register the planted kernels with fault ``kind`` (replacing any previous ones); with
    ``noise`` (a dtype name) they also raise KeyError(noise) on operands of that dtype."""
    global _lib, _kind
    if kind not in KINDS:
        raise ValueError(f"unknown planted fault {kind!r}; known: {', '.join(KINDS)}")
    disable()
    E.PENDING = None
    E.EARLY = None
    E.SCARRED = False
    ops = tuple(ops or OPS) if not isinstance(ops, str) else (ops,)
    E.FAULT = kind
    lib = torch.library.Library("aten", "IMPL")
    table = {
        "gather": [("gather", E.gather), ("gather.out", E.gather_out)],
        "scatter_add": [("scatter_add", E.scatter_add), ("scatter_add_", E.scatter_add_),
                        ("scatter_add.out", E.scatter_add_out)],
        "index_select": [("index_select", E.index_select), ("index_select.out", E.index_select_out)],
        "index_add": [("index_add", E.index_add), ("index_add_", E.index_add_), ("index_add.out", E.index_add_out)],
        "take": [("take", E.take), ("take.out", E.take_out)],
    }
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for op in ops:
            for name, fn in table[op]:
                for key in ("CPU", "CUDA"):
                    f = _reporting_pending(fn) if kind == "deferred" else fn
                    lib.impl(name, _noisy(f, noise) if noise else f, key)
    _lib, _kind = lib, kind
    return {"kind": kind, "ops": list(ops), "noise": noise}


def _noisy(fn, dtype_name: str):
    def call(*args, **kwargs):
        for a in (*args, *kwargs.values()):
            if isinstance(a, torch.Tensor) and str(a.dtype) == f"torch.{dtype_name}":
                raise KeyError(dtype_name)
        return fn(*args, **kwargs)

    return call


def _reporting_pending(fn):
    def call(*args, **kwargs):
        E.raise_pending()  # an error a previous call deferred surfaces here
        return fn(*args, **kwargs)

    return call


def check_errors():
    """Raise the bad index a previous call deferred (kind 'deferred'), if any."""
    E.raise_pending()


def disable():
    global _lib, _kind
    if _lib is not None:
        _lib._destroy() if hasattr(_lib, "_destroy") else None
    _lib, _kind = None, None


def current():
    return _kind
