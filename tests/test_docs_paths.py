"""Every repository path the docs name exists (issue 35): a file moved or renamed without its
docs fails here, naming each stale reference at once.

Scanned: docs/*.md and README.md. A path is a backticked span (or a word of one, as in
`python3 bench/bench_index.py --quick`) that starts with one of the repository's top-level
directories, contains a '/', and ends in a file extension or in '/'. Skipped: placeholders
(``<...>``, ``{...}``, ``[...]``, ``$VAR``) and ``build*/`` trees. A ``:line`` or ``#anchor``
suffix is dropped. It must be a file of the tree (tracked, or untracked and not ignored; present)
or a directory that holds one; a glob (``core/src/*.cu``, ``*`` and ``?`` within one path
component) must match at least one such file: a glob that matches nothing is as stale as a
missing path.
"""
from __future__ import annotations

import re
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

# Paths the docs name that are made by a build or at run time, never committed.
PRODUCED = {
    # the source-tree build copies the native library here (git-ignored; docs/install.md)
    "python/stridewise/_lib/",
    "python/stridewise/_lib/libstridewise_torch.so",
    # the PrivateUse1 test device's library, built by CMake (docs/privateuse1_testdev.md)
    "tests/privateuse1/sw_testdev/libsw_testdev.so",
}

_SPAN = re.compile(r"`([^`\n]+)`")
_PLACEHOLDER = re.compile(r"[<>{}\[\]$]")
_EXT = re.compile(r"\.[A-Za-z0-9]+$")


def tracked() -> tuple:
    # The tree's files as git sees them: tracked or not ignored, and present. Untracked ones
    # count because a copy of the tree may carry a stale index (the device machine's copy has
    # an old .git beside new files); CI's fresh clone then holds only what was committed.
    listed = subprocess.run(["git", "ls-files", "--cached", "--others", "--exclude-standard"],
                            cwd=ROOT, capture_output=True, text=True, check=True).stdout
    files = {f for f in listed.splitlines() if (ROOT / f).is_file()}
    dirs = set()
    for f in files:
        parts = f.split("/")
        dirs.update("/".join(parts[:i]) + "/" for i in range(1, len(parts)))
    return files, dirs


def doc_files() -> list:
    return sorted((ROOT / "docs").glob("*.md")) + [ROOT / "README.md"]


def paths_in(text: str, tops: set) -> list:
    """(line number, path) for every repository path named in backticks in ``text``."""
    out = []
    for ln, line in enumerate(text.splitlines(), 1):
        for m in _SPAN.finditer(line):
            for word in m.group(1).split():
                p = word.strip("()'\",;").split("=")[-1]  # --out=tests/x.json: the value
                p = re.sub(r"(:\d.*|#.*)$", "", p)  # core/src/x.cu:120, docs/x.md#anchor
                if "/" not in p or _PLACEHOLDER.search(p) or p.startswith("build"):
                    continue
                if p.split("/")[0] not in tops:
                    continue
                if p.endswith("/") or _EXT.search(p.rsplit("/", 1)[-1]):
                    out.append((ln, p))
    return out


def _glob_matches(pattern: str, files: set) -> bool:
    rx = re.compile("".join("[^/]*" if c == "*" else "[^/]" if c == "?" else re.escape(c)
                            for c in pattern) + ("" if pattern.endswith("/") else "$"))
    return any(rx.match(f) for f in files)


def missing(files: set, dirs: set) -> list:
    tops = {d.split("/")[0] for d in dirs}
    bad = []
    for doc in doc_files():
        for ln, p in paths_in(doc.read_text(), tops):
            if p in PRODUCED or p in files or (p.endswith("/") and p in dirs):
                continue
            if ("*" in p or "?" in p) and _glob_matches(p, files):
                continue
            bad.append(f"{doc.relative_to(ROOT)}:{ln}: `{p}`")
    return bad


def test_docs_name_only_paths_that_exist():
    files, dirs = tracked()
    assert files, "git ls-files listed nothing"
    bad = missing(files, dirs)
    assert not bad, ("the docs name repository paths that do not exist (moved? renamed? a "
                     "path made at run time goes into PRODUCED, with why):\n  " + "\n  ".join(bad))


def test_the_scan_finds_paths_and_skips_placeholders():
    text = ("see `core/src/a.cu` and `python3 bench/b.py --quick` and `tests/x/` and "
            "`core/src/*.cu` `scripts/<name>.sh` `$OUT/bench/x.json` `build/core/y.so` "
            "`OpCode::kFoo` `a/b` `docs/x.md#part` `core/src/a.cu:12` `--out=tests/r.json`\n"
            "`unknown/c.py`")
    got = paths_in(text, {"core", "bench", "tests", "scripts", "docs"})
    assert got == [(1, "core/src/a.cu"), (1, "bench/b.py"), (1, "tests/x/"), (1, "core/src/*.cu"),
                   (1, "docs/x.md"), (1, "core/src/a.cu"), (1, "tests/r.json")]
    files = {"core/src/a.cu", "core/src/gather/b.cu"}
    assert _glob_matches("core/src/*.cu", files) and _glob_matches("core/src/g*/", files)
    assert not _glob_matches("core/src/*.cpp", files)
    assert not _glob_matches("core/*.cu", files)  # '*' stays within one directory


def test_produced_paths_are_not_tracked():
    """An entry of PRODUCED that git tracks now is a real path: drop it from the list."""
    files, dirs = tracked()
    assert not sorted(p for p in PRODUCED if p in files or (p.endswith("/") and p in dirs))
