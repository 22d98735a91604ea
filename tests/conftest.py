"""Shared fixtures for the stridewise pytest suite.

Seeds: every test draws its data from ``case_seed(BASE_SEED, test node id)``. BASE_SEED is
$STRIDEWISE_SEED when set, otherwise a fresh random value per run (printed in the header
and in every failure message), so each run sees fresh data and any failure reproduces with
``STRIDEWISE_SEED=<n> python3 -m pytest <test id>``.

Devices: ``devices`` parametrizes over 'cpu' always and 'cuda' (skipped without a GPU).
"""
from __future__ import annotations

import os
import random
import re
import sys
from pathlib import Path

import pytest
import torch

ROOT = Path(__file__).resolve().parents[1]
# STRIDEWISE_TEST_INSTALLED=1 (./run.sh test): the suite runs against the installed package,
# and the source tree's python/ must not be importable; PYDIR is then the directory that holds
# the installed package (tests put it on child processes' PYTHONPATH). Otherwise the source
# tree's python/ (PYTHONPATH=python, with a source-tree build).
INSTALLED = os.environ.get("STRIDEWISE_TEST_INSTALLED") == "1"
if INSTALLED:
    import importlib.util

    _spec = importlib.util.find_spec("stridewise")
    if _spec is None or not _spec.submodule_search_locations:
        raise RuntimeError("STRIDEWISE_TEST_INSTALLED=1 but stridewise is not installed in "
                           f"{sys.executable}'s environment (./run.sh build installs it)")
    PYDIR = Path(list(_spec.submodule_search_locations)[0]).resolve().parent
    if PYDIR == ROOT / "python":
        raise RuntimeError(f"STRIDEWISE_TEST_INSTALLED=1 but stridewise comes from the source "
                           f"tree ({PYDIR}): unset PYTHONPATH")
else:
    PYDIR = ROOT / "python"
    if str(PYDIR) not in sys.path:
        sys.path.insert(0, str(PYDIR))

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")


def _import_stridewise():
    try:
        import stridewise  # noqa: F401
        return stridewise
    except Exception as e:  # noqa: BLE001
        return e


# The package loads its native library on import. When that fails (not built, built for
# another torch), the pure-Python parts (stridewise.testing, the harness tests) must still
# import, so a namespace stand-in takes the package's place; every test that needs the
# library asks for the ``sw`` fixture, which then FAILS with the import error (a broken
# build must not turn into skips).
_SW_IMPORT = _import_stridewise()
if isinstance(_SW_IMPORT, Exception):
    import types

    _stub = types.ModuleType("stridewise")
    _stub.__path__ = [str(PYDIR / "stridewise")]
    _stub.__stridewise_import_error__ = _SW_IMPORT
    sys.modules["stridewise"] = _stub

from stridewise.audit.specs import gather_layouts as specs  # noqa: E402

_env_seed = os.environ.get("STRIDEWISE_SEED")
BASE_SEED = int(_env_seed) if _env_seed else random.SystemRandom().randrange(1, 1 << 31)

HAVE_CUDA = torch.cuda.is_available()
CUDA_SKIP = pytest.mark.skipif(not HAVE_CUDA, reason="CUDA not available (torch.cuda.is_available() is False)")
DEVICES = [pytest.param("cpu", id="cpu"), pytest.param("cuda", id="cuda", marks=CUDA_SKIP)]
LIB_PATH = PYDIR / "stridewise" / "_lib" / "libstridewise_torch.so"


def pytest_configure(config):
    config.addinivalue_line("markers", "cuda_errors: CUDA out-of-range tests; restore the check mode")
    config.addinivalue_line("markers", "slow: slower end-to-end tests")


def pytest_report_header(config):
    return [
        f"stridewise: {'INSTALLED package' if INSTALLED else 'source tree'} at "
        f"{PYDIR / 'stridewise'}",
        f"stridewise: STRIDEWISE_SEED={BASE_SEED} torch={torch.__version__} "
        f"cuda={'yes (' + torch.cuda.get_device_name(0) + ')' if HAVE_CUDA else 'no'} "
        f"lib={'present' if LIB_PATH.exists() else 'MISSING'}"
    ]


def deterministic_device(request, monkeypatch):
    """A fixture body for the device tests whose two native runs must agree bitwise: "cpu", or
    "cuda" with torch's deterministic algorithms and a fixed cuBLAS workspace (index_add_ and
    scatter_add accumulate with atomics in a varying order otherwise). A module uses it as
    ``device = pytest.fixture(params=DEVICES, name="device")(deterministic_device)``."""
    if request.param == "cuda":
        monkeypatch.setenv("CUBLAS_WORKSPACE_CONFIG", ":4096:8")
        prev = torch.are_deterministic_algorithms_enabled()
        torch.use_deterministic_algorithms(True, warn_only=True)
        yield request.param
        torch.use_deterministic_algorithms(prev)
    else:
        yield request.param


@pytest.fixture(scope="session")
def sw():
    """The stridewise package with its native library loaded (fails, not skips, when it
    cannot be imported: a suite that silently skips would hide a broken build)."""
    mod = _SW_IMPORT
    if isinstance(mod, Exception):
        pytest.fail(f"import stridewise failed: {type(mod).__name__}: {mod} (./run.sh build installs it; "
                    f"expected {LIB_PATH})")
    if not hasattr(torch.ops.stridewise, "gather"):
        pytest.fail("torch.ops.stridewise.gather is not registered after import stridewise")
    return mod


@pytest.fixture(scope="module")
def exe():
    """Path of the sw-compare binary (built on demand); fails, not skips, when unavailable."""
    from stridewise.dump import CompareError
    from stridewise.dump._testing import compare_binary

    try:
        return compare_binary()
    except CompareError as e:
        pytest.fail(f"sw-compare is not available: {e}")


@pytest.fixture
def seed(request):
    """The per-test seed (reproducible from the base seed and the test id)."""
    return specs.case_seed(BASE_SEED, request.node.nodeid)


@pytest.fixture
def rng(seed):
    return random.Random(seed)


@pytest.fixture(autouse=True)
def _isolate_stridewise(request):
    """Every test starts with routing off and fresh stats, leaves the state as it found it,
    and never sees a copy made by stridewise."""
    mod = sys.modules.get("stridewise")
    if mod is None or not hasattr(mod, "stats"):
        yield
        return
    mod.disable()
    mod.reset_stats()
    yield
    copies = mod.stats().get("gather", {}).get("copies", 0)
    mod.disable()
    assert copies == 0, f"stridewise made {copies} copies during {request.node.nodeid}"


@pytest.fixture(autouse=True)
def _cuda_context_alive(request):
    """A device-side assert (ATen's answer to a bad index on CUDA) leaves the process's CUDA
    context unusable: every later CUDA test would fail for a reason not its own (seen on the
    H200, 2026-12-01: one such test, then 1600 failures). Stop the run at the test that lost
    the context, naming it."""
    yield
    if not (HAVE_CUDA and torch.cuda.is_initialized()):
        return
    try:
        torch.cuda.synchronize()
    except Exception as e:  # noqa: BLE001 - torch.AcceleratorError or RuntimeError by version
        pytest.exit(f"the CUDA context was lost during {request.node.nodeid}: "
                    f"{type(e).__name__}: {specs.first_line(str(e))}", returncode=3)


@pytest.fixture
def cuda_check_mode(sw):
    """Restores the CUDA check mode and drains pending CUDA errors after the test."""
    before = sw.get_cuda_check_mode()
    yield sw
    try:
        sw.check_errors(sync=True)
    except RuntimeError:
        pass
    sw.set_cuda_check_mode(before)


# swdev, the PrivateUse1 test device (tests/privateuse1): its library, built with the C++ tests.
SWDEV_LIB = Path(os.environ.get("SW_TESTDEV_LIB")
                 or ROOT / "tests" / "privateuse1" / "sw_testdev" / "libsw_testdev.so")


def require_swdev() -> Path:
    """SWDEV_LIB, or the test stops: FAILED under CI=true or against the installed package
    (./run.sh test builds it there), skipped elsewhere."""
    if not SWDEV_LIB.is_file():
        msg = (f"the swdev test device library {SWDEV_LIB} is missing (built with SW_BUILD_TESTS=ON: "
               f"./run.sh test, or cmake --build <build dir> --target sw_testdev)")
        if os.environ.get("CI") == "true" or INSTALLED:
            pytest.fail(msg)
        pytest.skip(msg)
    return SWDEV_LIB


def fail_msg(problems) -> str:
    return f"STRIDEWISE_SEED={BASE_SEED}\n" + "\n".join(problems)


# The op table (core/include/stridewise/ops.def), read from the file: tests that derive their
# op lists from it need no built library. Rows: (code, number, key, error_name, family, packets).
_OP_ROW = re.compile(r'^SW_OP\((\w+),\s*(\d+),\s*"(\w+)",\s*"(\w+)",\s*(\w+),\s*"([^"]*)"\)', re.M)


def op_table_rows() -> list:
    text = (ROOT / "core/include/stridewise/ops.def").read_text()
    return _OP_ROW.findall(re.sub(r",\s*\n\s*", ", ", text))  # a row may wrap after a comma


def routed_key(aten_overload: str) -> tuple:
    """(op table key, family) of the row whose packets hold an aten overload ("index.Tensor")."""
    packet = aten_overload.split(".")[0]
    for _, _, key, _, family, packets in op_table_rows():
        if packet in packets.split():
            return key, family
    raise KeyError(f"{aten_overload}: no op table row routes aten::{packet}")

