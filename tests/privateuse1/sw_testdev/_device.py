"""The runtime module of the swdev device, registered as ``torch.swdev``.

One device (index 0) whose memory is host memory: nothing to initialise, nothing to
synchronise, no random generator (``manual_seed*`` are accepted and ignored, so that
``torch.manual_seed`` works in a process where swdev is registered).
"""
from __future__ import annotations

import torch

NAME = "swdev"
DEVICE_NAME = "stridewise test device (host memory)"


def _index(device=None) -> int:
    if device is None:
        return 0
    if isinstance(device, int):
        index = device
    else:
        d = torch.device(device)
        if d.type != NAME:
            raise ValueError(f"expected a {NAME} device, got {d}")
        index = 0 if d.index is None else d.index
    if index not in (0, -1):
        raise ValueError(f"{NAME} has one device (index 0), got index {index}")
    return 0


def is_available() -> bool:
    return True


def is_initialized() -> bool:
    return True


def _lazy_init() -> None:
    pass


def _is_in_bad_fork() -> bool:
    return False


def device_count() -> int:
    return 1


def current_device() -> int:
    return 0


def set_device(device) -> None:
    _index(device)


def synchronize(device=None) -> None:
    _index(device)


def get_device_name(device=None) -> str:
    _index(device)
    return DEVICE_NAME


def manual_seed(seed: int) -> None:
    pass


def manual_seed_all(seed: int) -> None:
    pass


def get_amp_supported_dtype() -> list:
    return []
