"""stridewise.audit: audit any backend's indexing kernels (the whole ATen indexing family) over
the layout matrix, against native PyTorch on CPU, with crash isolation and guard pages.

Entry points: ``python3 -m stridewise audit ...`` (or ``python3 -m stridewise.audit ...``),
``stridewise.audit.cli.main(argv)``. Importing this package needs only torch: the native
stridewise library is loaded only by ``--backend stridewise``. See docs/audit.md.
"""
from __future__ import annotations

__all__ = ["main"]


def main(argv=None) -> int:
    from .cli import main as _main

    return _main(argv)
