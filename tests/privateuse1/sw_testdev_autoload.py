"""Make the swdev test device load by itself in other processes (torch's device autoload),
without importing torch or registering anything in this process.

``write_dist_info(directory)`` writes ``sw_testdev-0.1.dist-info/`` into ``directory``: its
``entry_points.txt`` puts ``sw_testdev:_autoload`` in the ``torch.backends`` group, which
``import torch`` calls (torch/__init__.py, ``_import_device_backends``; off with
TORCH_DEVICE_BACKEND_AUTOLOAD=0), as for torch_npu. A process with ``directory`` and this
file's directory on its path then has ``swdev`` after a plain ``import torch``;
``autoload_env`` builds such an environment. Also available as ``sw_testdev.write_dist_info``
and ``sw_testdev.autoload_env`` (importing sw_testdev registers the device in the importing
process; importing this module does not).
"""
from __future__ import annotations

import os
from pathlib import Path

NAME = "swdev"
DIST_NAME = "sw_testdev"
VERSION = "0.1"
LIB_NAME = "libsw_testdev.so"

#: tests/privateuse1: the directory that must be on sys.path for ``import sw_testdev``.
PACKAGE_ROOT = Path(__file__).resolve().parent


def library_path() -> Path:
    """The library a process loads: ``$SW_TESTDEV_LIB``, else the one next to the package."""
    env = os.environ.get("SW_TESTDEV_LIB")
    return Path(env) if env else PACKAGE_ROOT / DIST_NAME / LIB_NAME


def write_dist_info(directory) -> Path:
    """Write ``sw_testdev-0.1.dist-info/`` (METADATA, entry_points.txt) into ``directory``;
    returns the dist-info directory."""
    dist = Path(directory) / f"{DIST_NAME}-{VERSION}.dist-info"
    dist.mkdir(parents=True, exist_ok=True)
    (dist / "METADATA").write_text(
        f"Metadata-Version: 2.1\nName: {DIST_NAME}\nVersion: {VERSION}\n"
        f"Summary: swdev, the stridewise PrivateUse1 test device (host memory)\n")
    (dist / "entry_points.txt").write_text(f"[torch.backends]\n{NAME} = {DIST_NAME}:_autoload\n")
    return dist


def autoload_env(directory, env=None) -> dict:
    """Write the dist-info into ``directory`` and return a copy of ``env`` (default:
    os.environ) whose PYTHONPATH starts with ``directory`` and :data:`PACKAGE_ROOT`, with
    SW_TESTDEV_LIB set (kept when already there): a child process started with it gets
    ``swdev`` on ``import torch``. SW_TESTDEV_BUGS is left as it is (unset: both bugs on)."""
    env = dict(os.environ if env is None else env)
    write_dist_info(directory)
    parts = [str(Path(directory).resolve()), str(PACKAGE_ROOT)]
    if env.get("PYTHONPATH"):
        parts.append(env["PYTHONPATH"])
    env["PYTHONPATH"] = os.pathsep.join(parts)
    env.setdefault("SW_TESTDEV_LIB", str(library_path()))
    env.pop("TORCH_DEVICE_BACKEND_AUTOLOAD", None)
    return env
