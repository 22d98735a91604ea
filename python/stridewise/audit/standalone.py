"""Run the auditor from a checkout where ``import stridewise`` fails (native library not built
or built for another torch): ``python3 python/stridewise/audit/standalone.py [audit args]``.

It loads the ``stridewise.audit`` subpackage without executing stridewise/__init__.py (which
loads the native library), so the audit of ATen or of a third-party backend needs only torch.
The set-up runs at import too: forkserver/spawn workers import this file as their main module.
"""
import importlib
import os
import sys
import types

_here = os.path.dirname(os.path.abspath(__file__))
if sys.path and os.path.abspath(sys.path[0]) == _here:
    sys.path.pop(0)  # do not shadow top-level modules with this package's files
_pkg = os.path.dirname(_here)
_root = os.path.dirname(_pkg)
if _root not in sys.path:
    sys.path.insert(0, _root)
if "stridewise" not in sys.modules:
    try:
        import stridewise  # noqa: F401  (the real package when its native library loads)
    except Exception as e:  # noqa: BLE001
        if __name__ == "__main__":
            print(f"note: stridewise did not import ({type(e).__name__}: {str(e)[:160]}); "
                  "auditing without it", file=sys.stderr)
        _stub = types.ModuleType("stridewise")
        _stub.__path__ = [_pkg]
        sys.modules["stridewise"] = _stub

if __name__ == "__main__":
    cli = importlib.import_module("stridewise.audit.cli")
    sys.exit(cli.main(sys.argv[1:]))
