#!/usr/bin/env python3
"""stridewise gather vs ATen's torch.gather (and FlagGems') on one CUDA device, measured in the same run.

    PYTHONPATH=python python3 bench/bench_gather.py                  # every case, 3 dtypes
    PYTHONPATH=python python3 bench/bench_gather.py --quick          # fewer repetitions
    PYTHONPATH=python python3 bench/bench_gather.py --cases seed,expanded --dtypes float16

Cases (dim 1 unless stated):
  seed        x (4,16,384), index full((4,1,1), 15).expand(4,1,384)        [the seed's repro]
  expanded    self (B,N,D), index randint(0,N,(B,K,1)).expand(B,K,D)      B,N,D,K = 64,4096,1024,1024
  contig      self (B,N,D), index randint(0,N,(B,K,D)) contiguous
  transposed  self (B,N,D), index randint(0,N,(B,D,K)).transpose(1,2): shape (B,K,D), strides
              (K*D, 1, K) -- the index is walked across its rows while out is written in order
  topk        self (M,V), index = top-k positions of a random score per row, (M,k), in [0,V)
              M,V,k = 65536,4096,256 (distinct positions per row, unsorted, like topk().indices)
  clustered   self (M,V), index = top-k positions over one window [o, o+W) of each row, plus o
              (o random per row): M,V,W,k = 65536,4096,512,256 -- values cluster in W of V
  clustered_sorted  clustered with each row's values sorted (a sorted window: torch.sort after
              topk, or a sliding window's positions)
  hot         self (M,V), each row's k = 256 values drawn from 8 columns every row shares (a few
              hot positions: an attention sink, a vocabulary's frequent ids)
  rows_t      self (N,D) stored transposed (randn(D,N).t()), index randint(0,N,(M,1)).expand(M,D),
              dim 0: rows of a transposed self, each element a column of the storage (N,D,M =
              65536,1024,32768; index_select(x.t(), 0, i)'s layout; the banded walk, issue 37)
  rank6       self and index both permuted in every dim: index logical (16,16,16,16,8,16), self
              the same with 32 along dim 2 (the gathered dim); self stored in dim order
              (3,5,0,4,2,1), index in (4,2,5,1,3,0), out contiguous (as ATen allocates it)
  scattered   self (N,D), index randint(0,N,(D,K)).t(): (K,D) column-major, dim 0 -- each
              column gathers its own scattered rows (N,D,K = 32768,2048,8192); out is written
              along D while the index runs along K (the transposed-tile layout in 2-D)

Method: CUDA events around batches of back-to-back calls (time per call = batch time / calls,
so launch-bound cases include host overhead), warm-up first, median over --reps batches.
Each call uses the next of S input sets, S = clamp(ceil(2 * L2 / set bytes), 3, 4096), so the
working set is at least twice the L2 and small cases are not measured from a warm L2. Ours,
ATen and a device copy run interleaved in the same loop on the same sets (order rotated per
repetition). Before timing, ours is checked bitwise against torch.gather on every set.
Bytes moved per call = out bytes written + out.numel() * self.element_size() (self elements
read) + index storage bytes actually addressed (numel / product of sizes of stride-0 dims, times
index.element_size()). The copy is dst.copy_(src) of out's size; its GB/s counts read + write.
The sync check mode's cost (stridewise.set_cuda_check_mode('sync')) is measured on the seed
case and on expanded/float16.
FlagGems (--flaggems auto|on|off, bench/fg_common.py; auto: on CUDA when `import flag_gems`
works) runs torch.gather under flag_gems.use_gems(include=["gather"]), timed in the same loop
where that changes the dispatcher's kernel of aten::gather ("FlagGems us", "FlagGems/ours" = our
speed-up over it), its result compared bitwise with torch.gather's on the first set (a
difference is marked "!", not fatal); else "-", the reason under the table and in the JSON row.

Output: the header (date, GPU, torch, CUDA, command line), the sync-mode table, then the main
table (printed last). Both plus raw JSON go to $OUT if set, else bench/results/.
"""
from __future__ import annotations

import argparse
import contextlib
import datetime
import json
import math
import os
import platform
import statistics
import sys
import time
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(Path(__file__).resolve().parent))
import fg_common as fgc  # noqa: E402
DTYPES = {"float32": torch.float32, "float16": torch.float16, "bfloat16": torch.bfloat16}
INT_VIEW = {1: torch.uint8, 2: torch.int16, 4: torch.int32, 8: torch.int64}
CASE_ORDER = ["seed", "expanded", "contig", "transposed", "topk", "clustered", "clustered_sorted", "hot",
              "rows_t", "rank6", "scattered"]


# ---- cases -------------------------------------------------------------------------------
# make(dtype, device, gen, shrink) -> (self, dim, index, shape description)

def _randn(shape, dtype, device, gen):
    return torch.randn(shape, dtype=torch.float32, device=device, generator=gen).to(dtype)


def make_seed(dtype, device, gen, shrink):
    x = _randn((4, 16, 384), dtype, device, gen)
    idx = torch.full((4, 1, 1), 15, dtype=torch.int64, device=device).expand(4, 1, 384)
    return x, 1, idx, "x (4,16,384), idx full 15 (4,1,1)->(4,1,384)"


def _bndk(shrink):
    return 64 // min(shrink, 8), 4096 // shrink, 1024 // shrink, 1024 // shrink


def make_expanded(dtype, device, gen, shrink):
    B, N, D, K = _bndk(shrink)
    x = _randn((B, N, D), dtype, device, gen)
    idx = torch.randint(0, N, (B, K, 1), device=device, generator=gen).expand(B, K, D)
    return x, 1, idx, f"self ({B},{N},{D}), idx ({B},{K},1)->({B},{K},{D})"


def make_contig(dtype, device, gen, shrink):
    B, N, D, K = _bndk(shrink)
    x = _randn((B, N, D), dtype, device, gen)
    idx = torch.randint(0, N, (B, K, D), device=device, generator=gen)
    return x, 1, idx, f"self ({B},{N},{D}), idx ({B},{K},{D}) contiguous"


def make_transposed(dtype, device, gen, shrink):
    B, N, D, K = _bndk(shrink)
    x = _randn((B, N, D), dtype, device, gen)
    idx = torch.randint(0, N, (B, D, K), device=device, generator=gen).transpose(1, 2)
    return x, 1, idx, f"self ({B},{N},{D}), idx ({B},{D},{K}).transpose(1,2)"


def make_topk(dtype, device, gen, shrink):
    M, V, k = 65536 // shrink, 4096 // min(shrink, 16), 256 // min(shrink, 16)
    x = _randn((M, V), dtype, device, gen)
    scores = torch.rand((M, V), device=device, generator=gen)
    idx = scores.topk(k, dim=1).indices
    del scores
    return x, 1, idx, f"self ({M},{V}), idx topk positions ({M},{k})"


def make_clustered(dtype, device, gen, shrink):
    M, V = 65536 // shrink, 4096 // min(shrink, 16)
    W, k = 512 // min(shrink, 16), 256 // min(shrink, 16)
    x = _randn((M, V), dtype, device, gen)
    scores = torch.rand((M, W), device=device, generator=gen)
    offset = torch.randint(0, V - W + 1, (M, 1), device=device, generator=gen)
    idx = scores.topk(k, dim=1).indices + offset
    del scores
    return x, 1, idx, f"self ({M},{V}), idx topk of a {W}-wide window per row ({M},{k})"


def make_clustered_sorted(dtype, device, gen, shrink):
    x, dim, idx, desc = make_clustered(dtype, device, gen, shrink)
    return x, dim, idx.sort(dim=1).values, desc.replace("idx topk", "idx sorted topk")


def make_hot(dtype, device, gen, shrink):
    M, V, k = 65536 // shrink, 4096 // min(shrink, 16), 256 // min(shrink, 16)
    x = _randn((M, V), dtype, device, gen)
    hot = torch.randperm(V, device=device, generator=gen)[:8]
    idx = hot[torch.randint(0, 8, (M, k), device=device, generator=gen)]
    return x, 1, idx, f"self ({M},{V}), idx ({M},{k}) from 8 hot columns"


def make_rows_t(dtype, device, gen, shrink):
    N, D, M = 65536 // shrink, 1024 // min(shrink, 16), 32768 // shrink
    x = _randn((D, N), dtype, device, gen).t()
    idx = torch.randint(0, N, (M, 1), device=device, generator=gen).expand(M, D)
    return x, 0, idx, f"self ({N},{D}) stored transposed, idx ({M},1)->({M},{D}), dim 0"


def _permuted(t_shape, order, make):
    """A tensor of logical shape t_shape whose memory runs in dim order `order` (outer first)."""
    phys = make([t_shape[d] for d in order])
    inverse = [order.index(d) for d in range(len(order))]
    return phys.permute(inverse)


def make_rank6(dtype, device, gen, shrink):
    s = max(1, min(shrink, 4))
    isz = [16 // s, 16 // s, 16, 16, 8, 16]
    ssz = list(isz)
    ssz[2] = 32
    x = _permuted(ssz, [3, 5, 0, 4, 2, 1], lambda sh: _randn(sh, dtype, device, gen))
    idx = _permuted(isz, [4, 2, 5, 1, 3, 0],
                    lambda sh: torch.randint(0, ssz[2], sh, device=device, generator=gen))
    return x, 2, idx, (f"self {tuple(ssz)} order (3,5,0,4,2,1), idx {tuple(isz)} "
                       "order (4,2,5,1,3,0), dim 2")


def make_scattered(dtype, device, gen, shrink):
    N, D, K = 32768 // shrink, 2048 // min(shrink, 16), 8192 // shrink
    x = _randn((N, D), dtype, device, gen)
    idx = torch.randint(0, N, (D, K), device=device, generator=gen).t()
    return x, 0, idx, f"self ({N},{D}), idx ({D},{K}).t(), dim 0"


MAKERS = {"seed": make_seed, "expanded": make_expanded, "contig": make_contig,
          "transposed": make_transposed, "topk": make_topk, "clustered": make_clustered,
          "clustered_sorted": make_clustered_sorted, "hot": make_hot, "rows_t": make_rows_t,
          "rank6": make_rank6, "scattered": make_scattered}


# ---- measurement -------------------------------------------------------------------------

class Timer:
    """CUDA events on a GPU; perf_counter (after a sync) for the --device cpu smoke run."""

    def __init__(self, device):
        self.cuda = device.type == "cuda"

    def mark(self):
        if self.cuda:
            e = torch.cuda.Event(enable_timing=True)
            e.record()
            return e
        return time.perf_counter()

    def elapsed_us(self, a, b):
        if self.cuda:
            return a.elapsed_time(b) * 1000.0
        return (b - a) * 1e6

    def sync(self):
        if self.cuda:
            torch.cuda.synchronize()


def index_bytes(idx):
    n = idx.numel()
    for s, st in zip(idx.shape, idx.stride()):
        if st == 0 and s > 0:
            n //= s
    return n * idx.element_size()


def bitwise_equal(a, b):
    if a.shape != b.shape or a.dtype != b.dtype:
        return False
    iv = INT_VIEW[a.element_size()]
    return torch.equal(a.contiguous().view(iv), b.contiguous().view(iv))


def run_batches(timer, impls, sets, inner, reps, warmup, contexts=None):
    """impls: name -> fn(set). Returns name -> list of us per call, one per repetition.
    contexts: name -> context-manager factory entered around that impl's batches, outside the
    timed region (used to route torch.gather to stridewise for "ours")."""
    contexts = contexts or {}
    names = list(impls)
    for name in names:
        with contexts.get(name, contextlib.nullcontext)():
            for w in range(warmup):
                for j in range(inner):
                    impls[name](sets[(w * inner + j) % len(sets)])
    timer.sync()
    out = {n: [] for n in names}
    for r in range(reps):
        order = names[r % len(names):] + names[:r % len(names)]
        marks = []
        for name in order:
            base = (r * inner) % len(sets)
            with contexts.get(name, contextlib.nullcontext)():
                a = timer.mark()
                for j in range(inner):
                    impls[name](sets[(base + j) % len(sets)])
                b = timer.mark()
            marks.append((name, a, b))
        timer.sync()
        for name, a, b in marks:
            out[name].append(timer.elapsed_us(a, b) / inner)
    return out


def pick_inner(timer, fn, sets, target_us):
    fn(sets[0])
    timer.sync()
    a = timer.mark()
    for j in range(10):
        fn(sets[j % len(sets)])
    b = timer.mark()
    timer.sync()
    per_call = max(timer.elapsed_us(a, b) / 10, 0.5)
    return int(min(max(math.ceil(target_us / per_call), 1), 200))


def path_stats(sw, fn, s):
    try:
        sw.reset_stats()
        fn(s)
        g = sw.stats().get("gather", {})
        return {k: g.get(k) for k in ("vectorized", "int64_offsets", "expanded_index")}
    except Exception:  # noqa: BLE001 - stats are informational
        return {}


def bench_case(args, sw, case, dtype_name, device, timer, l2_bytes):
    dtype = DTYPES[dtype_name]
    gen = torch.Generator(device=device)
    gen.manual_seed(1234)
    first = MAKERS[case](dtype, device, gen, args.shrink)
    x0, dim, i0, desc = first
    set_bytes = x0.numel() * x0.element_size() + index_bytes(i0)
    n_sets = int(min(max(math.ceil(2 * l2_bytes / max(set_bytes, 1)), 3), 4096))
    sets = [(x0, i0)] + [MAKERS[case](dtype, device, gen, args.shrink)[0:3:2] for _ in range(n_sets - 1)]
    ours_op = torch.ops.stridewise.gather

    bad = [k for k, (x, i) in enumerate(sets) if not bitwise_equal(ours_op(x, dim, i), torch.gather(x, dim, i))]
    if bad:
        raise SystemExit(f"{case}/{dtype_name}: stridewise differs from torch.gather on input sets {bad[:5]}")

    out0 = torch.gather(x0, dim, i0)

    def run(ctx):
        with ctx():
            return torch.gather(x0, dim, i0)

    fg = fgc.fg_status(args, device, "gather", run,
                       lambda got: (bitwise_equal(got, out0), "bitwise against torch.gather"))
    out_bytes = out0.numel() * out0.element_size()
    n_copy = int(min(max(math.ceil(2 * l2_bytes / max(2 * out_bytes, 1)), 3), 4096))
    srcs = [torch.empty_like(out0).copy_(out0) for _ in range(n_copy)]
    dst = torch.empty_like(out0)
    copy_sets = list(range(n_copy))

    # "ours" is what a user gets from stridewise.use(): torch.gather routed to our kernels, so
    # both sides pay the same Python binding and autograd cost. "ours_op" calls
    # torch.ops.stridewise.gather directly (torch.ops' Python dispatch adds host time).
    impls = {
        "ours": lambda s: torch.gather(s[0], dim, s[1]),
        "aten": lambda s: torch.gather(s[0], dim, s[1]),
        "ours_op": lambda s: ours_op(s[0], dim, s[1]),
    }
    contexts = {"ours": lambda: sw.use(include=["gather"])}
    if fg["ran"]:
        impls["flaggems"], contexts["flaggems"] = impls["aten"], fg.pop("ctx")
    inner = pick_inner(timer, impls["aten"], sets, args.target_us)
    t = run_batches(timer, impls, sets, inner, args.reps, args.warmup, contexts)
    tc = run_batches(timer, {"copy": lambda k: dst.copy_(srcs[k])}, copy_sets, inner, args.reps, args.warmup)

    moved = out_bytes + out0.numel() * x0.element_size() + index_bytes(i0)
    med = {k: statistics.median(v) for k, v in t.items()}
    med_copy = statistics.median(tc["copy"])
    copy_gbs = 2 * out_bytes / med_copy / 1e3
    row = {
        "case": case, "dtype": dtype_name, "shapes": desc, "dim": dim,
        "index_strides": list(i0.stride()), "input_sets": n_sets, "calls_per_batch": inner,
        "reps": args.reps, "bytes_per_call": moved,
        "ours_us": med["ours"], "aten_us": med["aten"], "ours_op_us": med["ours_op"],
        "copy_us": med_copy,
        "ratio_aten_over_ours": med["aten"] / med["ours"],
        "flaggems": fg, "flaggems_us": med.get("flaggems"), "ratio_fg": fgc.ratio(med.get("flaggems"), med["ours"]),
        "ours_gbs": moved / med["ours"] / 1e3, "aten_gbs": moved / med["aten"] / 1e3,
        "copy_gbs": copy_gbs,
        "ours_pct_copy": 100.0 * (moved / med["ours"] / 1e3) / copy_gbs,
        "path": path_stats(sw, impls["ours_op"], sets[0]),
        "raw_us": {**t, "copy": tc["copy"]},
    }
    sync_row = None
    if args.sync_check and (case, dtype_name) in (("seed", "float16"), ("expanded", "float16")):
        prev = sw.get_cuda_check_mode()
        sw.set_cuda_check_mode("sync")
        try:
            ts = run_batches(timer, {"ours_sync": impls["ours"]}, sets, inner, args.reps, args.warmup,
                             {"ours_sync": contexts["ours"]})
        finally:
            sw.set_cuda_check_mode(prev)
        s_med = statistics.median(ts["ours_sync"])
        sync_row = {"case": case, "dtype": dtype_name, "deferred_us": med["ours"], "sync_us": s_med,
                    "delta_us": s_med - med["ours"], "raw_us": ts["ours_sync"]}
    del sets, srcs, dst, first, x0, i0, out0
    return row, sync_row


# ---- report ------------------------------------------------------------------------------

def header(args, device, argv=None):
    """The run's provenance lines. argv: the arguments main() was given (None: sys.argv's)."""
    lines = [f"# stridewise gather benchmark ({datetime.datetime.now().isoformat(timespec='seconds')})", ""]
    gpu = torch.cuda.get_device_name(device) if device.type == "cuda" else platform.processor() or "cpu"
    lines.append(f"- device: {gpu}")
    lines.append(f"- torch {torch.__version__}, CUDA {torch.version.cuda}, python {platform.python_version()}")
    try:
        from stridewise import _native
        info = _native.build_info()
        if info:
            lines.append(f"- stridewise build: {json.dumps(info, sort_keys=True)}")
    except Exception:  # noqa: BLE001
        pass
    cmd = sys.argv if argv is None else sys.argv[:1] + list(argv)
    lines.append(f"- command: `{' '.join([sys.executable] + cmd)}`")
    lines.append("- time per call: median over repetitions of (batch time / calls in batch), CUDA events;"
                 " bytes = out written + self elements read (out.numel()) + index storage addressed")
    return "\n".join(lines)


def table(rows):
    out = ["| case | dtype | shapes | ours us | ATen us | ATen/ours | FlagGems us | FlagGems/ours | torch.ops us "
           "| ours GB/s | ATen GB/s | copy GB/s | ours % copy | sets |",
           "|---|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for r in rows:
        fg_us, fg_ratio = fgc.fg_cells(r)
        out.append(f"| {r['case']} | {r['dtype']} | {r['shapes']} | {r['ours_us']:.2f} | {r['aten_us']:.2f} | "
                   f"{r['ratio_aten_over_ours']:.2f} | {fg_us} | {fg_ratio} | {r['ours_op_us']:.2f} | "
                   f"{r['ours_gbs']:.0f} | {r['aten_gbs']:.0f} | {r['copy_gbs']:.0f} | {r['ours_pct_copy']:.0f}% | "
                   f"{r['input_sets']} |")
    notes = fgc.fg_notes(rows)
    return "\n".join(out + ([""] + notes if notes else []))


def sync_table(rows):
    out = ["| case | dtype | deferred us | sync us | sync cost us |", "|---|---|---:|---:|---:|"]
    for r in rows:
        out.append(f"| {r['case']} | {r['dtype']} | {r['deferred_us']:.2f} | {r['sync_us']:.2f} | {r['delta_us']:.2f} |")
    return "\n".join(out)


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--quick", action="store_true", help="fewer repetitions and warm-up batches")
    p.add_argument("--cases", default=",".join(CASE_ORDER), help="comma list of " + ",".join(CASE_ORDER))
    p.add_argument("--dtypes", default="float32,float16,bfloat16", help="comma list of " + ",".join(DTYPES))
    p.add_argument("--reps", type=int, default=None, help="timed batches per implementation (default 50, quick 10)")
    p.add_argument("--target-us", type=float, default=300.0, help="aim for batches at least this long")
    p.add_argument("--no-sync-check", dest="sync_check", action="store_false", help="skip the sync-mode cost")
    p.add_argument("--device", default="cuda", help=argparse.SUPPRESS)  # 'cpu': smoke test of this script
    p.add_argument("--shrink", type=int, default=1, help=argparse.SUPPRESS)  # divide the big sizes
    fgc.add_args(p)
    args = p.parse_args(argv)
    args.reps = args.reps or (10 if args.quick else 50)
    args.warmup = 2 if args.quick else 5
    cases = [c.strip() for c in args.cases.split(",") if c.strip()]
    dtypes = [d.strip() for d in args.dtypes.split(",") if d.strip()]
    for c in cases:
        if c not in MAKERS:
            p.error(f"unknown case {c!r}")
    for d in dtypes:
        if d not in DTYPES:
            p.error(f"unknown dtype {d!r}")

    device = torch.device(args.device)
    if device.type == "cuda" and not torch.cuda.is_available():
        raise SystemExit("no CUDA device: this benchmark needs the GPU machine")
    if device.type == "cuda" and device.index is None:
        device = torch.device("cuda", torch.cuda.current_device())
    import stridewise as sw  # noqa: E402 - loads torch.ops.stridewise
    timer = Timer(device)
    l2 = torch.cuda.get_device_properties(device).L2_cache_size if device.type == "cuda" else 32 << 20
    if device.type == "cuda":
        torch.cuda.set_device(device)

    rows, sync_rows = [], []
    for case in cases:
        for d in dtypes:
            row, srow = bench_case(args, sw, case, d, device, timer, l2)
            rows.append(row)
            if srow:
                sync_rows.append(srow)
            fg = f"FlagGems {row['flaggems_us']:9.2f} us  " if row["flaggems"]["ran"] else "FlagGems -  "
            print(f"{case:10s} {d:9s} ours {row['ours_us']:9.2f} us  ATen {row['aten_us']:9.2f} us  {fg}"
                  f"x{row['ratio_aten_over_ours']:.2f}  {row['ours_pct_copy']:.0f}% of copy", flush=True)
            if device.type == "cuda":
                torch.cuda.empty_cache()

    head = header(args, device, argv)
    text = head + "\n\n## sync check mode cost\n\n" + (sync_table(sync_rows) if sync_rows else "(not measured)")
    text += "\n\n## gather: stridewise vs ATen and FlagGems\n\n" + table(rows) + "\n"
    out_dir = Path(os.environ["OUT"]) if os.environ.get("OUT") else ROOT / "bench" / "results"
    out_dir.mkdir(parents=True, exist_ok=True)
    (out_dir / "bench_gather.md").write_text(text)
    (out_dir / "bench_gather.json").write_text(json.dumps(
        {"header": head, "argv": sys.argv, "rows": rows, "sync": sync_rows}, indent=1))
    # The picture beside the JSON (bench/plot_bench.py), before the prints so the table stays last;
    # without matplotlib this prints one line and the run still succeeds.
    from plot_bench import plot_or_hint
    plot_or_hint(out_dir / "bench_gather.json", out_dir / "bench_gather.png")
    print()
    print(head)
    print("\n## sync check mode cost\n")
    print(sync_table(sync_rows) if sync_rows else "(not measured)")
    print(f"\n(written to {out_dir}/bench_gather.md and .json)")
    print("\n## gather: stridewise vs ATen and FlagGems\n")
    print(table(rows))


if __name__ == "__main__":
    main()
