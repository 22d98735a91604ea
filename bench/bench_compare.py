#!/usr/bin/env python3
"""Throughput and peak memory of sw-compare (tools/compare) on this machine.

    python3 bench/bench_compare.py                 # writes docs/compare_bench.md
    python3 bench/bench_compare.py --quick         # small sizes only, prints, writes nothing

Inputs are float32 .npy pairs (B = A with 1e-5 relative noise), written under --dir, read from
the page cache (one untimed warm-up run each). Throughput is bytes of one side / seconds as the
tool reports it (its own timer around the streaming reduction; the total read is twice that).
Peak RSS is the tool's VmHWM. A 5 GiB pair of sparse files (all zeros, no disk space used)
shows that memory does not grow with tensor size past 4 GiB.
"""
from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "python"))


def find_exe():
    import importlib.util
    spec = importlib.util.spec_from_file_location("_swc", ROOT / "python/stridewise/dump/compare.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod.find_compare_binary()


def write_pair(d: Path, name: str, n: int, rng):
    a_path, b_path = d / f"{name}_a.npy", d / f"{name}_b.npy"
    if not a_path.exists():
        chunk = 1 << 24
        for path, noise in ((a_path, False), (b_path, True)):
            arr = np.lib.format.open_memmap(path, mode="w+", dtype=np.float32, shape=(n,))
            r = np.random.default_rng(1234)
            for s in range(0, n, chunk):
                e = min(n, s + chunk)
                x = r.standard_normal(e - s, dtype=np.float32)
                if noise:
                    x = x * (1 + np.float32(1e-5) * rng.standard_normal(e - s, dtype=np.float32))
                arr[s:e] = x
            arr.flush()
            del arr
    return a_path, b_path


def write_sparse_pair(d: Path, nbytes: int):
    paths = []
    for side in "ab":
        p = d / f"sparse_{side}.npy"
        if not p.exists():
            n = nbytes // 4
            hdr = np.lib.format.header_data_from_array_1_0(np.zeros(1, np.float32))
            hdr["shape"] = (n,)
            with open(p, "wb") as f:
                np.lib.format.write_array_header_1_0(f, hdr)
                off = f.tell()
            os.truncate(p, off + n * 4)
        paths.append(p)
    return paths


def run_once(exe, a, b, threads):
    r0 = resource.getrusage(resource.RUSAGE_CHILDREN)
    p = subprocess.run([exe, str(a), str(b), "--format", "json", "--threads", str(threads)],
                       capture_output=True, text=True)
    r1 = resource.getrusage(resource.RUSAGE_CHILDREN)
    if p.returncode not in (0, 1):
        raise RuntimeError(p.stderr)
    eng = json.loads(p.stdout)["engine"]
    cpu = (r1.ru_utime - r0.ru_utime) + (r1.ru_stime - r0.ru_stime)
    return eng["bytes_a"], eng["seconds"], eng["peak_rss_bytes"], cpu


def measure(exe, a, b, threads, reps):
    run_once(exe, a, b, threads)  # warm the page cache
    res = [run_once(exe, a, b, threads) for _ in range(reps)]
    nbytes = res[0][0]
    secs = statistics.median(r[1] for r in res)
    rss = max(r[2] for r in res)
    cpu = statistics.median(r[3] for r in res)
    return nbytes, secs, rss, cpu


def compiler():
    try:
        return subprocess.run(["c++", "--version"], capture_output=True, text=True).stdout.splitlines()[0]
    except (OSError, IndexError):
        return "?"


def machine():
    cpu = "?"
    try:
        for line in open("/proc/cpuinfo"):
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    mem = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30
    return f"{cpu}, {os.cpu_count()} logical CPUs, {mem:.0f} GiB RAM, {platform.platform()}"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--dir", default=None, help="where the input files go (default: a temp dir, removed)")
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--quick", action="store_true", help="64 MiB only; print, do not write docs")
    ap.add_argument("--out", default=str(ROOT / "docs" / "compare_bench.md"))
    args = ap.parse_args()
    exe = find_exe()
    tmp = Path(args.dir) if args.dir else Path(tempfile.mkdtemp(prefix="swc_bench_"))
    tmp.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(0)
    sizes = [("64 MiB", 16 << 20)] if args.quick else [("64 MiB", 16 << 20), ("1 GiB", 256 << 20), ("2 GiB", 512 << 20)]
    rows = []
    load0 = os.getloadavg()
    try:
        for label, n in sizes:
            a, b = write_pair(tmp, label.replace(" ", ""), n, rng)
            for threads in (1, 2):
                nbytes, secs, rss, cpu = measure(exe, a, b, threads, args.reps)
                rows.append((f"float32 random, {label} per side", threads, nbytes, secs, rss, cpu))
                print(f"{rows[-1][0]:34s} threads={threads}: {nbytes / secs / 1e9:.2f} GB/s per side, "
                      f"{nbytes / max(cpu, 1e-9) / 1e9:.2f} GB/CPU-s, peak RSS {rss / 2**20:.1f} MiB", flush=True)
        if not args.quick:
            a, b = write_sparse_pair(tmp, 5 << 30)
            for threads in (1, 2):
                nbytes, secs, rss, cpu = measure(exe, a, b, threads, 1)
                rows.append(("float32 zeros (sparse file), 5 GiB per side", threads, nbytes, secs, rss, cpu))
                print(f"{rows[-1][0]:34s} threads={threads}: {nbytes / secs / 1e9:.2f} GB/s per side, "
                      f"{nbytes / max(cpu, 1e-9) / 1e9:.2f} GB/CPU-s, peak RSS {rss / 2**20:.1f} MiB", flush=True)
    finally:
        if not args.dir:
            shutil.rmtree(tmp, ignore_errors=True)
    load1 = os.getloadavg()
    if args.quick:
        return
    commit = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"], capture_output=True,
                            text=True).stdout.strip() or "?"
    lines = [
        "# sw-compare benchmark",
        "",
        f"- date: {datetime.datetime.now().astimezone().strftime('%Y-%m-%d %H:%M %Z')}",
        f"- machine: {machine()}",
        f"- command: `python3 bench/bench_compare.py` (reps {args.reps}, median; commit {commit}; binary {exe})",
        "- what: `sw-compare A.npy B.npy --format json --threads T`, files in the page cache (one warm-up run);",
        "  GB/s = bytes of one side / the tool's own timer around the streaming reduction (it reads",
        "  both sides, so twice that many bytes); peak RSS = the tool's VmHWM. The 5 GiB sparse row is one run.",
        f"- compiler: {compiler()}; sw-compare built with CMAKE_BUILD_TYPE=Release (-O3, -fopenmp-simd, AVX2 clone).",
        f"- load average (1, 5, 15 min) before: {load0[0]:.2f} {load0[1]:.2f} {load0[2]:.2f}; after: "
        f"{load1[0]:.2f} {load1[1]:.2f} {load1[2]:.2f}. The machine is shared with other builds: a load above",
        "  the CPU count means the wall-clock figures are lower bounds; 'GB per CPU-second' (bytes of one side /",
        "  the process's user+system CPU time) depends much less on it.",
        "",
        "| input | threads | bytes per side | seconds | GB/s per side | GB/s both sides | GB per CPU-second (per side) | peak RSS |",
        "|---|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for label, threads, nbytes, secs, rss, cpu in rows:
        lines.append(f"| {label} | {threads} | {nbytes:,} | {secs:.3f} | {nbytes / secs / 1e9:.2f} | "
                     f"{2 * nbytes / secs / 1e9:.2f} | {nbytes / max(cpu, 1e-9) / 1e9:.2f} | {rss / 2**20:.1f} MiB |")
    lines += ["", "Notes are in docs/compare.md (Performance).", ""]
    Path(args.out).write_text("\n".join(lines))
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
