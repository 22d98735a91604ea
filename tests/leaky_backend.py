"""A backend that holds process-shared handles the way FlagGems does, and crashes on some cases:
what the auditor's runner must not leak (tests/test_audit_handles.py).

``enable(n)`` creates ``n`` ``multiprocessing.Lock`` objects at import time, as FlagGems 5.0.2's
``LibEntry`` does once per kernel (a named POSIX semaphore each where the process's start method
is not fork), and registers for the ``CPU`` key an ``aten::take`` that aborts the process
(SIGABRT, no clean-up) whenever the index has ``numel % 5 == 3`` elements and is right otherwise:
workers die mid-run and are restarted, as on a real backend's crashes. Every lock of a worker
that dies leaks unless the runner made its semaphores unnamed (2450 "leaked semaphore objects"
over the quick take matrix before the fix; 78654 over FlagGems' whole-family --grad run).
"""
from __future__ import annotations

import multiprocessing
import os

import torch

LOCKS: list = []
_lib = None


def _take(self, index):
    if index.numel() % 5 == 3:
        os.abort()
    return self.reshape(-1)[index]  # aten::index: not overridden here


def enable(n: int = 50):
    global _lib
    LOCKS.extend(multiprocessing.Lock() for _ in range(n))
    _lib = torch.library.Library("aten", "IMPL")
    _lib.impl("take", _take, "CPU")
    return {"locks": len(LOCKS), "named": LOCKS[0]._semlock.name is not None if LOCKS else False}
