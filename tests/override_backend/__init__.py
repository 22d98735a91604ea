"""A backend whose enable() overrides a kernel that was registered from Python before it.

This is what a real backend meets when another library (or torch itself: torch >= 2.12
registers Python overrides of some aten ops at import) already registered a Python kernel for
an op it implements. ``override_backend.base`` (imported by the audit's ``--import``, before
the dispatcher snapshot) registers a Python CPU kernel for aten::gather; ``enable()`` then
registers its own with a plain ``Library.impl`` (no ``allow_override``), as most backends do:

- torch 2.13 (``allow_override=True`` by default): the override takes; the audit's coverage must
  attribute gather to the backend (its kernel changed after the snapshot), not to native.
- torch 2.11 (``allow_override=False`` by default): torch refuses ("This is not allowed since
  there's already a kernel registered from python overriding gather's behavior for CPU
  dispatch key and aten namespace."); the audit must stop with an error naming the backend, the
  op and that reason (python/stridewise/audit/backends.py), never pass gather as native.

Both kernels are the planted backend's correct strided gather (fault ``none``), so a case that
runs either passes; ``calls()`` counts the backend's own calls.

Usage: ``python3 -m stridewise audit --ops gather --import override_backend.base
--backend tests/override_backend:enable`` (tests/ on sys.path, as under pytest).
"""
from __future__ import annotations

import os
import sys

import torch

_HERE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if _HERE not in sys.path:  # planted_backend lives beside this package (tests/)
    sys.path.insert(0, _HERE)

from planted_backend import _engine as E  # noqa: E402

_lib = None
_calls = [0]


def _gather(self, dim, index, sparse_grad=False):
    _calls[0] += 1
    E.FAULT = "none"
    return E.gather(self, dim, index, sparse_grad)


def enable():
    """Register the backend's aten::gather CPU kernel over whatever is there (plain impl)."""
    global _lib
    lib = torch.library.Library("aten", "IMPL")
    lib.impl("gather", _gather, "CPU")  # raises on torch 2.11 when base's kernel is there
    _lib = lib
    return {"ops": ["gather"]}


def calls() -> int:
    return _calls[0]
