#!/usr/bin/env python3
"""stridewise scatter family vs ATen and FlagGems on one CUDA device, measured in the same run.

    PYTHONPATH=python python3 bench/bench_scatter.py                 # every case, 3 dtypes
    PYTHONPATH=python python3 bench/bench_scatter.py --quick --cases moe_add --dtypes bfloat16
    PYTHONPATH=python python3 bench/bench_scatter.py --quick --cases perelem   # issue 23's cases
    PYTHONPATH=python python3 bench/bench_scatter.py --quick --cases shared    # issues 10 and 20's

Cases (bench/scatter_cases.py makes them; "shapes" in a row says what it measures). The group
"shared" (index patterns: top-k routing, uniform, sorted, heavy duplicates, random per element;
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
The group "perelem" (issue 23: an index with its own value per element; int64 index unless
"_i32"; "amax" is include_self=True, "mean" include_self=False):
  dim1_add_i32               dim1_add with an int32 index
  dim1_amax, dim1_mean       dim1_add's shapes through scatter_reduce_ amax / mean
  dim0_add                   out (4096, 8192).scatter_add_(0, randint(0, 4096, (4096, 8192)), src)
  dim0_add_t                 the same, out stored transposed (randn(8192, 4096).t())
  last_add_16, last_add_64   out (1M, 16 | 64).scatter_add_(1, index (1M, 128) in [0, 16 | 64), src)
  last_add_64_i32            last_add_64 with an int32 index
  last_amax_64, last_mean_64 last_add_64's shapes through scatter_reduce_ amax / mean
  last_add_1k                out (65536, 1024) <- index and src (65536, 1024) in [0, 1024)
  last_add_off, last_add_t   last_add_64 with out an offset view (randn(1M + 1, 64)[1:]) /
                             stored transposed (randn(64, 1M).t())
  hist_16, hist_4k, hist_1m  1-D histograms: out (B,).scatter_add_(0, randint(0, B, (16M,)), src
                             (16M,)), B = 16, 4096, 1M
  hist_4k_i32, hist_4k_mean  hist_4k with an int32 index / through scatter_reduce_ mean
  perm_copy                  out (8192, 4096).scatter_(0, idx, src): every column of idx a
                             permutation of the rows (distinct targets, a copy)
  perm_copy_t                the same, out stored transposed (randn(4096, 8192).t())
Each case also runs in deterministic mode (torch.use_deterministic_algorithms(True)) for ours
and for ATen, in the same run ("det" columns; a side that raises there is named under the
table). FlagGems (--flaggems, bench/fg_common.py: on CUDA when `import flag_gems` works) runs
under flag_gems.use_gems(include=[its functions of the op]) and is timed where that changes the
dispatcher's kernel of the call ("FlagGems us", "FlagGems/ours" = our speed-up over it); else
"-", the reason under the table and in the JSON row ("flaggems": {"ran", "why"}).

Method (shared with bench_gather.py): CUDA events around batches of back-to-back calls, warm-up,
median over repetitions, implementations interleaved with the order rotated, S input sets
rotated so the working set exceeds twice the L2. The in-place ops run on a fresh out per set
(each call adds onto the previous call's result: same cost). Before timing, ours (fast and
deterministic) and FlagGems are checked on the first set, each on a copy of out with out's
layout (see check()): ours failing stops the run, FlagGems failing is marked "!" and still
timed. A call of ours that stridewise.stats() does not count, or counts as handed to ATen's
kernel ("fallback"), is timed but marked ("routed": false, a note under the table; the picture
leaves it out): its "ours" would be ATen's. Bytes per call = src read + index storage addressed + out read and
written once (2 x out bytes touched). The copy reference is dst.copy_(src) of src's size.
The validation pass (bad-index check before any write) is timed separately from the whole call
with torch.profiler: the "validate %" column is its share of our GPU time; the JSON holds the
time of every kernel of our call ("kernels_us"). "host us" is the host time of one call of ours
with the GPU idle (synchronized before; time.perf_counter until the call returns): where it
exceeds the GPU time, the CUDA-event figure is the host's. The JSON is rewritten after every
row ("partial": true until the run ends), so a run that stops keeps the rows it made.
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
import fg_common as fgc  # noqa: E402
from bench_gather import DTYPES, ROOT, Timer, bitwise_equal, header, index_bytes, run_batches, pick_inner  # noqa: E402
from scatter_cases import (BYTES_OF, CASE_GROUPS, CASE_ORDER, MAKERS, OP_OF, _randn,  # noqa: E402,F401
                           make_copy_rows, make_dim1)



# Ops whose result is one src element per written position (no accumulation): checked bitwise
# against ATen's. The cases that use them have distinct targets (copy_rows, perm_copy*).
EXACT_OPS = ("scatter",)


def check(fn, out0, i0, s0, ours, aten, exact=False):
    """Sanity check before timing (the accuracy tests live in tests/). Integer results, and
    copies (exact=True), must equal ATen's bitwise. Floating results are compared with a float64
    run of the same op: ours must be within 1e-3 (float32) / 1e-2 (float16, bfloat16) of
    max(|ref|, 1) per element, or no further from it than ATen (ATen rounds float16/bfloat16 at
    every addition, ours once). Returns (ok, ours error, ATen error); for the bitwise rule the
    error is the largest absolute difference from ATen's (inf where the values are equal but the
    bits are not, or shapes differ)."""
    if exact or not ours.dtype.is_floating_point:
        if bitwise_equal(ours, aten):
            return True, 0.0, 0.0
        same = ours.shape == aten.shape
        return False, float((ours.double() - aten.double()).abs().max()) if same else float("inf"), 0.0
    ref = out0.double()
    fn(ref, i0, s0.double())
    scale = ref.abs().clamp_min(1.0)
    e_o = float(((ours.double() - ref).abs() / scale).max())
    e_a = float(((aten.double() - ref).abs() / scale).max())
    tol = 1e-3 if ours.dtype == torch.float32 else 1e-2
    return e_o <= max(tol, 1.5 * e_a), e_o, e_a


def verdict(fn, out0, i0, s0, got, aten, exact):
    """(ok, how, (error, ATen's error)): check() with its rule and result in words, for a row's
    JSON and for error messages."""
    ok, e_got, e_aten = check(fn, out0, i0, s0, got, aten, exact)
    if exact or not got.dtype.is_floating_point:
        how = "bitwise equal to ATen's" if ok else f"differs from ATen's (max |diff| {e_got:.3g})"
    else:
        how = f"float64 rule: {e_got:.3g} from the float64 result (ATen {e_aten:.3g})"
    return ok, how, (e_got, e_aten)


def like(t):
    """A copy of t with its sizes, strides and storage offset (clone() makes a column slice or
    an offset view contiguous: the check must see out as the timed calls do)."""
    n = t.untyped_storage().nbytes() // t.element_size()
    base = torch.empty(n, dtype=t.dtype, device=t.device)
    return base.as_strided(t.size(), t.stride(), t.storage_offset()).copy_(t)


def _first_line(e):
    return str(e).splitlines()[0][:160] if str(e) else type(e).__name__


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


def _ours_result(sw, op, fn, out0, i0, s0, device):
    """Our result on a copy of out, and stridewise.stats()' counters of the op for that call
    (the nonzero ones)."""
    o = like(out0)
    sw.reset_stats()
    with sw.use(include=[op]):
        fn(o, i0, s0)
    if device.type == "cuda":
        sw.check_errors(True)
    return o, {k: v for k, v in sw.stats().get(op, {}).items() if v}


def _not_ours(stats):
    """Why "ours" would be ATen's kernel (a call that did not reach stridewise, or that it handed
    to ATen's: 'fallback'), or None. Such a row is still timed, marked "routed": false (the
    picture leaves it out) and named under the table."""
    if not stats.get("calls"):
        return "stridewise.stats() counted no call of the op"
    if stats.get("fallback"):
        return "stridewise handed the call to ATen's kernel (fallback)"
    return None


def bench_case(args, sw, case, dtype_name, device, timer, l2):
    dtype = DTYPES[dtype_name]
    op = OP_OF.get(case, "scatter_reduce")
    exact = op in EXACT_OPS
    gen = torch.Generator(device=device)
    gen.manual_seed(4321)
    out0, i0, s0, fn, desc, dim = MAKERS[case](dtype, device, gen, args.shrink)
    # The checks come first, on the first set only: a failing run stops before making the rest.
    aten = like(out0)
    fn(aten, i0, s0)
    got, stats = _ours_result(sw, op, fn, out0, i0, s0, device)
    ok, how, errs = verdict(fn, out0, i0, s0, got, aten, exact)
    del got
    if not ok:
        raise SystemExit(f"{case}/{dtype_name}: stridewise {how}")

    def run(ctx):  # FlagGems' result: the call inside ctx() on a fresh copy made outside it
        o = like(out0)
        with ctx():
            fn(o, i0, s0)
        return o

    fg = fgc.fg_status(args, device, op, run, lambda got: verdict(fn, out0, i0, s0, got, aten, exact)[:2])
    # Deterministic mode: the segment path for a shared index, else one thread per line (every
    # coordinate but dim) in index order, which is serial work when lines are few: timed only
    # where lines >= --det-min-lines. Ours is checked there too; a side that raises is a note.
    lines = i0.numel() // max(i0.size(dim), 1)
    det_ok, det_errors, det_stats = [], {}, None
    if lines >= args.det_min_lines:
        got = None
        with deterministic(True):
            try:
                got, det_stats = _ours_result(sw, op, fn, out0, i0, s0, device)
            except RuntimeError as e:
                det_errors["ours"] = _first_line(e)
            try:
                fn(like(out0), i0, s0)
                det_ok.append("aten_det")
            except RuntimeError as e:
                det_errors["aten"] = _first_line(e)
        if got is not None:  # judged outside the mode: the float64 reference is ATen's own call,
            # which deterministic mode may refuse (index_reduce_ on CUDA)
            ok, det_how, _ = verdict(fn, out0, i0, s0, got, aten, exact)
            if not ok:
                raise SystemExit(f"{case}/{dtype_name}: stridewise in deterministic mode {det_how}")
            det_ok.insert(0, "ours_det")
            del got
    del aten

    set_bytes = out0.numel() * out0.element_size() + s0.numel() * s0.element_size() + index_bytes(i0)
    n_sets = int(min(max(math.ceil(2 * l2 / max(set_bytes, 1)), 2), 64))
    sets = [(out0, i0, s0)] + [MAKERS[case](dtype, device, gen, args.shrink)[0:3] for _ in range(n_sets - 1)]
    call = lambda s: fn(*s)  # noqa: E731
    impls = {"ours": call, "aten": call}
    ctx = {"ours": lambda: sw.use(include=[op])}
    if fg["ran"]:
        impls["flaggems"], ctx["flaggems"] = call, fg.pop("ctx")
    inner = pick_inner(timer, impls["aten"], sets, args.target_us)
    t = run_batches(timer, impls, sets, inner, args.reps, args.warmup, ctx)
    if det_ok:
        with deterministic(True):
            t.update(run_batches(timer, {k: call for k in det_ok}, sets, 1, max(3, args.reps // 3), 1,
                                 {"ours_det": ctx["ours"]}))
    src_bytes = s0.numel() * s0.element_size()
    n_copy = max(2, min(8, math.ceil(2 * l2 / max(2 * src_bytes, 1))))
    csrc = [s0.clone() for _ in range(n_copy)]
    cdst = torch.empty_like(s0)
    t.update(run_batches(timer, {"copy": lambda k: cdst.copy_(csrc[k])}, list(range(n_copy)), inner, args.reps,
                         args.warmup))
    touched = min(out0.numel(), i0.numel()) * out0.element_size()
    moved = BYTES_OF[case](out0, i0) if case in BYTES_OF else src_bytes + index_bytes(i0) + 2 * touched
    med = {k: statistics.median(v) for k, v in t.items()}
    us = med.get
    gbs = lambda k: moved / med[k] / 1e3 if k in med else None  # noqa: E731
    copy_gbs = 2 * src_bytes / med["copy"] / 1e3
    row = {
        "case": case, "dtype": dtype_name, "op": op, "shapes": desc, "index_dtype": str(i0.dtype).removeprefix("torch."),
        "sets": n_sets, "calls_per_batch": inner, "bytes_per_call": moved, "lines": lines,
        "err_vs_f64": {"ours": errs[0], "aten": errs[1]}, "check": how,
        "routed": _not_ours(stats) is None, "not_ours": _not_ours(stats), "ours_stats": stats,
        "ours_det_stats": det_stats,
        "ours_us": us("ours"), "aten_us": us("aten"), "flaggems_us": us("flaggems"), "copy_us": us("copy"),
        "ours_det_us": us("ours_det"), "aten_det_us": us("aten_det"),
        "ratio": med["aten"] / med["ours"], "ratio_fg": fgc.ratio(us("flaggems"), us("ours")),
        "ratio_det": fgc.ratio(us("aten_det"), us("ours_det")), "det_over_fast": fgc.ratio(us("ours_det"), us("ours")),
        "ours_gbs": gbs("ours"), "aten_gbs": gbs("aten"), "flaggems_gbs": gbs("flaggems"), "copy_gbs": copy_gbs,
        "ours_pct_copy": 100.0 * moved / med["ours"] / 1e3 / copy_gbs,
        "flaggems": fg, "det_errors": det_errors,
        "host_us": host_time(sw, op, fn, sets[0], device),
        **(kernel_split(sw, op, fn, sets[0]) if device.type == "cuda" else {"validate_pct": None}),
        "raw_us": t,
    }
    del sets, csrc, cdst
    return row


def _f(v, fmt):
    return "-" if v is None or v != v else format(v, fmt)


def table(rows):
    out = ["| case | dtype | shapes | ours us | ATen us | ATen/ours | FlagGems us | FlagGems/ours | ours GB/s | ATen GB/s "
           "| copy GB/s | ours % copy | det ours us | det ATen us | det ATen/ours | det ours/ours | validate % | host us |",
           "|---|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for r in rows:
        fg_us, fg_ratio = fgc.fg_cells(r)
        out.append(f"| {r['case']} | {r['dtype']} | {r['shapes']} | {r['ours_us']:.1f} | {r['aten_us']:.1f} | "
                   f"{r['ratio']:.2f} | {fg_us} | {fg_ratio} | {r['ours_gbs']:.0f} | {r['aten_gbs']:.0f} | "
                   f"{r['copy_gbs']:.0f} | {r['ours_pct_copy']:.0f}% | {_f(r['ours_det_us'], '.1f')} | "
                   f"{_f(r['aten_det_us'], '.1f')} | {_f(r['ratio_det'], '.2f')} | {_f(r['det_over_fast'], '.2f')} | "
                   f"{_f(r['validate_pct'], '.1f')} | {r['host_us']:.0f} |")
    notes = [f"- ours is not stridewise's kernel ({why}): {cases}"
             for why, cases in fgc.grouped(rows, lambda r: r.get("not_ours")).items()]
    notes += fgc.fg_notes(rows)
    for who in ("ours", "aten"):
        notes += [f"- deterministic mode, {'ATen' if who == 'aten' else who} not timed ({err}): {cases}"
                  for err, cases in fgc.grouped(rows, lambda r: r["det_errors"].get(who)).items()]
    return "\n".join(out + ([""] + notes if notes else []))


BYTES_NOTE = "src read + index storage addressed + 2 x out bytes touched"


def summary_line(case, dtype_name, r):
    fg = f"FlagGems {r['flaggems_us']:9.1f} us" if r["flaggems"]["ran"] else "FlagGems -"
    return (f"{case:15s} {dtype_name:9s} ours {r['ours_us']:9.1f} us ATen {r['aten_us']:9.1f} us {fg} "
            f"x{r['ratio']:.2f} det x{_f(r['ratio_det'], '.2f')} host {r['host_us']:.0f} us")


add_args = fgc.add_args  # --flaggems auto|on|off


def _write(out_dir, name, head, rows, partial):
    (out_dir / f"{name}.json").write_text(json.dumps({"header": head, "partial": partial, "rows": rows}, indent=1))


def main(argv=None, name="bench_scatter", title="scatter family: stridewise vs ATen and FlagGems", driver=None):
    """The driver shared by the scatter-shaped benchmarks. ``driver`` is the module that makes
    the rows (default: this one): its MAKERS and CASE_ORDER (case names), bench_case(args, sw,
    case, dtype_name, device, timer, l2) -> row, table(rows) -> markdown, summary_line(case,
    dtype_name, row) -> the progress line, BYTES_NOTE (what a row's bytes count) and, optionally,
    add_args(parser) for its own options (bench_adv.py passes itself), and CASE_GROUPS ({name:
    [cases]}: `--cases NAME` stands for its cases)."""
    drv = driver or sys.modules[__name__]
    p = argparse.ArgumentParser(description=(drv.__doc__ or __doc__).split("\n")[0])
    p.add_argument("--quick", action="store_true")
    groups = getattr(drv, "CASE_GROUPS", {})
    p.add_argument("--cases", default=",".join(drv.CASE_ORDER),
                   help="comma list of cases" + "".join(f"; {g}: {', '.join(c)}" for g, c in groups.items()))
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
    cases = list(dict.fromkeys(x for c in args.cases.split(",") if c for x in groups.get(c, [c])))
    dtypes = [d for d in args.dtypes.split(",") if d]
    for c in cases:
        if c not in drv.MAKERS:
            p.error(f"unknown case {c!r}")
    for d in dtypes:
        if d not in DTYPES:
            p.error(f"unknown dtype {d!r}")
    device = torch.device(args.device)
    if device.type == "cuda" and not torch.cuda.is_available():
        raise SystemExit("no CUDA device: this benchmark needs the GPU machine")
    import stridewise as sw  # noqa: E402
    timer = Timer(device)
    l2 = torch.cuda.get_device_properties(device).L2_cache_size if device.type == "cuda" else 32 << 20
    head = "\n".join(
        ("- time per call: median over repetitions of (batch time / calls in batch), CUDA events; bytes = "
         + drv.BYTES_NOTE if ln.startswith("- time per call") else ln)
        for ln in header(args, device, argv).replace("gather benchmark", f"{name.removeprefix('bench_')} benchmark")
        .splitlines())
    out_dir = Path(os.environ["OUT"]) if os.environ.get("OUT") else ROOT / "bench" / "results"
    out_dir.mkdir(parents=True, exist_ok=True)
    rows = []
    for case in cases:
        for d in dtypes:
            r = drv.bench_case(args, sw, case, d, device, timer, l2)
            rows.append(r)
            _write(out_dir, name, head, rows, True)  # a run that stops later keeps this row
            print(drv.summary_line(case, d, r), flush=True)
            for k, us in sorted(r.get("kernels_us", {}).items(), key=lambda kv: -kv[1]):
                print(f"    {us:9.1f} us  {k[:160]}", flush=True)
            if device.type == "cuda":
                torch.cuda.empty_cache()
    text = head + f"\n\n## {title}\n\n" + drv.table(rows) + "\n"
    (out_dir / f"{name}.md").write_text(text)
    _write(out_dir, name, head, rows, False)
    # The picture beside the JSON (bench/plot_bench.py); without matplotlib, one line, no failure.
    from plot_bench import plot_or_hint
    plot_or_hint(out_dir / f"{name}.json", out_dir / f"{name}.png")
    print()
    print(text)


if __name__ == "__main__":
    main()
