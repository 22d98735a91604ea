"""stridewise: PyTorch indexing ops (gather, the scatter family, the index_* family,
embedding, advanced indexing, take and put) that are correct for every strided layout, never
copy an operand, and turn bad indices into catchable errors on CPU and CUDA.

Importing the package loads the native library, which registers ``torch.ops.stridewise.*``.
Nothing changes for ``torch.gather`` / ``torch.scatter*`` until you route them::

    import stridewise
    with stridewise.use(include=["gather"]):   # torch.gather / Tensor.gather / out= ...
        y = torch.gather(x, 1, idx)            # ... run stridewise kernels here
    stridewise.stats()["gather"]["calls"]

Supported ops (names for enable/use/stats): "gather", "scatter" (scatter with src or value,
optionally reduce="add"/"multiply"; in-place and out= forms), "scatter_add" and
"scatter_reduce" (sum/prod/mean/amax/amin, include_self); the dim-indexed ops, run as gather and
scatter over views: "index_select", "index_add", "index_copy", "index_reduce"
(prod/mean/amax/amin, include_self), "embedding" and "embedding_dense_backward"; advanced
indexing on k index tensors: "index" (x[i], x[:, i], x[i, j], x[mask]), "index_put" (x[i] = v,
x[i] += v, index_put / index_put_ / _index_put_impl_, the backward of x[i]), "take" and "put"
(put_ / put, accumulate), and "index_fill" (index_fill / index_fill_ with a Scalar or a 0-dim
tensor value, negative indices wrapped).

All op logic is native; this module only forwards. See docs/python_api.md.
"""
from __future__ import annotations

import contextlib
import json
import os
import warnings
from typing import Iterable, Iterator, List, Optional, Union

import torch

from . import _compile, _native
from ._native import NativeLibraryError, build_info, cmake_prefix_path, library_path

_native.load()
_ops = torch.ops.stridewise
_compile.keep_functional_ops_off_out_lowering()

__version__ = build_info().get("stridewise_version", "0.0.0")

__all__ = [
    "NativeLibraryError",
    "build_info",
    "cmake_prefix_path",
    "check_errors",
    "disable",
    "enable",
    "enabled",
    "gather",
    "get_cuda_check_mode",
    "library_path",
    "reset_stats",
    "set_cuda_check_mode",
    "stats",
    "supported_ops",
    "use",
]

Names = Optional[Union[str, Iterable[str]]]


def _names(ops: Names) -> List[str]:
    if ops is None:
        return []
    if isinstance(ops, str):
        return [ops]
    return [str(o) for o in ops]


def supported_ops() -> List[str]:
    """Ops stridewise implements (and enable() accepts):
    ['gather', 'scatter', 'scatter_add', 'scatter_reduce', 'index_select', 'index_add',
    'index_copy', 'index_reduce', 'embedding', 'embedding_dense_backward', 'index', 'index_put',
    'take', 'put', 'index_fill'] (the op table's order: core/include/stridewise/ops.def)."""
    return list(_ops._supported())


def enable(include: Names = None, exclude: Names = None) -> List[str]:
    """Routes the aten:: forms of the selected ops (torch.gather, Tensor.gather, out=, ...;
    torch.scatter / Tensor.scatter_ / scatter_add / scatter_reduce, with their in-place and out=
    forms; x[i], x[i] = v, x[i] += v, torch.take, Tensor.put_, Tensor.index_fill_ and the
    backward of x[i]) on CPU
    and CUDA to stridewise. ``include`` None/empty means every supported op;
    ``exclude`` removes ops. Replaces any previous selection. Returns the ops now enabled.
    Unknown names raise ValueError. Autograd keeps ATen's formulas.

    torch.compile: graphs Inductor compiles while an op is routed call that op's aten:: kernels
    through the dispatcher (so stridewise runs them while routed); graphs compiled before keep
    Inductor's own code until recompiled. See _compile.py and docs/python_api.md."""
    now = list(_ops._enable(_names(include), _names(exclude)))
    _compile.sync()
    return now


def disable() -> None:
    """Restores ATen's native kernels for every op enable() routed (idempotent)."""
    _ops._disable()
    _compile.sync()


def enabled() -> List[str]:
    """Ops currently routed to stridewise ([] when disabled)."""
    return list(_ops._enabled())


@contextlib.contextmanager
def use(include: Names = None, exclude: Names = None) -> Iterator[List[str]]:
    """Context manager: enable(include, exclude) inside, then restore exactly the routing that
    was in effect before (nestable; restores on exceptions too). Yields the enabled ops."""
    previous = enabled()
    now = enable(include, exclude)
    try:
        yield now
    finally:
        if previous:
            enable(previous)
        else:
            disable()


def stats() -> dict:
    """Per-op counters: {op: {'calls': n, 'cpu': n, 'cuda': n, 'noncontig_index': n,
    'noncontig_self': n, 'noncontig_out': n, 'expanded_index': n, 'copies': 0,
    'vectorized': n, 'int64_offsets': n, 'errors': n, 'noncontig_src': n, 'expanded_src': n,
    'deterministic': n, 'fallback': n, 'fallback_reasons': {rule: n}}} for op in
    supported_ops(). Counts torch.ops.stridewise calls and routed aten:: calls alike. 'copies'
    is always 0: stridewise never copies an operand (one exception: index_put on CUDA with a CPU
    0-dim value, moved over as ATen moves it). 'fallback' counts calls handed to ATen's own
    kernel (ATen's result or error: a dtype ATen refuses, e.g. uint16 scatter_add or bool mean;
    an index on another device; more than 4 index tensors ...); 'fallback_reasons' splits that
    total by rule name (only rules that fired), e.g. {'dtype_rejected': 2}. docs/fallbacks.md
    lists the rules per op, which of them ATen forces, and how often each fired in PyTorch's
    own test files."""
    return json.loads(_ops._stats())


def reset_stats() -> None:
    _ops._reset_stats()


def set_cuda_check_mode(mode: str) -> None:
    """'deferred' (default): no host sync; a bad index found by a CUDA kernel is raised by the
    next stridewise CUDA call or by check_errors(). 'sync': every CUDA call synchronizes its
    stream and raises its own error (costs one host sync per call)."""
    _ops._set_cuda_check_mode(str(mode))


def get_cuda_check_mode() -> str:
    return str(_ops._cuda_check_mode())


def check_errors(sync: bool = True) -> None:
    """Raises a pending CUDA index error now (RuntimeError). With sync=True, waits for every
    device torch has used first, so all kernels launched so far are covered. No-op on CPU."""
    _ops._check_errors(bool(sync))


def gather(input: torch.Tensor, dim: int, index: torch.Tensor, *, sparse_grad: bool = False,
           out: Optional[torch.Tensor] = None) -> torch.Tensor:
    """torch.gather computed by stridewise, whether or not routing is enabled."""
    if out is None:
        return _ops.gather(input, dim, index, sparse_grad=sparse_grad)
    return _ops.gather.out(input, dim, index, sparse_grad=sparse_grad, out=out)


def _initial_check_mode() -> None:
    mode = os.environ.get("STRIDEWISE_CUDA_CHECK")
    if not mode:
        return
    try:
        set_cuda_check_mode(mode.strip().lower())
    except (ValueError, RuntimeError):
        warnings.warn(f"STRIDEWISE_CUDA_CHECK={mode!r} is neither 'deferred' nor 'sync'; "
                      f"keeping {get_cuda_check_mode()!r}", RuntimeWarning, stacklevel=2)


_initial_check_mode()
