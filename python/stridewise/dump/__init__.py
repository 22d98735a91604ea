"""Precision tooling (issue 4): dump the inputs and outputs of ATen ops and compare dumps.

    import stridewise.dump
    with stridewise.dump("dumps/run_a", ops=["gather", "index_select"]):
        loss = model(x).sum()
        loss.backward()
    result = stridewise.dump.compare("dumps/run_a", "dumps/run_b")   # runs sw-compare

This module is callable (``stridewise.dump(dir, ...)`` is ``stridewise.dump.dump(dir, ...)``),
so the package can re-export either the module or the ``dump`` class.  Importing it needs neither
torch nor the native stridewise library: dumping needs torch, comparing needs the sw-compare
binary.  Dump layout, metrics and standards: docs/compare.md.
"""
import sys as _sys
import types as _types

from ._capture import FORMAT_VERSION, dump, resolve_rank
from .compare import CompareError, CompareResult, compare, find_compare_binary
from .reader import load_tensor, rank_dirs, read_index

# `stridewise.dump.compare(...)` also works when the package re-exports the class.
dump.compare = staticmethod(compare)
dump.read_index = staticmethod(read_index)
dump.load_tensor = staticmethod(load_tensor)

__all__ = ["dump", "compare", "CompareError", "CompareResult", "find_compare_binary", "read_index",
           "load_tensor", "rank_dirs", "resolve_rank", "FORMAT_VERSION"]


class _CallableModule(_types.ModuleType):
    def __call__(self, *args, **kwargs):
        return dump(*args, **kwargs)


_sys.modules[__name__].__class__ = _CallableModule
