#!/usr/bin/env python3
"""A model's training step with stridewise on against native (issue 41): the shapes users train
(bench/train_cases.py: GNN, scatter- and index-style MoE, a language model's embedding and
sampled head, a sparse row update, a transformers GPT-2 from a config), in the same process.

Per case and dtype:
- **step time**: CUDA events (CPU: perf_counter) around one whole step (forward, backward, SGD),
  native and stridewise alternating, one repetition each, after warm-up; medians, and the
  spread of the per-pair ratios (their 10th and 90th percentiles: a gain inside it is noise);
- **routed calls per step**: stridewise.stats() over the timed steps, fallbacks named;
- **the routed ops' share** of a step and what their gains predict: one profiled step each way
  (torch.profiler, after one unprofiled step): the device time (CPU: the ops' own CPU time) of
  the aten ops stridewise routes (``torch.ops.stridewise._op_table()``), each op's self time
  (a composite native op's child is counted once). Predicted speedup = T / (T - R + R_sw),
  with T the profiled native step's device busy time (CPU: its ops' CPU time), R the routed
  ops' time in it and R_sw theirs with stridewise; "kept" = (speedup - 1) / (predicted - 1) is
  what the step keeps of its ops' gain (not given where they predict less than 2%);
- ``--breakdown``: per routed aten op, calls, device time and host time per call, native and
  stridewise (the table the docs give for a step under 1.05x).

  PYTHONPATH=python python3 bench/e2e_train.py                 # CUDA if present, full sizes
  PYTHONPATH=python python3 bench/e2e_train.py --device cpu --size smoke --reps 2
  options: --cases a,b --dtypes float32,bfloat16 --reps N --warmup N --breakdown
           --json FILE --markdown FILE --plot FILE.png
"""
from __future__ import annotations

import argparse
import datetime
import json
import os
import statistics
import sys
import warnings

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "python"))
sys.path.insert(0, HERE)

import stridewise  # noqa: E402
import e2e_scatter  # noqa: E402
import train_cases  # noqa: E402


sync = e2e_scatter.sync


def routed_names() -> dict:
    """aten op name (as the profiler prints it) -> stridewise op that routes it."""
    out = {}
    for line in torch.ops.stridewise._op_table():
        op, _family, *atens = line.split()
        for a in atens:
            out[f"aten::{a}"] = op
    return out


def profile(step, device) -> dict:
    """One profiled step: {aten name: {"calls", "device_us", "host_us"}} for the routed aten
    ops, and "_total_us": the step's device (CPU: wall) time."""
    from torch.profiler import ProfilerActivity, profile as prof

    acts = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if device == "cuda" else [])
    names = routed_names()
    step()  # the profiler's own first-use costs land on this step, not the measured one
    sync(device)
    with prof(activities=acts) as p:
        step()
        sync(device)
    out: dict = {}
    busy = 0.0
    for e in p.key_averages():
        own = getattr(e, "self_device_time_total", getattr(e, "self_cuda_time_total", 0.0))
        busy += own if device == "cuda" else e.self_cpu_time_total
        if e.key not in names:
            continue
        # self times: a composite routed op (native embedding runs index_select) would count its
        # child's kernels twice in totals
        dev = getattr(e, "self_device_time_total", None)
        if dev is None:
            dev = getattr(e, "self_cuda_time_total", 0.0)
        out[e.key] = {"calls": e.count, "host_us": e.self_cpu_time_total,
                      "device_us": dev if device == "cuda" else e.self_cpu_time_total}
    out["_total_us"] = busy  # the step's device busy time (CPU: its ops' own CPU time)
    return out


def routed_us(pr: dict) -> float:
    return sum(v["device_us"] for k, v in pr.items() if not k.startswith("_"))


def run_case(name, dtype, a) -> dict:
    build, _ = train_cases.CASES[name]
    dt = getattr(torch, dtype)
    step, meta = build(a.device, dt, a.size)
    nat, ours = e2e_scatter.alternate(step, a.device, a.reps, a.warmup)
    st = stridewise.stats()
    calls = {op: v["calls"] // a.reps for op, v in st.items() if v.get("calls")}
    falls = {op: v["fallback_reasons"] for op, v in st.items() if v.get("fallback")}
    p_nat = profile(step, a.device)
    with stridewise.use():
        p_sw = profile(step, a.device)
    mn, mo = statistics.median(nat), statistics.median(ours)
    ratios = sorted(n / o for n, o in zip(nat, ours))
    lo = ratios[int(0.1 * (len(ratios) - 1))]
    hi = ratios[int(round(0.9 * (len(ratios) - 1)))]
    r_nat, r_sw = routed_us(p_nat), routed_us(p_sw)
    t_nat = p_nat["_total_us"]  # the profiled native step: share and prediction in one clock
    predicted = t_nat / max(1e-9, t_nat - r_nat + r_sw)
    speedup = mn / mo
    return {"case": name, "dtype": dtype, "size": meta["size"], "native_ms": mn, "stridewise_ms": mo,
            "speedup": speedup, "spread": [lo, hi], "routed_calls": calls, "fallbacks": falls,
            "routed_share_native": r_nat / t_nat if t_nat else 0.0,
            "routed_us_native": r_nat, "routed_us_stridewise": r_sw, "profiled_us_native": t_nat,
            "predicted": predicted,
            # what the step keeps of its ops' predicted gain (no figure where they predict none)
            "kept": (speedup - 1) / (predicted - 1) if abs(predicted - 1) >= 0.02 else None,
            "breakdown": {k: {"native": p_nat.get(k), "stridewise": p_sw.get(k)}
                          for k in sorted(set(p_nat) | set(p_sw)) if not k.startswith("_")}}


def table(rows, a) -> list:
    lines = ["| case | dtype | size | routed calls/step | native ms | stridewise ms | native/stridewise "
             "(10-90%) | routed share | predicted | kept of predicted |",
             "|---|---|---|---:|---:|---:|---|---:|---:|---:|"]
    for r in rows:
        kept = "-" if r["kept"] is None else f"{100 * r['kept']:.0f}%"
        falls = f" ({sum(sum(v.values()) for v in r['fallbacks'].values())} fallbacks)" if r["fallbacks"] else ""
        lines.append(f"| {r['case']} | {r['dtype']} | {r['size']} | {sum(r['routed_calls'].values())}{falls} | "
                     f"{r['native_ms']:.3f} | {r['stridewise_ms']:.3f} | {r['speedup']:.2f} "
                     f"({r['spread'][0]:.2f}-{r['spread'][1]:.2f}) | {100 * r['routed_share_native']:.0f}% | "
                     f"{r['predicted']:.2f} | {kept} |")
    if a.breakdown:
        for r in rows:
            lines += ["", f"**{r['case']} {r['dtype']}**: per routed aten op, one profiled step "
                      f"(device us and host us in all its calls; native / stridewise)", "",
                      "| aten op | calls | native device us | stridewise device us | native host us | stridewise host us |",
                      "|---|---:|---:|---:|---:|---:|"]
            for k, v in r["breakdown"].items():
                n, s = v["native"] or {}, v["stridewise"] or {}
                lines.append(f"| {k} | {n.get('calls', s.get('calls', 0))} | {n.get('device_us', 0):.0f} | "
                             f"{s.get('device_us', 0):.0f} | {n.get('host_us', 0):.0f} | {s.get('host_us', 0):.0f} |")
    return lines


def plot(rows, path, title):
    """A bar per case and dtype: native/stridewise step speedup, whiskers at the spread's 10th
    and 90th percentiles, the 1.0x line."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    labels = [f"{r['case']}\n{r['dtype']}" for r in rows]
    sp = [r["speedup"] for r in rows]
    err = [[max(0.0, s - r["spread"][0]) for s, r in zip(sp, rows)],
           [max(0.0, r["spread"][1] - s) for s, r in zip(sp, rows)]]
    fig, ax = plt.subplots(figsize=(max(6.0, 0.7 * len(rows)), 4.0))
    ax.bar(range(len(rows)), sp, yerr=err, capsize=3,
           color=["tab:green" if s >= 1.0 else "tab:red" for s in sp])
    ax.axhline(1.0, color="black", linewidth=0.8)
    ax.set_xticks(range(len(rows)), labels, rotation=60, ha="right", fontsize=7)
    ax.set_ylabel("training step, native / stridewise")
    ax.set_title(title, fontsize=9)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    p.add_argument("--size", choices=("full", "smoke"), default=None,
                   help="full: the issue's sizes (default on cuda); smoke: tiny (default on cpu)")
    p.add_argument("--cases", default=",".join(train_cases.CASES))
    p.add_argument("--dtypes", default="float32,bfloat16")
    p.add_argument("--reps", type=int, default=10)
    p.add_argument("--warmup", type=int, default=3)
    p.add_argument("--breakdown", action="store_true", help="per routed aten op, native and stridewise")
    p.add_argument("--json")
    p.add_argument("--markdown")
    p.add_argument("--plot", help="a bar chart of the steps' speedups (PNG)")
    a = p.parse_args(argv)
    a.size = a.size or ("full" if a.device == "cuda" else "smoke")
    warnings.filterwarnings("ignore")
    cuda = a.device == "cuda"
    dev = torch.cuda.get_device_name(0) if cuda else f"CPU ({torch.get_num_threads()} threads)"
    head = [f"# Training steps, native vs stridewise ({datetime.datetime.now(datetime.timezone.utc):%Y-%m-%d %H:%M UTC})",
            f"device: {dev}; torch {torch.__version__}; stridewise {stridewise.__version__}; size {a.size}; "
            f"median of {a.reps} alternating steps after {a.warmup} warm-up", ""]
    print("\n".join(head), flush=True)
    rows = []
    wanted = a.dtypes.split(",")
    for name in a.cases.split(","):
        if name not in train_cases.CASES:
            p.error(f"unknown case {name!r}; known: {', '.join(train_cases.CASES)}")
        for dtype in train_cases.CASES[name][1]:
            if dtype not in wanted:
                continue
            rows.append(run_case(name, dtype, a))
            print(table(rows[-1:], argparse.Namespace(breakdown=False))[-1], flush=True)
            if cuda:
                torch.cuda.empty_cache()
    lines = head + table(rows, a)
    print("\n".join(table(rows, a)))
    if a.markdown:
        with open(a.markdown, "w") as f:
            f.write("\n".join(lines) + "\n")
    if a.plot and rows:
        plot(rows, a.plot, f"{dev}, torch {torch.__version__}, "
             f"{datetime.datetime.now(datetime.timezone.utc):%Y-%m-%d}: training step speedup")
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"device": dev, "torch": torch.__version__, "size": a.size, "reps": a.reps,
                       "rows": rows}, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
