"""Runs PyTorch's own test files, unmodified, on CPU with every stridewise op routed (and once
more with nothing routed), and reports per stridewise op how many calls it took, how many it
handed to ATen's own kernel and under which rule (stats()[op]["fallback_reasons"]), and the
pytest outcomes of both runs. docs/fallbacks.md is written from its JSON output
(scripts/fallbacks_doc.py); the PyTorch files are not part of this repository.

    PYTHONPATH=python python scripts/pytorch_suite.py --tests DIR \\
        --out bench/results/pytorch_suite.json

PyTorch's torch.testing._internal needs expecttest (requirements.txt). DIR holds
test_indexing.py and test_scatter_gather_ops.py from pytorch/pytorch (the versions
used are named in docs/fallbacks.md with their git blob hashes, which the JSON records). Each
file runs in its own process per routing mode, so the counts of one file are its own.

Compatibility with torch 2.13's torch.testing._internal: the newest stored
test_scatter_gather_ops.py imports all_passthru_types / all_passthru_types_and (common_dtype)
and gfx_arch_supports_opportunistic_fastatomics (common_cuda), which 2.13 lacks. When missing,
the child adds them: the dtype lists as all_types_and_complex_and(bool, half, bfloat16,
uint16, uint32, uint64) plus the extra dtypes passed (our reading of "passthru": every dtype a
gather moves), the ROCm predicate as False. The test file itself is not changed.
"""
from __future__ import annotations

import argparse
import datetime
import hashlib
import json
import os
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
FILES = ("test_indexing.py", "test_scatter_gather_ops.py")
# Tests that allocate more than this shared 23 GB machine can give (test_gather_large: ~20 GB
# for bfloat16; test_index_put_accumulate_large_tensor: 2^31 + 5 int8 twice, 6 GB at peak).
DESELECT = {
    "test_scatter_gather_ops.py": ["TestScatterGatherCPU::test_gather_large_cpu_bfloat16",
                                   "TestScatterGatherCPU::test_gather_large_cpu_int8"],
    "test_indexing.py": ["TestIndexingCPU::test_index_put_accumulate_large_tensor_cpu"],
}


def git_blob_sha(path: Path) -> str:
    data = path.read_bytes()
    return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()


def _compat_shims() -> list:
    import torch
    import torch.testing._internal.common_dtype as cd

    added = []
    if not hasattr(cd, "all_passthru_types"):
        extra = (torch.bool, torch.half, torch.bfloat16, torch.uint16, torch.uint32, torch.uint64)

        def all_passthru_types_and(*dtypes):
            return cd.all_types_and_complex_and(*extra, *dtypes)

        def all_passthru_types():
            return all_passthru_types_and()

        cd.all_passthru_types = all_passthru_types
        cd.all_passthru_types_and = all_passthru_types_and
        added = ["all_passthru_types", "all_passthru_types_and"]
    import torch.testing._internal.common_cuda as cc

    if not hasattr(cc, "gfx_arch_supports_opportunistic_fastatomics"):
        cc.gfx_arch_supports_opportunistic_fastatomics = lambda: False  # ROCm only
        added.append("gfx_arch_supports_opportunistic_fastatomics")
    return added


def child(path: str, routing: bool, out: str, deselect: list) -> int:
    import pytest

    shims = _compat_shims()
    import stridewise

    outcomes = {"passed": 0, "failed": 0, "skipped": 0, "xfailed": 0, "xpassed": 0, "error": 0}
    failed = []

    class Collect:
        def pytest_runtest_logreport(self, report):
            if report.when == "call" or (report.when == "setup" and report.outcome != "passed"):
                if hasattr(report, "wasxfail"):
                    key = "xfailed" if report.outcome == "skipped" else "xpassed"
                elif report.when == "setup" and report.outcome == "failed":
                    key = "error"
                else:
                    key = report.outcome
                outcomes[key] += 1
                if key in ("failed", "error"):
                    failed.append(report.nodeid.split("::", 1)[1])

    if routing:
        stridewise.enable()
    stridewise.reset_stats()
    t0 = time.time()
    args = [path, "-q", "-p", "no:cacheprovider", "-p", "no:xdist", "--tb=line"]
    for d in deselect:
        args += ["--deselect", f"{path}::{d}"]
    rc = pytest.main(args, plugins=[Collect()])
    seconds = time.time() - t0
    stats = stridewise.stats() if routing else {}
    stridewise.disable()
    ops = {}
    for op, s in sorted(stats.items()):
        if s["calls"] == 0:
            continue
        ops[op] = {"calls": s["calls"], "fallback": s["fallback"],
                   "fallback_reasons": {r: n for r, n in s.get("fallback_reasons", {}).items()
                                        if n}}
    Path(out).write_text(json.dumps({"outcomes": outcomes, "failed": sorted(failed),
                                     "ops": ops, "pytest_rc": int(rc), "shims": shims,
                                     "seconds": round(seconds, 1)}))
    return 0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--tests", type=Path, help="directory holding PyTorch's test files")
    ap.add_argument("--files", nargs="*", default=list(FILES))
    ap.add_argument("--out", type=Path, default=ROOT / "bench" / "results" / "pytorch_suite.json")
    ap.add_argument("--child", help=argparse.SUPPRESS)
    ap.add_argument("--routing", choices=["on", "off"], help=argparse.SUPPRESS)
    ap.add_argument("--child-out", help=argparse.SUPPRESS)
    ap.add_argument("--deselect", nargs="*", default=[], help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.child:
        return child(a.child, a.routing == "on", a.child_out, a.deselect)
    if a.tests is None:
        ap.error("--tests DIR is required")
    a.out = a.out.resolve()  # the children run in DIR

    import torch

    head = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "--short=7", "HEAD"],
                          capture_output=True, text=True).stdout.strip()
    dirty = subprocess.run(["git", "-C", str(ROOT), "status", "--porcelain", "--",
                            "adapter", "core"], capture_output=True, text=True).stdout.strip()
    result = {"date": datetime.date.today().isoformat(), "torch": torch.__version__,
              "stridewise": head + (" + uncommitted changes" if dirty else ""),
              "cpu_capability": torch.backends.cpu.get_cpu_capability(),
              "command": "PYTHONPATH=python python scripts/pytorch_suite.py --tests DIR "
                         "--out bench/results/pytorch_suite.json",
              "files": {}}
    env = dict(os.environ, PYTORCH_TESTING_DEVICE_ONLY_FOR="cpu")
    # The children run in DIR: a relative PYTHONPATH (PYTHONPATH=python) must stay valid there.
    env["PYTHONPATH"] = os.pathsep.join(str(Path(p).resolve())
                                        for p in env.get("PYTHONPATH", "").split(os.pathsep) if p)
    for name in a.files:
        path = (a.tests / name).resolve()
        entry = {"git_blob": git_blob_sha(path), "deselected": DESELECT.get(name, [])}
        for mode in ("on", "off"):
            tmp = a.out.with_suffix(f".{Path(name).stem}.{mode}.tmp")
            cmd = [sys.executable, __file__, "--child", str(path), "--routing", mode,
                   "--child-out", str(tmp), "--deselect", *entry["deselected"]]
            print(f"== {name}, routing {mode}", flush=True)
            subprocess.run(cmd, env=env, cwd=path.parent, check=True)
            entry[f"routing_{mode}"] = json.loads(tmp.read_text())
            tmp.unlink()
        result["files"][name] = entry
    a.out.parent.mkdir(parents=True, exist_ok=True)
    a.out.write_text(json.dumps(result, indent=1, sort_keys=True) + "\n")
    for name, e in result["files"].items():
        for mode in ("on", "off"):
            print(name, mode, e[f"routing_{mode}"]["outcomes"], e[f"routing_{mode}"]["seconds"], "s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
