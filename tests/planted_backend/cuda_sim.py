"""A simulated asynchronous device, on CPU, for the auditor's device-error paths (no GPU needed).

``--backend tests/planted_backend/cuda_sim.py:enable(MODE[,STATE_DIR])`` patches the *worker*
process (the parent computing the oracle never imports it) so that native CPU kernels answer an
out-of-range index the way ATen CUDA does: through a device error raised later, at some other
call, as ``torch.AcceleratorError`` with CUDA's wording. What is patched stands for the CUDA
runtime: ``worker.synchronize`` (cudaDeviceSynchronize), ``gen.materialize`` (the host-to-device
copies of a case's set-up) and ``worker.run_call`` (the kernels). A pending error is sticky, as
on a real context: every later device call raises it.

  sync            the op raises its ordinary error after "launching" a kernel that asserted
                  (like ATen CUDA scatter_reduce(include_self=False) with an unsupported dtype:
                  the init scatter asserts, then the dispatch raises): the assert is pending and
                  the next synchronize raises it
  late            as sync, but the case's own synchronize does not see it (a device whose
                  synchronize does not flush errors): it surfaces in the next case's set-up
  late_fault      as late, with "an illegal memory access was encountered" (a device fault)
  hang            the first attempt at such a case prints CUDA's assertion line and never returns
                  (stuck in synchronize); later attempts (STATE_DIR remembers, across workers)
                  raise the device-side assert at once
  hang_silent     as hang, without the assertion line (only --timeout ends it)
  assert_valid    a device-side assert on every case whose op succeeds (a kernel that asserts on
                  valid input): a crash, which the audit replays alone to confirm
  refuse_overlap  aten::index_put_ refuses a self whose elements overlap with ATen's
                  internal-overlap error, as ATen CUDA does with accumulate=True (native
                  otherwise); out-of-range indices stay ordinary errors
"""
from __future__ import annotations

import hashlib
import os
import re
import sys
import time

import torch

MODES = ("sync", "late", "late_fault", "hang", "hang_silent", "assert_valid", "refuse_overlap")
ASSERT = ("CUDA error: device-side assert triggered\nCUDA kernel errors might be asynchronously "
          "reported at some other API call, so the stacktrace below might be incorrect.")
FAULT = ("CUDA error: an illegal memory access was encountered\nCUDA kernel errors might be "
         "asynchronously reported at some other API call, so the stacktrace below might be incorrect.")
PRINTED = ("/pytorch/aten/src/ATen/native/cuda/Indexing.cu:1021: indexFuncSmallIndex: block: "
           "[0,0,0], thread: [0,0,0] Assertion `dstIndex < dstAddDimSize` failed.")
OVERLAP = ("unsupported operation: more than one element of the written-to tensor refers to a single "
           "memory location. Please clone() the tensor before performing the operation.")
_OOR = re.compile(r"out of (range|bounds)|out of DATA bounds", re.I)

MODE = None
STATE = None
_case = {"n": 0, "id": None}
_pending = None  # (message, case number that left it)
_lib = None


def _check():
    """Raise the pending device error where the device would report it."""
    if _pending is None:
        return
    msg, n = _pending
    if MODE in ("late", "late_fault") and n == _case["n"]:
        return  # not visible to the case that left it
    raise torch.AcceleratorError(msg)


def _first_attempt() -> bool:
    mark = os.path.join(STATE, hashlib.sha1(_case["id"].encode()).hexdigest())
    if os.path.exists(mark):
        return False
    open(mark, "w").close()
    return True


def enable(mode: str = "sync", state_dir: str | None = None):
    global MODE, STATE, _lib
    if mode not in MODES:
        raise ValueError(f"unknown mode {mode!r}; known: {', '.join(MODES)}")
    if mode.startswith("hang") and not state_dir:
        raise ValueError("hang modes need a STATE_DIR (first attempts are remembered there)")
    MODE, STATE = mode, state_dir
    from stridewise.audit import gen, worker

    if mode == "refuse_overlap":
        _lib = torch.library.Library("aten", "IMPL")

        def index_put_(self, indices, values, accumulate=False):
            if gen.internal_overlap(self):
                raise RuntimeError(OVERLAP)
            return torch.ops.aten._index_put_impl_(self, indices, values, accumulate, False)

        _lib.impl("index_put_", index_put_, "CPU")
        return {"mode": mode}

    execute, synchronize, materialize, run_call = (worker.execute, worker.synchronize,
                                                   gen.materialize, worker.run_call)

    def execute_(spec, case, *a, **k):
        _case["n"] += 1
        _case["id"] = case.id
        return execute(spec, case, *a, **k)

    def synchronize_(device):
        _check()
        return synchronize(device)

    def materialize_(*a, **k):
        _check()
        return materialize(*a, **k)

    def run_call_(expr, ns):
        global _pending
        _check()
        try:
            res = run_call(expr, ns)
            if MODE == "assert_valid":
                raise torch.AcceleratorError(ASSERT)
            return res
        except torch.AcceleratorError:
            raise
        except Exception as e:  # noqa: BLE001
            if not _OOR.search(str(e)):
                raise
            if MODE.startswith("hang"):
                if _first_attempt():
                    if MODE == "hang":
                        print(PRINTED, file=sys.stderr, flush=True)
                    time.sleep(3600)
                raise torch.AcceleratorError(ASSERT) from None
            _pending = (FAULT if MODE == "late_fault" else ASSERT, _case["n"])
            raise

    worker.execute, worker.synchronize, gen.materialize, worker.run_call = (
        execute_, synchronize_, materialize_, run_call_)
    return {"mode": mode}
