"""A backend whose first call of each kernel specialization is slow, like a JIT compiler's.

``--backend 'tests/slow_backend.py:enable(0.3)'`` patches the *worker* (the parent computing
the oracle never imports it): the first call in the process of each (op, variant, dtype) sleeps
that many seconds before running the native kernel, as a Triton backend compiles (and
autotunes) a kernel the first time a process meets it. Every answer stays native's: the audit
passes; its time profile must show the sleeps as likely JIT compiles, with their case ids.
"""
from __future__ import annotations

import time

SECONDS = 0.3
_seen: set = set()
_case = {"key": None}


def enable(seconds: float = 0.3):
    global SECONDS
    SECONDS = float(seconds)
    from stridewise.audit import worker

    execute, run_call = worker.execute, worker.run_call

    def execute_(spec, case, *a, **k):
        _case["key"] = (case.op, case.variant, case.dtype)
        return execute(spec, case, *a, **k)

    def run_call_(expr, ns):
        key = _case["key"]
        if key not in _seen:  # "compiles" on the first call of this specialization
            _seen.add(key)
            time.sleep(SECONDS)
        return run_call(expr, ns)

    worker.execute, worker.run_call = execute_, run_call_
    return {"slow_first_call_s": SECONDS}
