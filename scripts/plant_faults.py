#!/usr/bin/env python3
"""Plant one fault at a time and expect the tests named beside it to fail. CPU only.

A list (tests/planted/*.json) holds {"about", "faults"}; each fault is
{"name", "file", "old", "new"} plus one of "tests" (a pytest selection, run against the
adapter built in BUILD_DIR_DEV, default build-dev), "core_filter" (a gtest filter of
stridewise_core_tests, built there: the CPU core) or "filter" (a gtest filter of
stridewise_cuda_tests, built in BUILD_DIR_CUDA, default build-cuda: the host emulation).

    python3 scripts/plant_faults.py tests/planted/index_fill.json [name ...]
    PLANT_EMULATION=1 python3 scripts/plant_faults.py tests/planted/sorted_path.json

PLANT_EMULATION=1 (filter faults): rebuild only the gtest binary's own objects and relink them
against the core library as built, instead of the whole target (a fault in a header every CUDA
family includes recompiles scatter_cuda.cu: about 16 minutes a fault on 2 cores, against one).
The emulated tests run the kernel bodies compiled into those objects, so the library's stale
CUDA objects take no part; a non-template inline host function the library also emits could
still link from the library's copy, so a fault there that goes unseen is rerun without it.

The file is patched in place from its text in memory and restored from that text (never from
git: a restore from git would drop uncommitted work), then the build is brought back. Prints
one line per fault; exits 1 if any fault went unnoticed or a list's text no longer matches.
"""
from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DEV = ROOT / os.environ.get("BUILD_DIR_DEV", "build-dev")
CUDA = ROOT / os.environ.get("BUILD_DIR_CUDA", "build-cuda")
GTEST = CUDA / "core/tests/cuda/stridewise_cuda_tests"
CORE_GTEST = DEV / "core/tests/stridewise_core_tests"
KINDS = ("tests", "core_filter", "filter")


def load(path: Path) -> list[dict]:
    faults = json.loads(path.read_text())["faults"]
    for f in faults:
        text = (ROOT / f["file"]).read_text()
        if text.count(f["old"]) != 1:
            raise SystemExit(f"{path}: {f['name']!r}: its text occurs {text.count(f['old'])} "
                             f"times in {f['file']} (want 1)")
        if sum(k in f for k in KINDS) != 1:
            raise SystemExit(f"{path}: {f['name']!r}: give one of {', '.join(KINDS)}")
    return faults


def build_emulation() -> tuple[bool, str]:
    """The gtest binary's own objects, then its link command as ninja would run it."""
    target = "core/tests/cuda/stridewise_cuda_tests"
    cmds = subprocess.run(["ninja", "-C", str(CUDA), "-t", "commands", target],
                          capture_output=True, text=True).stdout.splitlines()
    if not cmds:
        return False, f"ninja knows no commands for {target} in {CUDA}"
    link = cmds[-1]
    objs = [t for t in shlex.split(link) if t.endswith(".o")]
    r = subprocess.run(["ninja", "-C", str(CUDA), "-j2", *objs], capture_output=True, text=True)
    if r.returncode != 0:
        return False, (r.stdout + r.stderr)[-1500:]
    r = subprocess.run(["bash", "-c", link], cwd=CUDA, capture_output=True, text=True)
    return r.returncode == 0, (r.stdout + r.stderr)[-1500:]


def build(kind: str) -> tuple[bool, str]:
    """Rebuilds what a fault of this kind ("tests": the adapter, "core_filter": the core's tests,
    "filter": the emulation) runs."""
    if kind == "filter" and os.environ.get("PLANT_EMULATION") == "1":
        return build_emulation()
    cmd = {"tests": ["cmake", "--build", str(DEV), "-j2"],
           "core_filter": ["cmake", "--build", str(DEV), "-j2", "--target", "stridewise_core_tests"],
           "filter": ["cmake", "--build", str(CUDA), "-j2", "--target", "stridewise_cuda_tests"]}[kind]
    r = subprocess.run(cmd, capture_output=True, text=True)
    return r.returncode == 0, (r.stdout + r.stderr)[-1500:]


def kind_of(fault: dict) -> str:
    return next(k for k in KINDS if k in fault)


def run(fault: dict) -> tuple[bool, list[str]]:
    if "tests" in fault:
        env = dict(os.environ, PYTHONPATH=str(ROOT / "python"))
        r = subprocess.run([sys.executable, "-m", "pytest", "-q", "-x",
                            *fault["tests"]], cwd=ROOT, env=env, capture_output=True, text=True,
                           timeout=1200)
        lines = [ln for ln in r.stdout.splitlines() if ln.startswith(("FAILED", "ERROR"))]
    else:
        binary, key = (CORE_GTEST, "core_filter") if "core_filter" in fault else (GTEST, "filter")
        r = subprocess.run([str(binary), "--gtest_filter=" + fault[key]],
                           capture_output=True, text=True, timeout=600)
        lines = [ln for ln in r.stdout.splitlines() if ln.startswith("[  FAILED  ]")]
    return r.returncode != 0, lines[:2] or r.stdout.splitlines()[-1:]


def main(argv: list[str]) -> int:
    if not argv:
        print(__doc__)
        return 2
    faults = load(Path(argv[0]))
    if argv[1:]:
        faults = [f for f in faults if f["name"] in argv[1:]]
    missed = 0
    for f in faults:
        path = ROOT / f["file"]
        text = path.read_text()
        path.write_text(text.replace(f["old"], f["new"], 1))
        try:  # a pytest fault in a Python file needs no build
            compiled = f["file"].endswith((".cpp", ".h", ".cu"))
            ok, log = build(kind_of(f)) if compiled or kind_of(f) != "tests" else (True, "")
            if not ok:
                print(f"BUILD FAILED  {f['name']}\n{log}")
                missed += 1
                continue
            caught, lines = run(f)
            missed += not caught
            print(("seen failing  " if caught else "NOT CAUGHT    ") + f["name"], lines)
        finally:
            path.write_text(text)
    for kind in {kind_of(f) for f in faults}:  # back to the sources
        build(kind)
    return 1 if missed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
