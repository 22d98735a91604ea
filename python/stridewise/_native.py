"""Finds, checks and loads the native library (libstridewise_torch.so, the torch adapter).

The library registers the ``torch.ops.stridewise`` operators when loaded. It must have been
built against the torch that is running: ``build_info.json`` (written by CMake next to the
library) records that torch's version and C++ ABI, and a different major.minor or ABI is
reported before loading, with the command that rebuilds, because a library built for another
torch may fail to load or, worse, load and misbehave.
"""
from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Optional

import torch

PKG_DIR = Path(__file__).resolve().parent
LIB_DIR = PKG_DIR / "_lib"
LIB_NAME = "libstridewise_torch.so"
# For CMake: find_package(stridewise CONFIG) with CMAKE_PREFIX_PATH set to this (an installed
# package has share/cmake/stridewise/ here; a source tree does not).
cmake_prefix_path = str(PKG_DIR / "share" / "cmake")

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


def rebuild_hint(info: Optional[dict] = None) -> str:
    """How to rebuild for the running torch: an installed package is re-installed from its
    source tree; a source-tree build (PYTHONPATH=python) is rebuilt by CMake."""
    info = build_info() if info is None else info
    src = info.get("source_dir") or "<stridewise source>"
    if info.get("wheel"):
        return (f"rebuild it against this torch: {sys.executable} -m pip install "
                f"--no-build-isolation --force-reinstall --no-deps {src}")
    return (f"rebuild it against this torch: cmake -S {src} -B <build dir> "
            f"-DPython3_EXECUTABLE={sys.executable} && cmake --build <build dir>")


def mismatch(info: dict, running: str = torch.__version__,
             running_abi: Optional[bool] = None) -> Optional[str]:
    """Why a library described by ``info`` (build_info.json) cannot be loaded into this torch,
    or None. C++ ABI compatibility across torch releases holds within a major.minor series
    (local tags such as +cpu / +cu130 do not change the C++ ABI) and needs the same
    _GLIBCXX_USE_CXX11_ABI."""
    built = info.get("torch_version")
    if not built:
        return None
    if running_abi is None:
        running_abi = bool(torch.compiled_with_cxx11_abi())
    want, have = _major_minor(built), _major_minor(running)
    why = []
    if want != have:
        why.append(f"torch {built} (major.minor {want}), running torch {running} "
                   f"(major.minor {have})")
    built_abi = info.get("torch_cxx11_abi")
    if built_abi is not None and bool(built_abi) != running_abi:
        why.append(f"_GLIBCXX_USE_CXX11_ABI={int(bool(built_abi))}, running torch uses "
                   f"{int(running_abi)}")
    if not why:
        return None
    return "was built for " + "; and for ".join(why)


def _major_minor(version: str) -> str:
    return ".".join(version.split("+")[0].split(".")[:2])


def load() -> Path:
    """Loads the library once; raises NativeLibraryError (an ImportError) saying what to do."""
    global _loaded
    if _loaded is not None:
        return _loaded
    path = library_path()
    if not path.is_file():
        raise NativeLibraryError(
            f"stridewise native library not built: run ./run.sh in the source tree, or install "
            f"the package with pip install --no-build-isolation <source> (expected {path})")
    info = build_info()
    why = mismatch(info)
    if why:
        raise NativeLibraryError(
            f"stridewise native library {path} {why}: {rebuild_hint(info)}")
    try:
        torch.ops.load_library(str(path))
    except OSError as e:
        # torch wraps the loader's OSError ("Could not load this library: ..."); keep both.
        reason = f"{e}: {e.__cause__}" if e.__cause__ is not None else str(e)
        raise NativeLibraryError(
            f"stridewise native library {path} failed to load: {reason}; "
            f"{rebuild_hint(info)}") from e
    if not hasattr(torch.ops.stridewise, "gather"):
        raise NativeLibraryError(
            f"stridewise native library {path} loaded but registered no stridewise ops; "
            f"{rebuild_hint(info)}")
    _loaded = path
    return path
