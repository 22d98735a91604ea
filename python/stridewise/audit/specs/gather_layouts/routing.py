"""Routing state for the gather checks: ``native()`` turns stridewise routing off (and, under
compute-sanitizer, sends the native calls memcheck flags to CPU copies); ``stats_snapshot``.

``stridewise`` is used only when it is already imported (sys.modules): the harness tests run
without the native library.
"""
from __future__ import annotations

import contextlib
import sys
from typing import Optional

from ....testing import sanitizer as _sanitizer

#: The compute-sanitizer tool this process runs under, or None ($STRIDEWISE_SANITIZER; see
#: stridewise.testing.sanitizer for the contract with the device script).
sanitizer = _sanitizer.sanitizer


def _sw():
    sw = sys.modules.get("stridewise")
    return sw if sw is not None and hasattr(sw, "stats") else None


@contextlib.contextmanager
def native():
    """Native ATen kernels inside (stridewise routing off); the previous state after. Under
    compute-sanitizer memcheck, the native CUDA calls that memcheck flags in ATen itself run on
    CPU copies instead (sanitizer.native_guard: the one place every test's native call goes
    through; each such call warns SanitizerReroute, naming the issue)."""
    with _routing_off(), _sanitizer.native_guard():
        yield


@contextlib.contextmanager
def _routing_off():
    sw = _sw()
    if sw is None:
        yield
        return
    before = _enabled_ops(sw)
    if not before:
        yield
        return
    sw.disable()
    try:
        yield
    finally:
        sw.enable(include=sorted(before))


def _enabled_ops(sw) -> set:
    e = sw.enabled()
    if isinstance(e, bool):
        return set(sw.supported_ops()) if e else set()
    if isinstance(e, dict):
        return {k for k, v in e.items() if v}
    return set(e or ())


def stats_snapshot() -> Optional[dict]:
    sw = _sw()
    if sw is None:
        return None
    return dict(sw.stats().get("gather", {}))
