"""Python front end of the ``sw-compare`` tool (tools/compare): find the binary, run it, parse
its JSON report."""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sysconfig

_HERE = os.path.dirname(os.path.abspath(__file__))
_REPO = os.path.normpath(os.path.join(_HERE, "..", "..", ".."))


def source_tree() -> "str | None":
    """The checkout this package lives in when it is a source tree (python/stridewise with
    tools/compare beside it), else None (an installed package)."""
    return _REPO if os.path.isfile(os.path.join(_REPO, "tools", "compare", "CMakeLists.txt")) else None


class CompareError(RuntimeError):
    """sw-compare could not run or exited with status 2 (usage or I/O error)."""


def find_compare_binary() -> str:
    """Path of sw-compare: $STRIDEWISE_COMPARE; then the one the package's wheel put in this
    environment's scripts directory (found even when that directory is not on PATH), after
    build/tools/compare/sw-compare when this package is a source tree; then ``sw-compare`` on
    PATH."""
    env = os.environ.get("STRIDEWISE_COMPARE")
    if env:
        if os.path.isfile(env) and os.access(env, os.X_OK):
            return env
        raise CompareError(f"STRIDEWISE_COMPARE={env}: not an executable file")
    tried = []
    installed = os.path.join(sysconfig.get_path("scripts"), "sw-compare")
    in_tree = os.path.join(_REPO, "build", "tools", "compare", "sw-compare")
    # A source-tree package prefers its own build over an older install in the same Python.
    for cand in ((in_tree, installed) if source_tree() else (installed,)):
        tried.append(cand)
        if os.path.isfile(cand) and os.access(cand, os.X_OK):
            return cand
    on_path = shutil.which("sw-compare")
    if on_path:
        return on_path
    raise CompareError("sw-compare not found: set STRIDEWISE_COMPARE, install the package "
                       "(pip install --no-build-isolation .), or build it "
                       "(cmake -S . -B build -G Ninja && cmake --build build --target sw-compare); tried "
                       + ", ".join(tried) + " and PATH")


class CompareResult:
    """returncode: 0 all pass, 1 divergence, 3 incomplete (records on one side only, a cut-short
    or damaged index).  report: the parsed JSON report."""

    def __init__(self, returncode, report, stdout, stderr, args):
        self.returncode, self.report, self.stdout, self.stderr, self.args = returncode, report, stdout, stderr, args

    @property
    def passed(self) -> bool:
        return self.returncode == 0

    @property
    def verdict(self) -> str:
        """PASS, DIVERGED or INCOMPLETE."""
        return self.report.get("summary", {}).get("verdict", "")

    @property
    def incomplete(self):
        """Why the comparison cannot vouch for every op ([] when complete)."""
        return self.report.get("incomplete", [])

    @property
    def entries(self):
        return self.report.get("entries", [])

    @property
    def first_divergent(self):
        """Where the first difference of the first (step, rank) that has one starts, or None:
        op, call, phase, kind (introduced, one_sided, outside, uninitialized, unexplained,
        unknown), detail, writer, chain."""
        fd = self.report.get("first_divergent") or []
        return fd[0] if fd else None

    def failing(self):
        return [e for e in self.entries if e["status"] in ("FAIL", "ERROR")]

    def __repr__(self):
        s = self.report.get("summary", {})
        return f"CompareResult(returncode={self.returncode}, summary={s})"


def compare(a, b, *extra_args, config=None, op_standards=None, dtype_standards=None, rtol=None, atol=None,
            max_wrong_fraction=None, steps=None, ranks=None, tensor=None, threads=None, strict_unmatched=False,
            subset=None, binary=None, timeout=None) -> CompareResult:
    """Compares two dumps or two tensor files with sw-compare; returns a CompareResult.

    op_standards / dtype_standards: dicts {pattern_or_dtype: standard_name}.  Raises CompareError
    when the tool reports a usage or I/O error (exit status 2), with its message.
    """
    exe = binary or find_compare_binary()
    args = [exe, os.fspath(a), os.fspath(b), "--format", "json"]
    if config:
        args += ["--config", os.fspath(config)]
    for pat, std in (op_standards or {}).items():
        args += ["--op-standard", f"{pat}={std}"]
    for dt, std in (dtype_standards or {}).items():
        args += ["--dtype-standard", f"{dt}={std}"]
    for flag, v in (("--rtol", rtol), ("--atol", atol), ("--max-wrong-fraction", max_wrong_fraction),
                    ("--threads", threads), ("--tensor", tensor)):
        if v is not None:
            args += [flag, str(v)]
    if steps is not None:
        args += ["--steps", ",".join(str(s) for s in steps)]
    if ranks is not None:
        args += ["--ranks", ",".join(str(r) for r in ranks)]
    if strict_unmatched:
        args.append("--strict-unmatched")
    if subset:
        args += ["--subset", str(subset)]
    args += [str(x) for x in extra_args]
    proc = subprocess.run(args, capture_output=True, text=True, timeout=timeout)
    if proc.returncode not in (0, 1, 3):
        raise CompareError(f"sw-compare exited with status {proc.returncode}: {proc.stderr.strip()}")
    try:
        report = json.loads(proc.stdout)
    except json.JSONDecodeError as e:
        raise CompareError(f"sw-compare printed no valid JSON report ({e}); stderr: {proc.stderr.strip()}") from e
    return CompareResult(proc.returncode, report, proc.stdout, proc.stderr, args)
