"""sw_testdev: the ``swdev`` test device (docs/privateuse1_testdev.md).

A PrivateUse1 device whose memory is host memory, built from tests/privateuse1/*.cpp into
``libsw_testdev.so`` next to this file, with two deliberately seeded layout bugs in its gather
and scatter_add kernels (switch: ``SW_TESTDEV_BUGS``). It exists to prove that
``stridewise audit --device swdev`` works on an out-of-tree device, the way torch_npu's ``npu``
is one.

``import sw_testdev`` loads the library (``$SW_TESTDEV_LIB``, else the .so next to this file),
renames PrivateUse1 to ``swdev``, generates the ``Tensor.swdev()``/``is_swdev`` methods and
registers ``torch.swdev``. Importing it twice (or calling :func:`register` again) does nothing
more. :func:`write_dist_info` makes the registration automatic in other processes: torch's
device autoload (the ``torch.backends`` entry-point group, read by ``import torch``) then imports
this package, as it does for torch_npu. To do that from a process that must stay clean, use the
torch-free module ``sw_testdev_autoload`` (same functions) instead of importing this package.
"""
from __future__ import annotations

import ctypes
import threading
from pathlib import Path

import torch
from sw_testdev_autoload import (  # noqa: F401  (re-exported)
    DIST_NAME, LIB_NAME, NAME, PACKAGE_ROOT, VERSION, autoload_env, library_path, write_dist_info)

BUGS = ("gather_index_contiguous", "scatter_add_offset")

_lock = threading.Lock()
_MARK = "_sw_testdev_library"  # set on the torch module: one registration per process


def register() -> Path:
    """Load the library and register the ``swdev`` device (once per process); returns the
    library's path. Safe during ``import torch`` (the autoload calls it with torch half
    imported: it only uses what torch has defined before its autoload)."""
    with _lock:
        loaded = getattr(torch, _MARK, None)
        if loaded is not None:
            return Path(loaded)
        current = torch._C._get_privateuse1_backend_name()
        if current not in ("privateuseone", NAME):
            raise RuntimeError(f"sw_testdev: PrivateUse1 is already renamed to {current!r} in "
                               f"this process; {NAME!r} cannot be registered beside it")
        path = library_path()
        if not path.is_file():
            raise FileNotFoundError(
                f"sw_testdev: {path} not found: build it with SW_BUILD_TESTS=ON (./run.sh test, "
                f"or cmake --build <build dir> --target sw_testdev), or set SW_TESTDEV_LIB")
        # The kernels, allocator, guard and hooks register themselves when the library loads.
        ctypes.CDLL(str(path), mode=ctypes.RTLD_GLOBAL)
        if current != NAME:
            torch.utils.rename_privateuse1_backend(NAME)
        if not hasattr(torch.Tensor, "is_" + NAME):
            torch.utils.generate_methods_for_privateuse1_backend(
                for_tensor=True, for_module=True, for_packed_sequence=True, for_storage=True)
        if not hasattr(torch, NAME):
            from . import _device

            torch._register_device_module(NAME, _device)
        setattr(torch, _MARK, str(path))
        return path


def _autoload() -> None:
    """The ``torch.backends`` entry point (see :func:`write_dist_info`)."""
    register()


register()
