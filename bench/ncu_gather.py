#!/usr/bin/env python3
"""Nsight Compute counters for ATen's and stridewise's kernels on the cases of bench_gather.py
(and the cases of bench_index.py, bench_adv.py and bench_scatter.py: index_select, x[i], x[i, j],
take, index_add, the scatter family), one call each, side by side.

    PYTHONPATH=python python3 bench/ncu_gather.py --cases transposed,rank6 --dtypes float32
    PYTHONPATH=python python3 bench/ncu_gather.py --cases index:select_rows_nc,adv:take,adv:rows
    PYTHONPATH=python python3 bench/ncu_gather.py --cases scatter:last_add_64 --variants auto,det
    PYTHONPATH=python python3 bench/ncu_gather.py --child transposed float32   (what ncu runs)

A case named suite:case comes from bench_index.py ("index"), bench_adv.py ("adv") or
bench_scatter.py ("scatter"); a bare name from bench_gather.py. The variant "det" runs both
calls in deterministic mode (torch.use_deterministic_algorithms). The child marks ATen's call and ours with NVTX ranges "aten" and "ours"
and ncu profiles only the kernels inside them (the inputs' own kernels stay out).

For every (case, dtype) the driver runs `ncu --clock-control none` over a child process that
builds the case's first input set (the same generator and seed as the benchmark), runs the
case's call with ATen's kernel and then routed to stridewise (`stridewise.use`), once each (ncu
replays each kernel for its counters, so no warm-up is needed). Set STRIDEWISE_GATHER_CUDA_KERNEL in the
environment to profile a forced kernel (see docs/gather_cuda.md); --variants runs several.

Columns: kernel time; DRAM bytes and % of peak; L2 (lts) sectors and hit rate; L1 global-load
sectors per request and hit rate; global-store sectors per request; achieved and theoretical
occupancy; registers per thread; instructions; the share of warps stalled on a long scoreboard
(waiting for memory), on the LSU queue (lg throttle), on shared memory (short scoreboard), on
the MIO queue and at a barrier. The table goes to stdout and, with
--md, to a file.
"""
from __future__ import annotations

import argparse
import csv
import io
import os
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
# The child opens the "ours" range with torch.cuda._sleep (ATen's spin_kernel): the rows after
# that marker are ours, whatever their names (CUB's sorts, a fill), the rows before it ATen's.
MARKER = "spin_kernel"

CORE = [
    "gpu__time_duration.sum",
    "dram__bytes_read.sum", "dram__bytes_write.sum",
    "dram__throughput.avg.pct_of_peak_sustained_elapsed",
    "lts__t_sectors.sum", "lts__t_sector_hit_rate.pct",
    "l1tex__t_sectors_pipe_lsu_mem_global_op_ld.sum", "l1tex__t_requests_pipe_lsu_mem_global_op_ld.sum",
    "l1tex__t_sectors_pipe_lsu_mem_global_op_st.sum", "l1tex__t_requests_pipe_lsu_mem_global_op_st.sum",
    "l1tex__t_sector_hit_rate.pct",
    "sm__warps_active.avg.pct_of_peak_sustained_active", "sm__maximum_warps_per_active_cycle_pct",
    "launch__registers_per_thread", "launch__grid_size", "launch__block_size",
    "smsp__inst_executed.sum",
]
STALLS = [
    "smsp__warp_issue_stalled_long_scoreboard_per_warp_active.pct",
    "smsp__warp_issue_stalled_lg_throttle_per_warp_active.pct",
    # shared memory (the bins' and tiles' atomics): short scoreboard and MIO queue
    "smsp__warp_issue_stalled_short_scoreboard_per_warp_active.pct",
    "smsp__warp_issue_stalled_mio_throttle_per_warp_active.pct",
    "smsp__warp_issue_stalled_barrier_per_warp_active.pct",
]


def _call(case, dtype, device, gen):
    """(call, ops): the case's call on its first input set and the ops stridewise must route."""
    import torch

    sys.path.insert(0, str(ROOT / "bench"))
    suite, _, name = case.rpartition(":")
    if suite == "index":
        import bench_index as bi
        make, op = bi.CASES[name]
        out, idx, self_, fn, _, _ = make(dtype, device, gen, 1)
        return (lambda: fn(out, idx, self_)), [op]
    if suite == "scatter":
        import bench_scatter as bs
        out, idx, src, fn, _, _ = bs.MAKERS[name](dtype, device, gen, 1)
        return (lambda: fn(out, idx, src)), [bs.OP_OF.get(name, "scatter_reduce")]
    if suite == "adv":
        import bench_adv as ba
        make, op, _ = ba.CASES[name]
        c = make(dtype, device, gen, 1)
        return (lambda: c.fn(*c.args)), [op]
    import bench_gather as bg
    x, dim, idx, _ = bg.MAKERS[name](dtype, device, gen, 1)
    return (lambda: torch.gather(x, dim, idx)), ["gather"]


def child(case, dtype_name):
    import torch

    sys.path.insert(0, str(ROOT / "bench"))
    import bench_gather as bg
    import stridewise as sw

    device = torch.device("cuda", torch.cuda.current_device())
    gen = torch.Generator(device=device)
    gen.manual_seed(1234)
    call, ops = _call(case, bg.DTYPES[dtype_name], device, gen)
    torch.use_deterministic_algorithms(os.environ.get("SW_NCU_DET") == "1")
    torch.cuda.synchronize()
    torch.cuda.nvtx.range_push("aten")
    call()
    torch.cuda.nvtx.range_pop()
    torch.cuda.synchronize()
    with sw.use(include=ops):
        torch.cuda.nvtx.range_push("ours")
        torch.cuda._sleep(1)
        call()
        torch.cuda.nvtx.range_pop()
    torch.cuda.synchronize()


def run_ncu(ncu, case, dtype_name, metrics, env):
    cmd = [ncu, "--clock-control", "none", "--print-units", "base", "--target-processes", "all",
           "--nvtx", "--nvtx-include", "aten/", "--nvtx-include", "ours/",
           "--csv", "--page", "raw", "--metrics", ",".join(metrics),
           sys.executable, str(Path(__file__).resolve()), "--child", case, dtype_name]
    p = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=600)
    return p.returncode, p.stdout, p.stderr


def parse(stdout):
    lines = [ln for ln in stdout.splitlines() if ln.startswith('"')]
    if not lines:
        return []
    rows = list(csv.DictReader(io.StringIO("\n".join(lines))))
    return [r for r in rows if r.get("Kernel Name") and r.get("ID", "").strip().isdigit()]


def num(r, key, scale=1.0):
    v = (r.get(key) or "").replace(",", "").strip()
    try:
        return float(v) * scale
    except ValueError:
        return float("nan")


def sides(rows):
    """(row, "ATen" | "ours") in launch order, the marker row left out."""
    rows = sorted(rows, key=lambda r: int(r["ID"]))
    at = next((i for i, r in enumerate(rows) if MARKER in r["Kernel Name"]), len(rows))
    return [(r, "ATen") for r in rows[:at]] + [(r, "ours") for r in rows[at + 1:]]


def fmt_row(case, dtype_name, variant, r, who):
    name = r["Kernel Name"]
    short = name.split("<")[0].split("(")[0][-34:]
    dur_us = num(r, "gpu__time_duration.sum") / 1e3  # ns
    ld_req = num(r, "l1tex__t_requests_pipe_lsu_mem_global_op_ld.sum")
    st_req = num(r, "l1tex__t_requests_pipe_lsu_mem_global_op_st.sum")
    ld_spr = num(r, "l1tex__t_sectors_pipe_lsu_mem_global_op_ld.sum") / ld_req if ld_req else float("nan")
    st_spr = num(r, "l1tex__t_sectors_pipe_lsu_mem_global_op_st.sum") / st_req if st_req else float("nan")
    dram_mb = (num(r, "dram__bytes_read.sum") + num(r, "dram__bytes_write.sum")) / 1e6
    cells = [case, dtype_name, f"{who}{' ' + variant if variant else ''}", short,
             f"{dur_us:.1f}", f"{dram_mb:.0f}", f"{num(r, 'dram__throughput.avg.pct_of_peak_sustained_elapsed'):.0f}%",
             f"{num(r, 'lts__t_sectors.sum') / 1e6:.1f}", f"{num(r, 'lts__t_sector_hit_rate.pct'):.0f}%",
             f"{ld_spr:.1f}", f"{num(r, 'l1tex__t_sector_hit_rate.pct'):.0f}%", f"{st_spr:.1f}",
             f"{num(r, 'sm__warps_active.avg.pct_of_peak_sustained_active'):.0f}%/"
             f"{num(r, 'sm__maximum_warps_per_active_cycle_pct'):.0f}%",
             f"{num(r, 'launch__registers_per_thread'):.0f}",
             f"{num(r, 'smsp__inst_executed.sum') / 1e6:.1f}",
             *(f"{num(r, k):.0f}%" for k in STALLS)]
    return "| " + " | ".join(cells) + " |"


HEAD = ("| case | dtype | who | kernel | us | DRAM MB | DRAM % | L2 Msectors | L2 hit | ld sect/req | L1 hit | "
        "st sect/req | occupancy ach/theo | regs | Minst | stall mem | stall lsu | stall smem | stall mio | "
        "stall barrier |\n"
        "|---|---|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--child", nargs=2, metavar=("CASE", "DTYPE"), help=argparse.SUPPRESS)
    p.add_argument("--cases", default="contig,transposed,topk,clustered,rank6,scattered")
    p.add_argument("--dtypes", default="float32,float16")
    p.add_argument("--variants", default="auto",
                   help="comma list of STRIDEWISE_GATHER_CUDA_KERNEL values for ours (auto = unset; "
                        "det = unset, both calls in deterministic mode)")
    p.add_argument("--variant-cases", default=None,
                   help="comma list: run the non-auto variants only for these cases (default all)")
    p.add_argument("--md", default=None, help="also write the table here")
    args = p.parse_args(argv)
    if args.child:
        child(*args.child)
        return 0
    ncu = shutil.which("ncu") or "/usr/local/cuda/bin/ncu"
    lines, failures = [HEAD], 0
    for case in [c for c in args.cases.split(",") if c]:
        for d in [d for d in args.dtypes.split(",") if d]:
            variants = [v for v in args.variants.split(",") if v]
            if args.variant_cases is not None and case not in args.variant_cases.split(","):
                variants = ["auto"]
            for vi, variant in enumerate(variants):
                env = dict(os.environ)
                env.pop("STRIDEWISE_GATHER_CUDA_KERNEL", None)
                env["SW_NCU_DET"] = "1" if variant == "det" else "0"
                if variant not in ("auto", "det"):
                    env["STRIDEWISE_GATHER_CUDA_KERNEL"] = variant
                metrics = CORE + STALLS
                rc, out, err = run_ncu(ncu, case, d, metrics, env)
                if rc != 0 or not parse(out):  # an unknown stall metric on this ncu: retry without
                    rc, out, err = run_ncu(ncu, case, d, CORE, env)
                rows = parse(out)
                if rc != 0 or not rows:
                    failures += 1
                    print(f"ncu failed for {case}/{d}/{variant} (rc {rc}):\n{err[-2000:]}\n{out[-2000:]}",
                          file=sys.stderr)
                    continue
                for r, who in sides(rows):
                    if who == "ATen" and vi > 0 and variant != "det":
                        continue  # ATen once per case (and once in deterministic mode)
                    lines.append(fmt_row(case, d, "" if variant == "auto" else variant, r, who))
                print(lines[-1], flush=True)
    text = "\n".join(lines) + "\n"
    print(text)
    if args.md:
        Path(args.md).write_text(text)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
