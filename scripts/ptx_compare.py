#!/usr/bin/env python3
"""Did a change alter the code nvcc emits? PTX of the core's .cu files, function by function.

    scripts/ptx_compare.py --build BUILD --old OLD_SRC --new NEW_SRC [--changed REGEX]

BUILD is a configured CUDA build of either tree (its ninja commands give the flags); OLD_SRC
and NEW_SRC are source trees (e.g. `git worktree add /tmp/old REV`). Each core .cu file is
compiled to PTX from both trees (cicc only, no ptxas) and every .entry/.func body compared,
ignoring line directives (.loc/.file: a header's edit moves its lines) and the per-path hashes
in internal names. Functions whose mangled name matches --changed may differ (the ones the
change meant to alter); any other difference exits 1 and names the function.

Used for the offset_calc.h unroll bound (2026-12-07): every function below the rank-64 bucket
identical, the rank-64 ones (Li64E) changed.
"""
from __future__ import annotations

import argparse
import re
import shlex
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

SOURCES = ["gather/gather_cuda", "scatter/scatter_cuda", "index_k/index_k_cuda", "common/segments_cuda"]
_HEAD = re.compile(r"^(?:\.visible |\.weak )?\.(?:entry|func)\s+(?:\([^)]*\)\s*)?([A-Za-z_0-9$]+)")
_HASHED = re.compile(r"(_INTERNAL_|_GLOBAL__N__)[0-9a-f]+_(\d+_\w+?_cu_)[0-9a-f]+")
_SKIP = (".loc", ".file", "//", "$L__tmp", "$L__func")


def functions(ptx: str) -> dict[str, str]:
    """Each function's body by name, without line directives, comments or path hashes."""
    out: dict[str, str] = {}
    name, body = None, []
    for line in ptx.splitlines():
        line = _HASHED.sub(r"\1H_\2H", line)
        m = _HEAD.match(line)
        if m:
            name, body = m.group(1), []
        if name is None:
            continue
        s = line.strip()
        if not s.startswith(_SKIP):
            body.append(re.sub(r"\$L__[A-Za-z_]+[0-9_]*", "L", s))
        if line.startswith("}"):
            out[name] = "\n".join(body)
            name = None
    return out


def compare(old: dict[str, str], new: dict[str, str], changed: str | None) -> tuple[list[str], dict]:
    """(problems, counts): a function only on one side, or differing without matching `changed`."""
    may = re.compile(changed) if changed else None
    problems = [f"only in {'old' if k in old else 'new'}: {k}" for k in sorted(set(old) ^ set(new))]
    counts = {"functions": len(old), "identical": 0, "changed_as_meant": 0, "changed_unmeant": 0}
    for k in sorted(set(old) & set(new)):
        if old[k] == new[k]:
            counts["identical"] += 1
        elif may and may.search(k):
            counts["changed_as_meant"] += 1
        else:
            counts["changed_unmeant"] += 1
            problems.append(f"differs: {k}")
    return problems, counts


def ptx_of(build: Path, src_root: Path, rel: str, out: Path) -> str:
    target = f"core/CMakeFiles/stridewise_core.dir/src/{rel}.cu.o"
    cmd = subprocess.run(["ninja", "-C", str(build), "-t", "commands", target], check=True,
                         capture_output=True, text=True).stdout.strip().splitlines()[-1]
    args = shlex.split(cmd)
    keep: list[str] = []
    skip = 0
    for a in args:
        if skip:
            skip -= 1
            continue
        if a in ("-MD",):
            continue
        if a in ("-MT", "-MF", "-o"):
            skip = 1
            continue
        if a.startswith("--generate-code"):
            a = "--gpu-architecture=compute_90"
        keep.append(a)
    built_root = Path(re.search(r"-I(\S+)/core/include", cmd).group(1))
    keep = [a.replace(str(built_root), str(src_root)) for a in keep]
    keep = ["-ptx" if a == "-c" else a for a in keep] + ["-o", str(out)]
    subprocess.run(keep, check=True, cwd=build)
    return out.read_text()


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--build", type=Path, required=True)
    ap.add_argument("--old", type=Path, required=True)
    ap.add_argument("--new", type=Path, required=True)
    ap.add_argument("--changed", help="regex of mangled names the change may alter")
    ap.add_argument("--out", type=Path, default=Path("/tmp/ptx_compare"))
    a = ap.parse_args(argv)
    a.out.mkdir(parents=True, exist_ok=True)
    jobs = [(side, root, rel) for rel in SOURCES for side, root in (("old", a.old), ("new", a.new))]
    with ThreadPoolExecutor(2) as pool:
        texts = list(pool.map(lambda j: ptx_of(a.build, j[1].resolve(), j[2],
                                               a.out / f"{j[0]}_{Path(j[2]).name}.ptx"), jobs))
    bad = 0
    for i, rel in enumerate(SOURCES):
        problems, counts = compare(functions(texts[2 * i]), functions(texts[2 * i + 1]), a.changed)
        print(f"{rel}.cu: {counts}")
        for p in problems:
            print("  " + p)
        bad += len(problems)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
