"""A CPU backend whose in-place scatter_add_ writes one byte past its target's view (past its
storage where the view ends there, as the auditor's storages usually do): the
poisoned-margin check (audit --margin; the default on a device without guard pages) must find
it. Only ever run with --margin: without a margin the byte lands in the allocator's heap.

Usage: ``python3 -m stridewise audit --margin --backend tests/margin_backend.py:enable``.
"""
from __future__ import annotations

import ctypes

import torch

_lib = None


def _past_the_end(self, dim, index, src):
    # the functional op is not overridden: it computes the right values
    self.copy_(torch.scatter_add(self, dim, index, src))
    if self.numel():  # the planted fault: one byte just past the view's last element
        last = sum((n - 1) * s for n, s in zip(self.shape, self.stride()))
        ctypes.memset(self.data_ptr() + (last + 1) * self.element_size(), 0x11, 1)
    return self


def enable():
    global _lib
    if _lib is None:
        _lib = torch.library.Library("aten", "IMPL")
        _lib.impl("scatter_add_", _past_the_end, "CPU")
    return {"name": "margin_backend", "fault": "scatter_add_ writes one byte past the view"}
