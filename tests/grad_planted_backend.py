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

``enable("dense_dup")`` / ``enable("dense_ok")`` register instead, for the ``CPU`` and ``CUDA``
keys, only aten::embedding_dense_backward (a backward-only kernel, as FlagGems registers
embedding_backward): every forward variant stays native's, so coverage that counts forward
kernels alone would skip every embedding case.

  dense_dup        rows are written with index_put_ without accumulate: where an index repeats,
                   all but one of its gradient terms are dropped
  dense_ok         the same kernel, accumulating: a correct backward-only kernel

Forward audits pass with every kind (the forward is native's); only ``--grad`` sees the fault.
Usage: ``python3 -m stridewise audit --grad --ops gather --backend 'tests/grad_planted_backend.py:enable(overwrite)'``.
"""
from __future__ import annotations

import warnings

import torch

KINDS = ("overwrite", "upstream_contig", "none", "dense_dup", "dense_ok")
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


def _dense_backward(grad, indices, num_weights, padding_idx, scale_grad_by_freq):
    """aten::embedding_dense_backward: the rows of ``grad`` summed into the rows ``indices``
    name (none into ``padding_idx``; each divided by its index's count with
    ``scale_grad_by_freq``). ``dense_dup`` writes instead of summing."""
    idx = indices.reshape(-1)
    g = grad.reshape(idx.numel(), grad.shape[-1])
    if scale_grad_by_freq:
        counts = torch.bincount(idx, minlength=num_weights).to(g.dtype)
        g = g / counts[idx].unsqueeze(1)
    keep = idx != padding_idx
    out = grad.new_zeros(num_weights, grad.shape[-1])
    return out.index_put_((idx[keep],), g[keep], accumulate=FAULT != "dense_dup")


def enable(kind: str = "overwrite"):
    global _lib, FAULT
    if kind not in KINDS:
        raise ValueError(f"unknown planted backward fault {kind!r}; known: {', '.join(KINDS)}")
    FAULT = kind
    lib = torch.library.Library("aten", "IMPL")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        if kind.startswith("dense_"):
            for key in ("CPU", "CUDA"):
                lib.impl("embedding_dense_backward", _dense_backward, key)
        else:
            lib.impl("gather", _gather, "AutogradCPU")
    _lib = lib
    return {"planted_backward": kind}


def disable():
    global _lib
    _lib = None
