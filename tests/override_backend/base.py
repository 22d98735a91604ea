"""Imported for its side effect: registers a Python CPU kernel for aten::gather (the planted
backend's correct one), standing in for a library that overrode the op from Python before the
backend under audit is enabled (``--import override_backend.base``). Kept alive for the process."""
from __future__ import annotations

import torch

from . import E

E.FAULT = "none"
LIB = torch.library.Library("aten", "IMPL")
LIB.impl("gather", E.gather, "CPU")
