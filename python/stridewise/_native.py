"""Finds, checks and loads the native library (libstridewise_torch.so, the torch adapter).

The library registers the ``torch.ops.stridewise`` operators when loaded. It must have been
built against the torch that is running: ``build_info.json`` (written by CMake next to the
library) records that version, and a mismatch is reported before loading, because a library
built for another torch may fail to load or, worse, load and misbehave.
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import Optional

import torch

LIB_DIR = Path(__file__).resolve().parent / "_lib"
LIB_NAME = "libstridewise_torch.so"
BUILD_HINT = "run ./run.sh (or cmake --build build)"

_loaded: Optional[Path] = None


class NativeLibraryError(ImportError):
    """The native library is missing, was built for another torch, or failed to load."""


def library_path() -> Path:
    return LIB_DIR / LIB_NAME


def build_info() -> dict:
    """Contents of _lib/build_info.json ({} when absent or unreadable)."""
    try:
        return json.loads((LIB_DIR / "build_info.json").read_text())
    except (OSError, ValueError):
        return {}


def is_loaded() -> bool:
    return _loaded is not None


def load() -> Path:
    """Loads the library once; raises NativeLibraryError (an ImportError) saying what to do."""
    global _loaded
    if _loaded is not None:
        return _loaded
    path = library_path()
    if not path.is_file():
        raise NativeLibraryError(
            f"stridewise native library not built: {BUILD_HINT} (expected {path})")
    built_for = build_info().get("torch_version")
    if built_for and built_for != torch.__version__:
        raise NativeLibraryError(
            f"stridewise native library was built for torch {built_for}, running torch "
            f"{torch.__version__}: rebuild with ./run.sh ({path})")
    try:
        torch.ops.load_library(str(path))
    except OSError as e:
        # torch wraps the loader's OSError ("Could not load this library: ..."); keep both.
        reason = f"{e}: {e.__cause__}" if e.__cause__ is not None else str(e)
        raise NativeLibraryError(
            f"stridewise native library {path} failed to load: {reason}; rebuild with "
            f"./run.sh") from e
    if not hasattr(torch.ops.stridewise, "gather"):
        raise NativeLibraryError(
            f"stridewise native library {path} loaded but registered no stridewise ops; "
            f"rebuild with ./run.sh")
    _loaded = path
    return path
