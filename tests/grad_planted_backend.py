"""A backend whose gather is right forward and wrong backward: what ``audit --grad`` must find.

``enable(kind)`` registers, through ``torch.library`` for the ``AutogradCPU`` key, an
aten::gather whose forward is native's (below autograd) and whose backward is its own:

  overwrite        the gradient is scattered with ``scatter_`` instead of ``scatter_add_``:
                   where an element of self was gathered more than once (repeated indices),
                   all but one of its gradient terms are lost
  upstream_contig  the upstream gradient is read as contiguous memory from its storage (its
                   strides ignored; zeros past the storage's end): wrong gradients whenever the
                   upstream gradient is transposed, step-sliced or expanded
  none             a correct backward (scatter_add_ on the upstream gradient as it is)

Forward audits pass with every kind (the forward is native's); only ``--grad`` sees the fault.
Usage: ``python3 -m stridewise audit --grad --ops gather --backend 'tests/grad_planted_backend.py:enable(overwrite)'``.
"""
from __future__ import annotations

import warnings

import torch

KINDS = ("overwrite", "upstream_contig", "none")
_lib = None
FAULT = "none"


def _as_contiguous_memory(g: torch.Tensor) -> torch.Tensor:
    """``g``'s storage read from its storage offset as if ``g`` were contiguous (a kernel that
    ignores the strides); elements past the storage's end read as zeros."""
    n = g.untyped_storage().nbytes() // g.element_size()
    flat = g.as_strided((n,), (1,), 0)[g.storage_offset():]
    take = min(g.numel(), flat.numel())
    out = torch.zeros(g.numel(), dtype=g.dtype, device=g.device)
    out[:take] = flat[:take]
    return out.view(g.shape)


class _Gather(torch.autograd.Function):
    @staticmethod
    def forward(ctx, self, dim, index):
        with torch._C._AutoDispatchBelowAutograd():  # native's forward (not this kernel again)
            out = torch.ops.aten.gather.default(self, dim, index)
        ctx.save_for_backward(index)
        ctx.dim, ctx.shape = dim, self.shape
        return out

    @staticmethod
    def backward(ctx, g):
        (index,) = ctx.saved_tensors
        z = g.new_zeros(ctx.shape)
        if FAULT == "overwrite":
            return z.scatter_(ctx.dim, index, g), None, None
        if FAULT == "upstream_contig":
            g = _as_contiguous_memory(g)
        return z.scatter_add_(ctx.dim, index, g), None, None


def _gather(self, dim, index, sparse_grad=False):
    return _Gather.apply(self, dim, index)


def enable(kind: str = "overwrite"):
    global _lib, FAULT
    if kind not in KINDS:
        raise ValueError(f"unknown planted backward fault {kind!r}; known: {', '.join(KINDS)}")
    FAULT = kind
    lib = torch.library.Library("aten", "IMPL")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        lib.impl("gather", _gather, "AutogradCPU")
    _lib = lib
    return {"planted_backward": kind}


def disable():
    global _lib
    _lib = None
