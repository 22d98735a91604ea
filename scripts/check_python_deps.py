#!/usr/bin/env python3
"""Stops a device phase at its start when a Python package the package declares is missing.

    python3 scripts/check_python_deps.py [--phase NAME] [--extras dump,test]

Reads pyproject.toml's [project] dependencies and the named optional groups (default: dump and
test, what the tests and the dump tool import), and checks each against the installed
distributions of the running interpreter (importlib.metadata, on the current sys.path, so
PYTHONPATH's /tmp/site counts). Exit 0 when all are present at a version the specifier
accepts; else prints one line naming each missing or mismatched requirement and how to carry
it (scripts/device_wheels.txt, scripts/fetch_wheels.sh) and exits 3.
"""
from __future__ import annotations

import argparse
import re
import sys
from importlib import metadata
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def requirements(extras, pyproject: Path = ROOT / "pyproject.toml") -> list:
    try:
        import tomllib
    except ModuleNotFoundError:  # Python < 3.11: the GPU image has 3.12, CI 3.11
        import tomli as tomllib  # type: ignore[no-redef]
    proj = tomllib.loads(Path(pyproject).read_text())["project"]
    reqs = list(proj.get("dependencies", []))
    for e in extras:
        reqs += proj.get("optional-dependencies", {}).get(e, [])
    return reqs


def problems(reqs) -> list:
    try:
        from packaging.requirements import Requirement
    except ModuleNotFoundError:  # presence only, by name
        Requirement = None
    out = []
    for text in reqs:
        r = Requirement(text) if Requirement else None
        if r is not None and r.marker is not None and not r.marker.evaluate():
            continue
        name = r.name if r is not None else re.split(r"[<>=!~\[;\s]", text, maxsplit=1)[0]
        try:
            have = metadata.version(name)
        except metadata.PackageNotFoundError:
            out.append(f"{text} (not installed)")
            continue
        if r is not None and r.specifier and not r.specifier.contains(have, prereleases=True):
            out.append(f"{text} (installed: {have})")
    return out


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--phase", default="")
    p.add_argument("--extras", default="dump,test")
    p.add_argument("--pyproject", default=str(ROOT / "pyproject.toml"), help=argparse.SUPPRESS)
    a = p.parse_args(argv)
    bad = problems(requirements([e for e in a.extras.split(",") if e], a.pyproject))
    if not bad:
        return 0
    who = f"phase {a.phase}" if a.phase else "this environment"
    print(f"{who} cannot start: {sys.executable} lacks Python packages the package declares: "
          f"{'; '.join(bad)}. The device image installs nothing: list them in "
          f"scripts/device_wheels.txt, run scripts/fetch_wheels.sh on the CPU machine and carry "
          f"`.whl` (scripts/gpu_all.sh installs it into /tmp/site before its first phase).")
    return 3


if __name__ == "__main__":
    sys.exit(main())
