"""Known upstream bugs of native PyTorch that the audit finds.

A failing case that matches a known issue is reported with status ``known`` (its own column,
its repro script still written) instead of failing the run. They apply when auditing ATen
itself (no --backend) unless --no-known; with a backend, --known applies them too.
Each entry is precise: the conditions under which ATen takes the faulty path.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable


@dataclass
class KnownIssue:
    name: str
    summary: str
    ops: tuple
    devices: tuple
    match: Callable  # (built) -> bool


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


KNOWN = [
    KnownIssue(
        "aten-cpu-expanded-index-scatter",
        "ATen CPU scatter_add/scatter_reduce fast path for an expanded (GNN-style) index writes "
        "src rows contiguously into self when self is larger than the index on a dim >= 1 "
        "(minimal repro: torch.zeros(2,64,4).scatter_add(0, torch.zeros(1,1,1,dtype=torch.long)"
        ".expand(1,64,3), torch.ones(1,64,3)) sets [0,0,3] and leaves [0,48:,:3] at 0)",
        ("scatter_add", "scatter_reduce", "scatter.reduce"), ("cpu",), _expanded_index_fastpath),
]


def match(op: str, device_type: str, built):
    for k in KNOWN:
        if op in k.ops and device_type in k.devices:
            try:
                if k.match(built):
                    return k
            except Exception:  # noqa: BLE001
                continue
    return None
