"""The layout names an audit case may name: the test layouts plus the auditor's own kinds.

Below both caseid.py (which reads ``self=expand`` in a case id as a layout because the value is a
layout name) and gen.py (which builds the layouts): the vocabulary lives here so that neither
has to import the other to know it.
"""
from __future__ import annotations

from ..testing import layouts as L

EXTRA_LAYOUTS = ("expand_nondim",) + tuple(
    k for k in ("compound_writable", "deep_compound") if k in getattr(L, "EXTRA_GENERATORS", {}))
ALL_LAYOUTS = tuple(L.LAYOUTS) + EXTRA_LAYOUTS


def known_layout(name: str) -> bool:
    if name in ALL_LAYOUTS:
        return True
    try:
        getattr(L, "generator_for")(name)
        return True
    except Exception:  # noqa: BLE001
        return False
