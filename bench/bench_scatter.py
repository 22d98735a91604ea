#!/usr/bin/env python3
"""stridewise scatter family vs ATen on one CUDA device, measured in the same run.

    PYTHONPATH=python python3 bench/bench_scatter.py                 # every case, 3 dtypes
    PYTHONPATH=python python3 bench/bench_scatter.py --quick --cases moe_add --dtypes bfloat16

Cases (index patterns: top-k routing, uniform, sorted, heavy duplicates, random per element;
contiguous and non-contiguous operands):
  moe_add      out (T, H) .scatter_add_(0, idx.view(-1,1).expand(-1,H), src (T*k, H)): the MoE
               combine, row-expanded index, top-k routing (each token exactly k = 8 times, in
               shuffled order): T, H = 16384, 4096
  moe_amax     the same shapes through scatter_reduce_(..., 'amax', include_self=True)
  moe_add_nc   moe_add with non-contiguous operands: src stored transposed (H, T*k).t(), out a
               column slice of a (T, H + 64) tensor
  gnn_sum      out (N, F).scatter_reduce_(0, dst.view(-1,1).expand(-1,F), msg (E, F), 'sum',
               include_self=False): N, E, F = 1M, 16M, 128 (PyG's aggregation), uniform dst
  gnn_mean     the same with 'mean'
  gnn_amax     the same with 'amax'
  gnn_sorted   gnn_sum with dst sorted (PyG's sorted edge_index)
  dup_add      moe_add's shapes with every index value in [0, 16): heavy duplicates
  dim1_add     out (64, 4096, 1024).scatter_add_(1, randint index (64, 1024, 1024), src of the
               index's shape): a random index per element along a middle dim
  copy_rows    out (N, D).scatter_(0, perm[:M].view(-1,1).expand(-1,D), src (M, D)): plain
               scatter of distinct rows (no accumulation), N, M, D = 65536, 32768, 1024
Each case also runs in deterministic mode (torch.use_deterministic_algorithms(True)) for ours
and for ATen, in the same run ("det" columns).

Method (shared with bench_gather.py): CUDA events around batches of back-to-back calls, warm-up,
median over repetitions, implementations interleaved with the order rotated, S input sets
rotated so the working set exceeds twice the L2. The in-place ops run on a fresh out per set
(each call adds onto the previous call's result: same cost). Before timing, ours is checked
against ATen and a float64 run on the first set (see check()). Bytes per call = src read + index storage addressed + out read and
written once (2 x out bytes touched). The copy reference is dst.copy_(src) of src's size.
The validation pass (bad-index check before any write) is timed separately from the whole call
with torch.profiler: the "validate %" column is its share of our GPU time; the JSON holds the
time of every kernel of our call ("kernels_us"). "host us" is the host time of one call of ours
with the GPU idle (synchronized before; time.perf_counter until the call returns): where it
exceeds the GPU time, the CUDA-event figure is the host's.
"""
from __future__ import annotations

import argparse
import contextlib
import math
import json
import os
import statistics
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_gather import DTYPES, ROOT, Timer, header, index_bytes, run_batches, pick_inner  # noqa: E402

CASE_ORDER = ["moe_add", "moe_amax", "moe_add_nc", "gnn_sum", "gnn_mean", "gnn_amax", "gnn_sorted",
              "dup_add", "dim1_add", "copy_rows"]


def _randn(shape, dtype, device, gen):
    return torch.randn(shape, dtype=torch.float32, device=device, generator=gen).to(dtype)


def _moe(dtype, device, gen, shrink, reduce, pattern="topk", contiguous=True):
    T, H, k = 16384 // shrink, 4096 // min(shrink, 16), 8
    if pattern == "topk":  # every token exactly k times, in shuffled order
        tok = torch.arange(T, device=device).repeat_interleave(k)
        tok = tok[torch.randperm(T * k, device=device, generator=gen)]
    else:  # heavy duplicates: 16 targets
        tok = torch.randint(0, min(16, T), (T * k,), device=device, generator=gen)
    if contiguous:
        out = _randn((T, H), dtype, device, gen)
        src = _randn((T * k, H), dtype, device, gen)
    else:
        out = _randn((T, H + 64), dtype, device, gen)[:, :H]
        src = _randn((H, T * k), dtype, device, gen).t()
    idx = tok.view(-1, 1).expand(-1, H)
    if reduce == "add":
        fn = lambda o, i, s: o.scatter_add_(0, i, s)  # noqa: E731
    else:
        fn = lambda o, i, s: o.scatter_reduce_(0, i, s, reduce, include_self=True)  # noqa: E731
    what = {"topk": "top-k routing", "dup": "16 targets"}[pattern]
    nc = "" if contiguous else ", src transposed, out a column slice"
    return out, idx, src, fn, f"out ({T},{H}) <- src ({T * k},{H}), row-expanded index, {what}{nc}", 0


def _gnn(dtype, device, gen, shrink, reduce, ordered=False):
    N, E, F = (1 << 20) // shrink, (1 << 24) // shrink, 128
    dst = torch.randint(0, N, (E,), device=device, generator=gen)
    if ordered:
        dst = dst.sort().values
    out = _randn((N, F), dtype, device, gen)
    src = _randn((E, F), dtype, device, gen)
    fn = lambda o, i, s: o.scatter_reduce_(0, i, s, reduce, include_self=False)  # noqa: E731
    what = "sorted" if ordered else "uniform"
    return out, dst.view(-1, 1).expand(-1, F), src, fn, f"out ({N},{F}) <- msg ({E},{F}) {reduce}, {what} dst", 0


def make_dim1(dtype, device, gen, shrink):
    B, N, D, K = 64 // min(shrink, 8), 4096 // shrink, 1024 // shrink, 1024 // shrink
    out = _randn((B, N, D), dtype, device, gen)
    idx = torch.randint(0, N, (B, K, D), device=device, generator=gen)
    src = _randn((B, K, D), dtype, device, gen)
    return out, idx, src, lambda o, i, s: o.scatter_add_(1, i, s), f"out ({B},{N},{D}) <- ({B},{K},{D}) dim 1", 1


def make_copy_rows(dtype, device, gen, shrink):
    N, M, D = 65536 // shrink, 32768 // shrink, 1024 // min(shrink, 8)
    rows = torch.randperm(N, device=device, generator=gen)[:M]
    out = _randn((N, D), dtype, device, gen)
    src = _randn((M, D), dtype, device, gen)
    return (out, rows.view(-1, 1).expand(-1, D), src, lambda o, i, s: o.scatter_(0, i, s),
            f"out ({N},{D}) <- rows ({M},{D})", 0)


MAKERS = {
    "moe_add": lambda *a: _moe(*a, "add"), "moe_amax": lambda *a: _moe(*a, "amax"),
    "moe_add_nc": lambda *a: _moe(*a, "add", contiguous=False),
    "gnn_sum": lambda *a: _gnn(*a, "sum"), "gnn_mean": lambda *a: _gnn(*a, "mean"),
    "gnn_amax": lambda *a: _gnn(*a, "amax"), "gnn_sorted": lambda *a: _gnn(*a, "sum", ordered=True),
    "dup_add": lambda *a: _moe(*a, "add", pattern="dup"),
    "dim1_add": make_dim1, "copy_rows": make_copy_rows,
}
OP_OF = {"moe_add": "scatter_add", "moe_add_nc": "scatter_add", "dup_add": "scatter_add",
         "dim1_add": "scatter_add", "copy_rows": "scatter"}


def check(fn, out0, i0, s0, ours, aten):
    """Sanity check before timing (the accuracy tests live in tests/). Integer / copy results
    must equal ATen's. Floating results are compared with a float64 run of the same op: ours
    must be within 1e-3 (float32) / 1e-2 (float16, bfloat16) of max(|ref|, 1) per element, or
    no further from it than ATen (ATen rounds float16/bfloat16 at every addition, ours once).
    Returns (ok, ours error, ATen error)."""
    if not ours.dtype.is_floating_point:
        return torch.equal(ours, aten), 0.0, 0.0
    ref = out0.double()
    fn(ref, i0, s0.double())
    scale = ref.abs().clamp_min(1.0)
    e_o = float(((ours.double() - ref).abs() / scale).max())
    e_a = float(((aten.double() - ref).abs() / scale).max())
    tol = 1e-3 if ours.dtype == torch.float32 else 1e-2
    return e_o <= max(tol, 1.5 * e_a), e_o, e_a


@contextlib.contextmanager
def deterministic(on):
    prev = torch.are_deterministic_algorithms_enabled()
    torch.use_deterministic_algorithms(on)
    try:
        yield
    finally:
        torch.use_deterministic_algorithms(prev)


def kernel_split(sw, op, fn, s):
    """Our GPU time per call by kernel (torch.profiler over 3 calls), and the validation
    kernel's share of it: {"validate_pct": float, "kernels_us": {name: us per call}}."""
    try:
        from torch.profiler import ProfilerActivity, profile
        with sw.use(include=[op]), profile(activities=[ProfilerActivity.CUDA]) as prof:
            for _ in range(3):
                fn(*s)
            torch.cuda.synchronize()
        kernels = {}
        for ev in prof.key_averages():
            t = getattr(ev, "device_time_total", 0.0) or getattr(ev, "cuda_time_total", 0.0)
            if t > 0:
                kernels[ev.key] = t / 3
        total = sum(kernels.values())
        val = sum(t for k, t in kernels.items() if "validate" in k)
        return {"validate_pct": 100.0 * val / total if total else None, "kernels_us": kernels}
    except Exception as e:  # noqa: BLE001 - informational
        return {"validate_pct": None, "kernels_us": {}, "error": repr(e)}


def host_time(sw, op, fn, s, device, reps=5):
    """Median host time (us) of one call of ours with the GPU idle before it."""
    ts = []
    with sw.use(include=[op]):
        for _ in range(reps):
            if device.type == "cuda":
                torch.cuda.synchronize(device)
            t0 = time.perf_counter()
            fn(*s)
            ts.append((time.perf_counter() - t0) * 1e6)
    if device.type == "cuda":
        torch.cuda.synchronize(device)
    return statistics.median(ts)


def bench_case(args, sw, case, dtype_name, device, timer, l2):
    dtype = DTYPES[dtype_name]
    op = OP_OF.get(case, "scatter_reduce")
    gen = torch.Generator(device=device)
    gen.manual_seed(4321)
    out0, i0, s0, fn, desc, dim = MAKERS[case](dtype, device, gen, args.shrink)
    set_bytes = out0.numel() * out0.element_size() + s0.numel() * s0.element_size() + index_bytes(i0)
    n_sets = int(min(max(math.ceil(2 * l2 / max(set_bytes, 1)), 2), 64))
    sets = [(out0, i0, s0)] + [MAKERS[case](dtype, device, gen, args.shrink)[0:3] for _ in range(n_sets - 1)]

    a = out0.clone()
    b = out0.clone()
    fn(a, i0, s0)
    with sw.use(include=[op]):
        fn(b, i0, s0)
    sw.check_errors(True)
    ok, err_ours, err_aten = check(fn, out0, i0, s0, b, a)
    if not ok:
        raise SystemExit(f"{case}/{dtype_name}: stridewise is {err_ours:.3g} from the float64 result "
                         f"(ATen {err_aten:.3g})")
    del a, b

    impls = {"ours": lambda s: fn(*s), "aten": lambda s: fn(*s)}
    ctx = {"ours": lambda: sw.use(include=[op])}
    inner = pick_inner(timer, impls["aten"], sets, args.target_us)
    t = run_batches(timer, impls, sets, inner, args.reps, args.warmup, ctx)
    # Deterministic mode: the segment path for a shared index, else one thread per line (every
    # coordinate but dim) in index order, which is serial work when lines are few: timed only
    # where lines >= --det-min-lines.
    lines = i0.numel() // max(i0.size(dim), 1)
    td = {"ours_det": [float("nan")], "aten_det": [float("nan")]}
    if lines >= args.det_min_lines:
        with deterministic(True):
            td = run_batches(timer, {"ours_det": impls["ours"], "aten_det": impls["aten"]}, sets, 1,
                             max(3, args.reps // 3), 1, {"ours_det": ctx["ours"]})
    src_bytes = s0.numel() * s0.element_size()
    n_copy = max(2, min(8, math.ceil(2 * l2 / max(2 * src_bytes, 1))))
    csrc = [s0.clone() for _ in range(n_copy)]
    cdst = torch.empty_like(s0)
    tc = run_batches(timer, {"copy": lambda k: cdst.copy_(csrc[k])}, list(range(n_copy)), inner, args.reps, args.warmup)
    touched = min(out0.numel(), i0.numel()) * out0.element_size()
    moved = src_bytes + index_bytes(i0) + 2 * touched
    med = {k: statistics.median(v) for k, v in {**t, **td, **tc}.items()}
    copy_gbs = 2 * src_bytes / med["copy"] / 1e3
    row = {
        "case": case, "dtype": dtype_name, "shapes": desc, "sets": n_sets, "calls_per_batch": inner,
        "bytes_per_call": moved, "lines": lines, "err_vs_f64": {"ours": err_ours, "aten": err_aten}, **{f"{k}_us": v for k, v in med.items()},
        "ratio": med["aten"] / med["ours"], "ratio_det": med["aten_det"] / med["ours_det"],
        "ours_gbs": moved / med["ours"] / 1e3, "aten_gbs": moved / med["aten"] / 1e3, "copy_gbs": copy_gbs,
        "ours_pct_copy": 100.0 * moved / med["ours"] / 1e3 / copy_gbs,
        "host_us": host_time(sw, op, fn, sets[0], device),
        **(kernel_split(sw, op, fn, sets[0]) if device.type == "cuda" else {"validate_pct": None}),
        "raw_us": {**t, **td, **tc},
    }
    del sets, csrc, cdst
    return row


def table(rows):
    out = ["| case | dtype | shapes | ours us | ATen us | ATen/ours | ours GB/s | ATen GB/s | copy GB/s | ours % copy "
           "| det ours us | det ATen us | det ATen/ours | det ours/ours | validate % | host us |",
           "|---|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for r in rows:
        v = "-" if r["validate_pct"] is None else f"{r['validate_pct']:.1f}"
        out.append(f"| {r['case']} | {r['dtype']} | {r['shapes']} | {r['ours_us']:.1f} | {r['aten_us']:.1f} | "
                   f"{r['ratio']:.2f} | {r['ours_gbs']:.0f} | {r['aten_gbs']:.0f} | {r['copy_gbs']:.0f} | "
                   f"{r['ours_pct_copy']:.0f}% | {r['ours_det_us']:.1f} | {r['aten_det_us']:.1f} | "
                   f"{r['ratio_det']:.2f} | {r['ours_det_us'] / r['ours_us']:.2f} | {v} | {r['host_us']:.0f} |")
    return "\n".join(out)


BYTES_NOTE = "src read + index storage addressed + 2 x out bytes touched"


def summary_line(case, dtype_name, r):
    return (f"{case:10s} {dtype_name:9s} ours {r['ours_us']:9.1f} us ATen {r['aten_us']:9.1f} us x{r['ratio']:.2f} "
            f"det x{r['ratio_det']:.2f} host {r['host_us']:.0f} us")


def main(argv=None, name="bench_scatter", title="scatter family: stridewise vs ATen", driver=None):
    """The driver shared by the scatter-shaped benchmarks. ``driver`` is the module that makes
    the rows (default: this one): its MAKERS and CASE_ORDER (case names), bench_case(args, sw,
    case, dtype_name, device, timer, l2) -> row, table(rows) -> markdown, summary_line(case,
    dtype_name, row) -> the progress line, BYTES_NOTE (what a row's bytes count) and, optionally,
    add_args(parser) for its own options (bench_adv.py passes itself)."""
    drv = driver or sys.modules[__name__]
    p = argparse.ArgumentParser(description=(drv.__doc__ or __doc__).split("\n")[0])
    p.add_argument("--quick", action="store_true")
    p.add_argument("--cases", default=",".join(drv.CASE_ORDER))
    p.add_argument("--dtypes", default="float32,float16,bfloat16")
    p.add_argument("--reps", type=int, default=None)
    p.add_argument("--target-us", type=float, default=2000.0)
    p.add_argument("--det-min-lines", type=int, default=1,
                   help="time deterministic mode only for cases with at least this many lines")
    p.add_argument("--device", default="cuda", help=argparse.SUPPRESS)
    p.add_argument("--shrink", type=int, default=1, help=argparse.SUPPRESS)
    if hasattr(drv, "add_args"):
        drv.add_args(p)
    args = p.parse_args(argv)
    args.reps = args.reps or (6 if args.quick else 15)
    args.warmup = 1 if args.quick else 3
    cases = [c for c in args.cases.split(",") if c]
    dtypes = [d for d in args.dtypes.split(",") if d]
    for c in cases:
        if c not in drv.MAKERS:
            p.error(f"unknown case {c!r}")
    device = torch.device(args.device)
    if device.type == "cuda" and not torch.cuda.is_available():
        raise SystemExit("no CUDA device: this benchmark needs the GPU machine")
    import stridewise as sw  # noqa: E402
    timer = Timer(device)
    l2 = torch.cuda.get_device_properties(device).L2_cache_size if device.type == "cuda" else 32 << 20
    rows = []
    for case in cases:
        for d in dtypes:
            r = drv.bench_case(args, sw, case, d, device, timer, l2)
            rows.append(r)
            print(drv.summary_line(case, d, r), flush=True)
            for k, us in sorted(r.get("kernels_us", {}).items(), key=lambda kv: -kv[1]):
                print(f"    {us:9.1f} us  {k[:160]}", flush=True)
            if device.type == "cuda":
                torch.cuda.empty_cache()
    head = "\n".join(
        ("- time per call: median over repetitions of (batch time / calls in batch), CUDA events; bytes = "
         + drv.BYTES_NOTE if ln.startswith("- time per call") else ln)
        for ln in header(args, device).replace("gather benchmark", f"{name.removeprefix('bench_')} benchmark")
        .splitlines())
    text = head + f"\n\n## {title}\n\n" + drv.table(rows) + "\n"
    out_dir = Path(os.environ["OUT"]) if os.environ.get("OUT") else ROOT / "bench" / "results"
    out_dir.mkdir(parents=True, exist_ok=True)
    (out_dir / f"{name}.md").write_text(text)
    (out_dir / f"{name}.json").write_text(json.dumps({"header": head, "rows": rows}, indent=1))
    # The picture beside the JSON (bench/plot_bench.py); without matplotlib, one line, no failure.
    from plot_bench import plot_or_hint
    plot_or_hint(out_dir / f"{name}.json", out_dir / f"{name}.png")
    print()
    print(text)


if __name__ == "__main__":
    main()
