#!/usr/bin/env python3
"""Dump and compare throughput on a transformers BERT, forward and backward (issue 25).

    python3 bench/bench_dump_compare.py                  # default device (cuda when present)
    python3 bench/bench_dump_compare.py --quick          # tiny model: a smoke run, any machine

One untimed warm-up step, then per run: a step without the dump (the model's own time), a
native step under ``stridewise.dump`` and a step routed through ``stridewise.use()`` under it.
Dump MB/s = bytes the dump stored / wall time of the dumped step (synchronized); the overhead
is that time over the undumped step's. Then ``sw-compare native routed`` (JSON): compare GB/s is
the bytes it read (both sides) over its engine's seconds, and over the process's wall time; the
verdict must be PASS. Prints one JSON object and a markdown table; --repeat medians the times.
"""
from __future__ import annotations

import argparse
import contextlib
import datetime
import json
import os
import shutil
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "python"))


def sync(device):
    import torch
    if device == "cuda":
        torch.cuda.synchronize()


def baselines(torch, device, base, nbytes):
    """What the dump's bytes cost without the dump, in the same run: one device-to-host copy
    into pageable memory (as the dump copies), one write of that buffer into the dump's
    directory (page cache) and one with fsync (what fsync="shard" waits for), and one read of
    the file back (what sw-compare reads; page cache warm)."""
    from stridewise.dump._writer import pwrite_all
    x = torch.empty(nbytes, dtype=torch.uint8, device=device).fill_(7)
    sync(device)
    t0 = time.perf_counter()
    host = x.to("cpu")
    sync(device)
    d2h = time.perf_counter() - t0
    buf = host.numpy()
    out = {"d2h_mb_per_s": nbytes / 1e6 / d2h if device != "cpu" else None}  # no copy on the CPU
    path = base / "probe.bin"
    for key, do_sync in (("write_mb_per_s", False), ("write_fsync_mb_per_s", True)):
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        t0 = time.perf_counter()
        pwrite_all(fd, buf, 0)
        if do_sync:
            os.fsync(fd)
        out[key] = nbytes / 1e6 / (time.perf_counter() - t0)
        os.close(fd)
    t0 = time.perf_counter()
    with open(path, "rb", buffering=0) as f:
        chunk = bytearray(4 << 20)
        while f.readinto(chunk):
            pass
    out["read_mb_per_s"] = nbytes / 1e6 / (time.perf_counter() - t0)
    os.unlink(path)
    return out


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--device", default=None)
    ap.add_argument("--hidden", type=int, default=768)
    ap.add_argument("--layers", type=int, default=4)
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--seq", type=int, default=128)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--quick", action="store_true", help="hidden 64, 2 layers, batch 2, seq 12, 1 repeat")
    ap.add_argument("--dir", default=None, help="where the dumps go (default: a temporary directory)")
    ap.add_argument("--json", default=None, help="also write the result here")
    ap.add_argument("--probe-mib", type=int, default=1024, help="size of the copy baselines (MiB)")
    args = ap.parse_args(argv)
    if args.quick:
        args.hidden, args.layers, args.batch, args.seq, args.repeat = 64, 2, 2, 12, 1
    import torch
    from transformers import BertConfig, BertModel

    import stridewise
    import stridewise.dump as swdump
    from stridewise.dump.compare import find_compare_binary

    device = args.device or ("cuda" if torch.cuda.is_available() else "cpu")
    if device == "cuda":
        os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")
        torch.use_deterministic_algorithms(True, warn_only=True)  # two runs agree bitwise
    torch.manual_seed(0)
    heads = max(1, args.hidden // 64)
    cfg = BertConfig(vocab_size=30522, hidden_size=args.hidden, num_hidden_layers=args.layers,
                     num_attention_heads=heads, intermediate_size=4 * args.hidden,
                     max_position_embeddings=max(512, args.seq))
    model = BertModel(cfg).train().to(device)
    tok = torch.randint(0, cfg.vocab_size, (args.batch, args.seq), device=device)
    gidx = torch.randint(0, args.hidden, (args.batch, args.seq, 8), device=device)

    def step():
        torch.manual_seed(1)  # dropout draws the same in every run
        model.zero_grad(set_to_none=True)
        out = model(tok).last_hidden_state
        (out.pow(2).mean() + torch.gather(out, 2, gidx).sum()).backward()
        sync(device)

    def timed(root=None, routed=False, fsync="shard"):
        with contextlib.ExitStack() as st:
            d = st.enter_context(swdump.dump(root, overwrite=True, fsync=fsync)) if root else None
            if routed:
                st.enter_context(stridewise.use())
            t0 = time.perf_counter()
            step()
            dt = time.perf_counter() - t0
        return dt, (d.stats if d else None)

    step()  # warm-up: allocator, cuBLAS handles, kernels
    tmp = contextlib.ExitStack()
    base = Path(args.dir) if args.dir else Path(tmp.enter_context(tempfile.TemporaryDirectory()))
    plain, dumped, routed, nosync = [], [], [], []
    stats = None
    for _ in range(args.repeat):
        plain.append(timed()[0])
        nosync.append(timed(base / "nosync", fsync="never")[0])
        shutil.rmtree(base / "nosync", ignore_errors=True)  # a large model's dumps fill the disk
        dt, stats = timed(base / "native")
        dumped.append(dt)
        routed.append(timed(base / "routed", routed=True)[0])
    copies = baselines(torch, device, base, args.probe_mib << 20)
    exe = find_compare_binary()
    t0 = time.perf_counter()
    proc = subprocess.run([exe, str(base / "native"), str(base / "routed"), "--format", "json"],
                          capture_output=True, text=True)
    cwall = time.perf_counter() - t0
    rep = json.loads(proc.stdout)
    eng = rep["engine"]
    nbytes = eng["bytes_a"] + eng["bytes_b"]
    med = statistics.median
    res = {
        "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%MZ"),
        "device": torch.cuda.get_device_name() if device == "cuda" else platform.processor() or platform.machine(),
        "torch": torch.__version__, "cpus": os.cpu_count(),
        "model": f"BertModel hidden {args.hidden}, {args.layers} layers, batch {args.batch} x seq {args.seq}",
        "ops": stats["ops"], "tensors": stats["tensors"], "dump_mb": stats["bytes"] / 1e6,
        "step_s": med(plain), "dumped_step_s": med(dumped), "routed_dumped_step_s": med(routed),
        "dump_mb_per_s": stats["bytes"] / 1e6 / med(dumped), "dump_overhead_x": med(dumped) / med(plain),
        "dump_mb_per_s_fsync_never": stats["bytes"] / 1e6 / med(nosync), **copies,
        "compare_gb": nbytes / 1e9, "compare_engine_s": eng["seconds"], "compare_wall_s": cwall,
        "compare_gb_per_s_engine": nbytes / 1e9 / eng["seconds"] if eng["seconds"] else None,
        "compare_gb_per_s_wall": nbytes / 1e9 / cwall, "compare_threads": eng["threads"],
        "verdict": rep["summary"]["verdict"], "exit_code": proc.returncode,
        "not_read": rep["summary"]["not_read"], "pairs": len(rep["entries"]),
    }
    tmp.close()
    print(json.dumps(res, indent=1))
    print(f"\n| device | model | dump MB | dump MB/s (fsync never) | copies: D2H / write / write+fsync MB/s | "
          f"dump overhead | compare GB (both sides) | compare GB/s (engine / wall, {res['compare_threads']} threads)"
          f" | read MB/s | verdict |\n|---|---|---|---|---|---|---|---|---|---|")
    print(f"| {res['device']} | {res['model']} | {res['dump_mb']:.0f} | {res['dump_mb_per_s']:.0f} "
          f"({res['dump_mb_per_s_fsync_never']:.0f}) | {res['d2h_mb_per_s'] or 0:.0f} / {res['write_mb_per_s']:.0f} / "
          f"{res['write_fsync_mb_per_s']:.0f} | {res['dump_overhead_x']:.1f}x | {res['compare_gb']:.2f} | "
          f"{res['compare_gb_per_s_engine'] or 0:.2f} / {res['compare_gb_per_s_wall']:.2f} | "
          f"{res['read_mb_per_s']:.0f} | {res['verdict']} |")
    if args.json:
        Path(args.json).write_text(json.dumps(res, indent=1) + "\n")
    if proc.returncode != 0:
        print(f"sw-compare exit {proc.returncode}: {rep['summary']} {rep.get('incomplete')}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
