"""The gather layout specs: valid inputs of a given layout, the reference, the comparison.

They drive the pytest matrix (``tests/test_gather_*.py`` and the other tests that import this
package as ``specs``), the auditor and the benchmark shape sets; they live beside the auditor's
per-op specs (``stridewise.audit.specs``) but are not entries of its ``SPECS`` registry. Nothing
here imports pytest or calls the native library directly (``stridewise`` is used only when it is
already imported, to switch routing off for the reference and to read ``stats()``); note that
importing any ``stridewise.*`` module runs the package's ``__init__``, which loads the native
library (tests/conftest.py falls back to a namespace stand-in when that fails, so the harness
tests still run).

Modules (each name below is re-exported here, the one place tests import from):
  routing.py  ``native()``, stats, the sanitizer in use
  values.py   dtypes, random values, poison, bitwise comparison
  cases.py    ``GatherCase``, ``build_inputs``, the case sets
  check.py    ``RUNNERS``, the reference, ``check_gather``, error parity, the backward check

gather
------
``GatherCase`` says what to build: shapes, dim (may be negative), dtypes, the layout kind
of each operand (any kind ``layouts.make_layout_ex`` accepts; ``out_layout=None`` means the
functional form) and how index values are drawn. ``build_inputs(case, device)`` turns it
into tensors; the same case and seed give the same views and the same values on every
device, so a CUDA result can be compared with the CPU one.

Data is fresh random data, never zeros: integers are drawn away from 0 and +-1, floats are
random finite values with a sprinkle of specials (-0.0, +-inf, NaNs with varied payloads,
subnormals) because gather is data movement and must move bits exactly. ``out=`` tensors
and their whole storage are poisoned with 0xFF bytes (a NaN for every float type, -1 or
the maximum for integers, an invalid byte for bool), a value no input ever holds.

The reference is native ``torch.gather`` on the same device with stridewise routing off
(``native()``), run on an integer view of ``self`` of the same element size
(``bits_view``): ATen's CPU gather moves float16/bfloat16 values through float and changes
NaN payloads (0x7C01 -> 0x7E01, bf16 sNaN -> 0xFFFF or 0x7FC0), so only the integer view
gives a bit-exact reference. Native gather in the op's own dtype must agree too, up to NaN
payloads (``reference_in_dtype``, ``nan_tolerant_mismatch``). The comparison is bitwise:
raw bytes of contiguous copies (``bitwise_mismatch``), so NaN payloads and -0.0 count.

``check_gather(case, runner, device)`` runs one case through one entry point (``RUNNERS``:
the stridewise op, its out= overload, aten routing, the Tensor method, take_along_dim) and
returns a list of problems, empty when everything holds:
  result bitwise equal to native; same shape, dtype, strides as native; on CUDA also equal
  to the CPU result; inputs' storages untouched; for out=: written in place (same storage,
  same data_ptr), storage bytes outside the view untouched and the whole storage equal to
  what native gather.out leaves; the stridewise stats moved as documented (calls +1, cpu or
  cuda +1, noncontig_* +1 exactly when that operand is not contiguous, copies +0).
Because it returns problems instead of asserting, the harness itself can be tested
(``tests/test_gather_planted.py`` feeds it deliberately broken kernels).
"""
from __future__ import annotations

from .cases import (
    RANKS, SEED_REPRO, GatherCase, all_cases, build_inputs, case_seed, describe_inputs,
    dtype_cases, edge_cases, large_cases, layout_cross_cases, rank_cases, rank_shapes,
    seed_matrix)
from .check import (
    NONCONTIG_COUNTERS, RUNNERS, Runner, _stats_problems, bits_view, capture, check_error_parity,
    check_gather, check_gather_backward, first_line, nan_tolerant_mismatch, native_runner,
    reference, reference_in_dtype, view_mask)
from .routing import _enabled_ops, native, sanitizer, stats_snapshot
from .values import (
    CORE_DTYPES, INDEX_DTYPES, OPTIONAL_DTYPES, POISON_BYTE, _unravel, bitwise_mismatch,
    dtype_name, native_supports, poison, random_index, random_values, raw_bytes, storage_bytes)

# the underscored names are re-exported too: tests check those internals directly
__all__ = [
    "RANKS", "SEED_REPRO", "GatherCase", "all_cases", "build_inputs", "case_seed",
    "describe_inputs", "dtype_cases", "edge_cases", "large_cases", "layout_cross_cases",
    "rank_cases", "rank_shapes", "seed_matrix",
    "NONCONTIG_COUNTERS", "RUNNERS", "Runner", "_stats_problems", "bits_view", "capture",
    "check_error_parity", "check_gather", "check_gather_backward", "first_line",
    "nan_tolerant_mismatch", "native_runner", "reference", "reference_in_dtype", "view_mask",
    "_enabled_ops", "native", "sanitizer", "stats_snapshot",
    "CORE_DTYPES", "INDEX_DTYPES", "OPTIONAL_DTYPES", "POISON_BYTE", "_unravel",
    "bitwise_mismatch", "dtype_name", "native_supports", "poison", "random_index",
    "random_values", "raw_bytes", "storage_bytes",
]
