#!/usr/bin/env python3
"""Host time of one gather call on the seed's launch-bound shape, ATen vs stridewise, and
where it goes.

    PYTHONPATH=python python3 bench/bench_host.py [--calls 200] [--batches 50]

Rows (x (4,16,384), index full((4,1,1), 15).expand(4,1,384), dim 1, each dtype):
  aten        torch.gather (ATen's CUDA kernel)
  routed      torch.gather under stridewise.use(include=["gather"]): the same Python binding,
              dispatcher and autograd kernel as ATen; only the CUDA kernel differs
  torch.ops   torch.ops.stridewise.gather: torch.ops' Python dispatch + our autograd kernel
  empty       torch.empty of out's shape: the allocation both kernels make
Host us/call: calls back-to-back with no synchronization, perf_counter around a batch (the
GPU, a few us per call, keeps up, so the batch time is the host's); median over batches.
GPU us/call: the same calls captured in a CUDA graph and replayed (no host work at all).
The core's own share (plan, launch path, bare launch) comes from build-gpu/bench/sw_host_overhead.
"""
from __future__ import annotations

import argparse
import statistics
import sys
import time

import torch


def host_us(fn, calls, batches):
    for _ in range(3):
        fn()
    torch.cuda.synchronize()
    per = []
    for _ in range(batches):
        t0 = time.perf_counter()
        for _ in range(calls):
            fn()
        t1 = time.perf_counter()
        torch.cuda.synchronize()
        per.append((t1 - t0) * 1e6 / calls)
    return statistics.median(per)


def graph_us(fn, calls, reps=20):
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        fn()
    torch.cuda.current_stream().wait_stream(s)
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        for _ in range(calls):
            fn()
    g.replay()
    torch.cuda.synchronize()
    times = []
    for _ in range(reps):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        g.replay()
        b.record()
        b.synchronize()
        times.append(a.elapsed_time(b) * 1e3 / calls)
    return statistics.median(times)


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--calls", type=int, default=200)
    p.add_argument("--batches", type=int, default=50)
    p.add_argument("--dtypes", default="float32,float16,bfloat16")
    args = p.parse_args(argv)
    if not torch.cuda.is_available():
        raise SystemExit("no CUDA device: this benchmark needs the GPU machine")
    import stridewise as sw

    dev = torch.device("cuda", torch.cuda.current_device())
    print(f"# host time per gather call, seed shape ({time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())})")
    print(f"- {torch.cuda.get_device_name(dev)}, torch {torch.__version__}, CUDA {torch.version.cuda}, "
          f"python {sys.version.split()[0]}; command: `{' '.join([sys.executable] + sys.argv)}`\n")
    print("| dtype | aten host us | routed host us | torch.ops host us | empty host us | "
          "routed/aten host | aten GPU us | ours GPU us |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|")
    for name in [d for d in args.dtypes.split(",") if d]:
        dt = getattr(torch, name)
        x = torch.randn((4, 16, 384), device=dev).to(dt)
        idx = torch.full((4, 1, 1), 15, dtype=torch.int64, device=dev).expand(4, 1, 384)
        aten = lambda: torch.gather(x, 1, idx)  # noqa: E731
        op = torch.ops.stridewise.gather
        ops = lambda: op(x, 1, idx)  # noqa: E731
        empty = lambda: torch.empty((4, 1, 384), dtype=dt, device=dev)  # noqa: E731
        assert torch.equal(ops(), aten())
        h_aten = host_us(aten, args.calls, args.batches)
        with sw.use(include=["gather"]):
            sw.reset_stats()
            h_routed = host_us(aten, args.calls, args.batches)
            routed_calls = sw.stats()["gather"]["calls"]
            g_ours = graph_us(aten, args.calls)
        if routed_calls == 0:
            raise SystemExit("the routed calls did not reach stridewise")
        h_ops = host_us(ops, args.calls, args.batches)
        h_empty = host_us(empty, args.calls, args.batches)
        g_aten = graph_us(aten, args.calls)
        print(f"| {name} | {h_aten:.2f} | {h_routed:.2f} | {h_ops:.2f} | {h_empty:.2f} | "
              f"{h_routed / h_aten:.2f} | {g_aten:.2f} | {g_ours:.2f} |", flush=True)


if __name__ == "__main__":
    main()
