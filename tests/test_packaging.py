"""The installed package (issue 12): what `pip install` put in the environment works from any
directory, the native library refuses a torch it was not built for and says how to rebuild, and
the CMake package config refuses one too.

Tests marked ``installed`` run when the suite runs against the installed package
(STRIDEWISE_TEST_INSTALLED=1, as ./run.sh test does); from a source tree they skip, saying so.
"""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest
import torch

from conftest import INSTALLED, PYDIR, ROOT

needs_install = pytest.mark.skipif(
    not INSTALLED, reason="runs against the installed package (STRIDEWISE_TEST_INSTALLED=1)")


def _clean_env(**extra: str) -> dict:
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "STRIDEWISE_COMPARE")}
    env.update(extra)
    return env


def _run(cmd, cwd, env=None, timeout=300) -> subprocess.CompletedProcess:
    return subprocess.run(cmd, cwd=cwd, env=env or _clean_env(), capture_output=True, text=True,
                          timeout=timeout)


def _scripts_dir() -> Path:
    return Path(sysconfig.get_path("scripts"))


@needs_install
def test_import_is_the_installed_package_from_any_directory(sw, tmp_path):
    assert Path(sw.__file__).resolve().parent.parent == PYDIR
    assert ROOT / "python" not in Path(sw.__file__).resolve().parents
    r = _run([sys.executable, "-c", "import stridewise, torch; "
              "print(stridewise.__file__); print(torch.ops.stridewise.gather(torch.arange(4.), 0, "
              "torch.tensor([3, 1])).tolist())"], cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    where, values = r.stdout.split("\n")[:2]
    assert Path(where).resolve().parent.parent == PYDIR
    assert values == "[3.0, 1.0]"


@needs_install
def test_console_scripts_are_on_the_environment_path(sw, tmp_path):
    env = _clean_env(PATH=f"{_scripts_dir()}{os.pathsep}{os.environ.get('PATH', '')}")
    sw_exe = shutil.which("stridewise", path=env["PATH"])
    cmp_exe = shutil.which("sw-compare", path=env["PATH"])
    assert sw_exe and Path(sw_exe).parent == _scripts_dir(), sw_exe
    assert cmp_exe and Path(cmp_exe).parent == _scripts_dir(), cmp_exe

    info = _run(["stridewise", "info"], cwd=tmp_path, env=env)
    assert info.returncode == 0, info.stderr
    assert f"library         {PYDIR / 'stridewise' / '_lib'}" in info.stdout, info.stdout
    for sub in (["audit", "--help"], ["dump", "--help"]):
        r = _run(["stridewise", *sub], cwd=tmp_path, env=env)
        assert r.returncode == 0 and "usage" in r.stdout.lower(), (sub, r.stdout, r.stderr)
    demo = _run(["stridewise", "demo", "--device", "cpu"], cwd=tmp_path, env=env, timeout=600)
    assert demo.returncode == 0, demo.stdout[-2000:] + demo.stderr[-2000:]
    last = demo.stdout.strip().splitlines()[-1]
    assert "routed ops ran through stridewise on cpu" in last and "FAILED" not in demo.stdout, last
    r = _run(["sw-compare", "--help"], cwd=tmp_path, env=env)
    assert r.returncode == 0 and "sw-compare" in r.stdout, r.stdout + r.stderr

    from stridewise.dump.compare import find_compare_binary
    assert Path(find_compare_binary()) == Path(cmp_exe)


@needs_install
def test_the_wheel_installed_headers_library_and_cmake_config(sw):
    pkg = PYDIR / "stridewise"
    info = json.loads((pkg / "_lib" / "build_info.json").read_text())
    assert info["wheel"] is True and info["torch_version"] == torch.__version__
    assert info["torch_cxx11_abi"] == int(torch.compiled_with_cxx11_abi())
    assert (pkg / "include" / "stridewise" / "torch.h").is_file()
    assert (pkg / "include" / "stridewise" / "offset_calc.h").is_file()
    assert (pkg / "lib" / "libstridewise_core.a").is_file()
    cfg = Path(sw.cmake_prefix_path) / "stridewise"
    for name in ("stridewiseConfig.cmake", "stridewiseConfigVersion.cmake",
                 "stridewiseTargets.cmake", "TorchFromPython.cmake"):
        assert (cfg / name).is_file(), name


def test_mismatch_names_major_minor_and_abi(sw):
    from stridewise import _native

    abi = bool(torch.compiled_with_cxx11_abi())
    same = {"torch_version": "2.13.5+cu130", "torch_cxx11_abi": int(abi)}
    assert _native.mismatch(same, running="2.13.0+cpu", running_abi=abi) is None
    other = _native.mismatch(dict(same, torch_version="2.11.0"), running="2.13.0+cpu",
                             running_abi=abi)
    assert other and "torch 2.11.0 (major.minor 2.11)" in other and "2.13.0+cpu" in other
    flipped = _native.mismatch(same, running="2.13.1", running_abi=not abi)
    assert flipped and f"_GLIBCXX_USE_CXX11_ABI={int(abi)}" in flipped
    hint = _native.rebuild_hint({"wheel": True, "source_dir": "/src/sw"})
    assert "pip install --no-build-isolation --force-reinstall --no-deps /src/sw" in hint
    tree = _native.rebuild_hint({"wheel": False, "source_dir": "/src/sw"})
    assert f"cmake -S /src/sw -B <build dir> -DPython3_EXECUTABLE={sys.executable}" in tree


def test_import_refuses_a_library_built_for_another_torch(sw, tmp_path):
    """A copy of the package whose build_info.json says torch 1.0: `import stridewise` raises
    NativeLibraryError naming both versions and the rebuild command, before loading."""
    pkg = tmp_path / "site" / "stridewise"
    shutil.copytree(Path(sw.__file__).parent, pkg,
                    ignore=shutil.ignore_patterns("__pycache__", "include", "lib", "share"))
    info_path = pkg / "_lib" / "build_info.json"
    info = json.loads(info_path.read_text())
    info["torch_version"] = "1.0.0"
    info_path.write_text(json.dumps(info))
    r = _run([sys.executable, "-c", "import stridewise"], cwd=tmp_path,
             env=_clean_env(PYTHONPATH=str(pkg.parent)))
    assert r.returncode != 0
    assert "NativeLibraryError" in r.stderr and "was built for torch 1.0.0" in r.stderr, r.stderr
    assert f"running torch {torch.__version__}" in r.stderr
    assert ("pip install --no-build-isolation" in r.stderr) == bool(info.get("wheel")), r.stderr
    # The untouched copy imports: the refusal above is the planted version, nothing else.
    info_path.write_text(json.dumps(dict(info, torch_version=torch.__version__)))
    ok = _run([sys.executable, "-c", "import stridewise; print(stridewise.__file__)"],
              cwd=tmp_path, env=_clean_env(PYTHONPATH=str(pkg.parent)))
    assert ok.returncode == 0 and str(pkg) in ok.stdout, ok.stderr


@needs_install
@pytest.mark.skipif(shutil.which("cmake") is None, reason="cmake not on PATH")
def test_cmake_config_refuses_another_torch(sw, tmp_path):
    """find_package(stridewise) from a copy of the installed config that claims torch 1.0: the
    consumer's configure fails and says which torch it was built for; the real config
    configures (the consumer is built and run by ./run.sh test)."""
    src_cfg = Path(sw.cmake_prefix_path) / "stridewise"
    prefix = tmp_path / "prefix" / "stridewise"
    shutil.copytree(src_cfg, prefix)
    cfg = prefix / "stridewiseConfig.cmake"
    text = cfg.read_text()
    line = f'set(stridewise_BUILT_FOR_TORCH "{torch.__version__}")'
    assert line in text
    cfg.write_text(text.replace(line, 'set(stridewise_BUILT_FOR_TORCH "1.0.0")'))

    def configure(prefix_path: Path, build: Path) -> subprocess.CompletedProcess:
        return _run(["cmake", "-S", str(ROOT / "examples"), "-B", str(build),
                     f"-DCMAKE_PREFIX_PATH={prefix_path}", f"-DPython3_EXECUTABLE={sys.executable}"],
                    cwd=tmp_path)

    bad = configure(prefix.parent, tmp_path / "bad")
    assert bad.returncode != 0
    assert "stridewise was built for torch 1.0.0" in bad.stderr + bad.stdout, bad.stderr
    good = configure(Path(sw.cmake_prefix_path), tmp_path / "good")
    assert good.returncode == 0, good.stderr[-3000:]
    assert f"built for torch {torch.__version__}" in good.stdout
