#!/usr/bin/env python3
"""Advanced indexing, take and put (issue 22): stridewise vs ATen and FlagGems on one CUDA device.

    PYTHONPATH=python python3 bench/bench_adv.py                      # every case, 3 dtypes
    PYTHONPATH=python python3 bench/bench_adv.py --quick              # the whole table, fewer repetitions
    PYTHONPATH=python python3 bench/bench_adv.py --quick --cases acc,rows --dtypes bfloat16
    PYTHONPATH=python python3 bench/bench_adv.py --cpu-smoke          # tiny sizes on the CPU (CI, no GPU)

Cases (x is self; i, j index tensors; "nc": self non-contiguous):
  acc, acc_s, acc_l x (2M, 1024).index_put_((i,), v (M, 1024), accumulate=True), i uniform:
                    `x[i] += v` as autograd runs it (the backward of x[i]); M = 32768 (issue 22's
                    measurement), 4096 (_s) and 262144 (_l)
  acc_sorted        acc with i sorted
  acc_dup           acc with every i in [0, 16): heavy duplicates
  acc_nc            acc with x a column slice (row stride 1088) and v stored transposed
  acc_hot64, acc_hot1  acc with every i one of 64 (1) random rows (the backward of a gather of few
                    rows: long runs of one row); acc_hot64_nc: with acc_nc's layouts
  acc_w64, acc_w4096   acc with rows of 64 (M = 524288) and 4096 (M = 8192) elements;
                    acc_hot64_w4096: 64 hot rows of 4096
  acc_ij, acc_ij_hot   x (16, 4096, 1024).index_put_((i, j), v (32768, 1024), accumulate=True): two
                    index tensors (token positions); _hot: j one of 64 values
  rows              x (65536, 1024)[i], 32768 uniform i; rows_sorted, rows_dup, rows_hot (hot64):
                    the patterns above;
                    rows_nc: x stored transposed
  cols, cols_nc     x (4096, 4096)[:, i], 2048 uniform i; _nc: x stored transposed
  ij, ij_nc         x (16, 4096, 1024)[i, j], i in [0, 16), j in [0, 4096), 32768 each: rows at
                    two indexed dims (a gather of token positions); _nc: x stored (4096, 16, 1024)
  ij_elems          x (8192, 8192)[i, j], 2**22 elements
  mask, mask_nc     x (65536, 1024)[mask], mask (65536,) bool, about half true (ATen and ours
                    pay the nonzero's host sync alike); _nc: x stored transposed
  mask_put          x.index_put_((mask,), v (nnz, 1024)): `x[mask] = v`
  take, take_nc     torch.take(x (4096, 4096), i (2**22,) uniform over x.numel()); _nc: x transposed
  put, put_nc       x.put_(i, v (2**22,)) with distinct i (bitwise comparable); _nc: x transposed
  put_acc           x.put_(i, v, accumulate=True) with uniform i (duplicates)
  put_acc16, put_acc16_cl  x (8192, 8192).put_(i (2**24), v, accumulate=True): i uniform, or
                    clustered (4096 random windows of 4096 elements): take's backward at scale

"ours" is the same call routed with stridewise.use(include=[op]), op one of "index",
"index_put", "take", "put". A case whose op this build does not route, or whose call did not
reach stridewise (stridewise.stats() counts no call of the op, or counts a fallback to ATen's
kernel), is reported "not routed" and only ATen (and FlagGems) are timed. FlagGems (when
`import flag_gems` works and the run is on CUDA) runs under flag_gems.use_gems(include=[its
functions of the op]), or use_gems() when it names none; it is timed only where that changes the
dispatcher's kernel of an overload the call reaches (stridewise.audit.coverage), else "not
registered" (5.0.2 audit: index and index_put only, no take/put). Before timing, each
implementation's result is compared once with ATen's: bitwise for data movement, the float64
rule of bench_scatter.check for accumulation; ours failing stops the run, FlagGems failing is
marked in its column ("!") and still timed.

Method: bench_scatter.py's (CUDA events around batches, warm-up, median, implementations
interleaved with the order rotated, input sets rotated past twice the L2; an in-place op runs
on the set's own self each call, which an accumulation grows: same cost). Accumulating cases
are also timed in deterministic mode, ours and ATen's ("det" columns; not FlagGems; a side
that raises there, as ATen's put_(accumulate=True) on CUDA does, is named under the table). Bytes per
call: see BYTES_NOTE. The copy reference is dst.copy_(src) of the payload (the result for
reads, the values for writes), GB/s counted read + write: "% copy" is the fraction of a copy's
bandwidth. The results go to $OUT (or bench/results) as bench_adv.md / .json / .png.
"""
from __future__ import annotations

import contextlib
import math
import statistics
import sys
from pathlib import Path
from typing import Callable, NamedTuple

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
import bench_scatter as bs  # noqa: E402
import fg_common as fgc  # noqa: E402
from bench_gather import DTYPES, bitwise_equal, index_bytes, pick_inner, run_batches  # noqa: E402
from bench_scatter import _randn  # noqa: E402

BYTES_NOTE = ("per case, each element moved once: reads = result written + elements read + index (or "
              "mask) read; writes = values read + elements written + index; accumulation = values read "
              "+ index + 2 x the distinct elements of self addressed (each read and written once: the "
              "limit a call that sums duplicates before it writes can reach); limit us = those bytes at "
              "the same run's copy GB/s")
CPU_SMOKE = ["--device", "cpu", "--shrink", "64", "--quick", "--reps", "1", "--target-us", "50"]


class Case(NamedTuple):
    args: tuple          # one input set; the call is fn(*args)
    fn: Callable
    desc: str
    moved: int           # bytes per call (BYTES_NOTE)
    payload: int         # elements of the copy reference
    mutates: bool        # fn writes args[0] in place


# ---- inputs ---------------------------------------------------------------------------------

def _index(n, m, pattern, device, gen):
    """m indices into [0, n): uniform, sorted, dup (16 values), hot64 / hot1 (64 / 1 random values
    of [0, n)), clustered (4096 random windows of 4096 values) or distinct (a permutation's head)."""
    if pattern == "distinct":
        return torch.randperm(n, device=device, generator=gen)[:m]
    if pattern in ("hot64", "hot1"):
        hot = torch.randperm(n, device=device, generator=gen)[: 64 if pattern == "hot64" else 1]
        return hot[torch.randint(0, hot.numel(), (m,), device=device, generator=gen)]
    if pattern == "clustered":
        starts = torch.randint(0, max(n - 4096, 1), (4096,), device=device, generator=gen)
        pick = torch.randint(0, 4096, (m,), device=device, generator=gen)
        off = torch.randint(0, min(4096, n), (m,), device=device, generator=gen)
        return (starts[pick] + off).clamp_(max=n - 1)
    i = torch.randint(0, min(16, n) if pattern == "dup" else n, (m,), device=device, generator=gen)
    return i.sort().values if pattern == "sorted" else i


def _touched(*index):
    """Distinct positions the index tensors address together (the rows or elements an
    accumulation must read and write once)."""
    if len(index) == 1:
        return int(torch.unique(index[0]).numel())
    key = index[0].to(torch.int64) * (int(index[1].max()) + 1) + index[1]
    return int(torch.unique(key).numel())


def _matrix(rows, cols, dtype, device, gen, layout="contig"):
    """(rows, cols) values: contig; slice (a column slice of rows of cols + 64); t (stored transposed)."""
    if layout == "slice":
        return _randn((rows, cols + 64), dtype, device, gen)[:, :cols]
    if layout == "t":
        return _randn((cols, rows), dtype, device, gen).t()
    return _randn((rows, cols), dtype, device, gen)


def same_layout_clone(t):
    """A copy with t's sizes and strides (clone() would make a column slice contiguous)."""
    return torch.empty_strided(t.size(), t.stride(), dtype=t.dtype, device=t.device).copy_(t)


def _nbytes(t):
    return t.numel() * t.element_size()


# ---- cases: make(dtype, device, gen, shrink) -> Case -------------------------------------

def acc(m=32768, pattern="uniform", nc=False, width=1024):
    def make(dtype, device, gen, shrink):
        M, D = max(m // shrink, 16), max(width // min(shrink, 8), 8)
        x = _matrix(2 * M, D, dtype, device, gen, "slice" if nc else "contig")
        v = _matrix(M, D, dtype, device, gen, "t" if nc else "contig")
        i = _index(2 * M, M, pattern, device, gen)
        fn = lambda x, i, v: x.index_put_((i,), v, accumulate=True)  # noqa: E731
        what = ", x a column slice, v transposed" if nc else ""
        return Case((x, i, v), fn, f"x ({2 * M},{D})[i ({M}) {pattern}] += v ({M},{D}){what}",
                    _nbytes(v) + 2 * _touched(i) * D * x.element_size() + index_bytes(i), v.numel(), True)
    return make


def acc_ij(pattern="uniform"):
    """x (16, 4096, D)[i, j] += v: two index tensors (the backward of a token gather x[b, t])."""
    def make(dtype, device, gen, shrink):
        B, T, D, M = 16, 4096 // shrink, 1024 // min(shrink, 8), 32768 // shrink
        x = _randn((B, T, D), dtype, device, gen)
        i, j = _index(B, M, "uniform", device, gen), _index(T, M, pattern, device, gen)
        v = _randn((M, D), dtype, device, gen)
        fn = lambda x, i, j, v: x.index_put_((i, j), v, accumulate=True)  # noqa: E731
        return Case((x, i, j, v), fn, f"x ({B},{T},{D})[i ({M}), j ({M}) {pattern}] += v ({M},{D})",
                    _nbytes(v) + 2 * _touched(i, j) * D * x.element_size() + index_bytes(i) + index_bytes(j),
                    v.numel(), True)
    return make


def rows(pattern="uniform", nc=False):
    def make(dtype, device, gen, shrink):
        N, M, D = 65536 // shrink, 32768 // shrink, 1024 // min(shrink, 8)
        x, i = _matrix(N, D, dtype, device, gen, "t" if nc else "contig"), _index(N, M, pattern, device, gen)
        return Case((x, i), lambda x, i: x[i], f"x ({N},{D}){' transposed' if nc else ''}[i ({M}) {pattern}]",
                    2 * M * D * x.element_size() + index_bytes(i), M * D, False)
    return make


def cols(nc=False):
    def make(dtype, device, gen, shrink):
        N, M = 4096 // shrink, 2048 // shrink
        x, i = _matrix(N, N, dtype, device, gen, "t" if nc else "contig"), _index(N, M, "uniform", device, gen)
        return Case((x, i), lambda x, i: x[:, i], f"x ({N},{N}){' transposed' if nc else ''}[:, i ({M})]",
                    2 * N * M * x.element_size() + index_bytes(i), N * M, False)
    return make


def two_index(elems=False, nc=False):
    def make(dtype, device, gen, shrink):
        if elems:
            N, M = 8192 // shrink, (1 << 22) // shrink
            x, shape, D = _randn((N, N), dtype, device, gen), (N, N), 1
        else:
            B, T, D, M = 16, 4096 // shrink, 1024 // min(shrink, 8), 32768 // shrink
            x = _randn((T, B, D), dtype, device, gen).transpose(0, 1) if nc else _randn((B, T, D), dtype, device, gen)
            shape = (B, T, D)
        i, j = _index(shape[0], M, "uniform", device, gen), _index(shape[1], M, "uniform", device, gen)
        what = " stored (T,B,D)" if nc else ""
        return Case((x, i, j), lambda x, i, j: x[i, j], f"x {shape}{what}[i ({M}), j ({M})]",
                    2 * M * D * x.element_size() + index_bytes(i) + index_bytes(j), M * D, False)
    return make


def mask(write=False, nc=False):
    def make(dtype, device, gen, shrink):
        N, D = 65536 // shrink, 1024 // min(shrink, 8)
        x = _matrix(N, D, dtype, device, gen, "t" if nc else "contig")
        m = torch.rand((N,), device=device, generator=gen) < 0.5
        nnz = int(m.sum())
        moved = 2 * nnz * D * x.element_size() + _nbytes(m)
        shown = f"x ({N},{D}){' transposed' if nc else ''}[mask ({N}) {nnz} true]"
        if write:
            v = _randn((nnz, D), dtype, device, gen)
            return Case((x, m, v), lambda x, m, v: x.index_put_((m,), v), shown + f" = v ({nnz},{D})",
                        moved, nnz * D, True)
        return Case((x, m), lambda x, m: x[m], shown, moved, nnz * D, False)
    return make


def take(nc=False):
    def make(dtype, device, gen, shrink):
        N, M = 4096 // min(shrink, 8), (1 << 22) // shrink
        x = _matrix(N, N, dtype, device, gen, "t" if nc else "contig")
        i = _index(N * N, M, "uniform", device, gen)
        return Case((x, i), torch.take, f"take(x ({N},{N}){' transposed' if nc else ''}, i ({M}))",
                    2 * M * x.element_size() + index_bytes(i), M, False)
    return make


def put(accumulate=False, nc=False, n=4096, m=1 << 22, pattern="uniform"):
    def make(dtype, device, gen, shrink):
        N, M = n // min(shrink, 8), m // shrink
        x = _matrix(N, N, dtype, device, gen, "t" if nc else "contig")
        i = _index(N * N, M, pattern if accumulate else "distinct", device, gen)
        v = _randn((M,), dtype, device, gen)
        fn = lambda x, i, v: x.put_(i, v, accumulate=accumulate)  # noqa: E731
        what = f"{pattern}, accumulate" if accumulate else "distinct"
        moved = (_nbytes(v) + 2 * _touched(i) * x.element_size() if accumulate else 2 * _nbytes(v)) + index_bytes(i)
        return Case((x, i, v), fn, f"x ({N},{N}){' transposed' if nc else ''}.put_(i ({M}) {what}, v)",
                    moved, M, True)
    return make


def upsample():
    """Nearest 2x upsampling as torch.compile's decomposition writes it: _unsafe_index with a
    (2H, 1) and a (2W,) index broadcast over an NCHW tensor."""
    def make(dtype, device, gen, shrink):
        B, C, H = 8, 64 // min(shrink, 8), 256 // min(shrink, 16)
        x = _randn((B, C, H, H), dtype, device, gen)
        ih = (torch.arange(2 * H, device=device) // 2).unsqueeze(1)
        iw = torch.arange(2 * H, device=device) // 2
        n = B * C * 4 * H * H
        return Case((x, ih, iw), lambda x, ih, iw: torch.ops.aten._unsafe_index(x, [None, None, ih, iw]),
                    f"_unsafe_index(x ({B},{C},{H},{H}), [:, :, ih ({2 * H},1), iw ({2 * H})])",
                    n * x.element_size() + B * C * H * H * x.element_size() + index_bytes(ih) + index_bytes(iw),
                    n, False)
    return make


# name -> (maker, routing name, accumulates)
CASES = {
    "acc": (acc(), "index_put", True),
    "acc_s": (acc(4096), "index_put", True),
    "acc_l": (acc(262144), "index_put", True),
    "acc_sorted": (acc(pattern="sorted"), "index_put", True),
    "acc_dup": (acc(pattern="dup"), "index_put", True),
    "acc_nc": (acc(nc=True), "index_put", True),
    "acc_hot64": (acc(pattern="hot64"), "index_put", True),
    "acc_hot1": (acc(pattern="hot1"), "index_put", True),
    "acc_hot64_nc": (acc(pattern="hot64", nc=True), "index_put", True),
    "acc_w64": (acc(m=524288, width=64), "index_put", True),
    "acc_w4096": (acc(m=8192, width=4096), "index_put", True),
    "acc_hot64_w4096": (acc(m=8192, pattern="hot64", width=4096), "index_put", True),
    "acc_ij": (acc_ij(), "index_put", True),
    "acc_ij_hot": (acc_ij("hot64"), "index_put", True),
    "rows": (rows(), "index", False),
    "rows_sorted": (rows("sorted"), "index", False),
    "rows_dup": (rows("dup"), "index", False),
    "rows_nc": (rows(nc=True), "index", False),
    "rows_hot": (rows("hot64"), "index", False),
    "cols": (cols(), "index", False),
    "cols_nc": (cols(nc=True), "index", False),
    "ij": (two_index(), "index", False),
    "ij_nc": (two_index(nc=True), "index", False),
    "ij_elems": (two_index(elems=True), "index", False),
    "mask": (mask(), "index", False),
    "upsample": (upsample(), "index", False),
    "mask_nc": (mask(nc=True), "index", False),
    "mask_put": (mask(write=True), "index_put", False),
    "take": (take(), "take", False),
    "take_nc": (take(nc=True), "take", False),
    "put": (put(), "put", False),
    "put_nc": (put(nc=True), "put", False),
    "put_acc": (put(accumulate=True), "put", True),
    "put_acc16": (put(accumulate=True, n=8192, m=1 << 24), "put", True),
    "put_acc16_cl": (put(accumulate=True, n=8192, m=1 << 24, pattern="clustered"), "put", True),
}
MAKERS = {name: make for name, (make, _, _) in CASES.items()}
CASE_ORDER = list(CASES)


# ---- who runs the call ----------------------------------------------------------------------

def _result(case, ctx=contextlib.nullcontext):
    """The call on the first set (its self copied first when the call writes it)."""
    a = list(case.args)
    if case.mutates:
        a[0] = same_layout_clone(a[0])
    with ctx():
        return case.fn(*a)


def _agrees(case, accumulate, got, want, errs=None, who=None):
    """(ok, how): bitwise for data movement; bench_scatter.check's float64 rule for accumulation.
    errs (a dict): receives errs[who] and errs["aten"], the largest error from float64 relative to
    max(|ref|, 1), for the accuracy columns."""
    if not accumulate:
        return bitwise_equal(got, want), "bitwise"
    x, *mid, v = case.args  # self, the index tensors, the values
    ok, e_got, e_aten = bs.check(lambda r, _i, s: case.fn(r, *mid, s), x, None, v, got, want)
    if errs is not None:
        errs[who], errs["aten"] = e_got, e_aten
    return ok, f"float64 rule: {e_got:.3g} from float64 (ATen {e_aten:.3g})"


def ours_status(sw, op, case, want, accumulate, device, errs=None):
    """Whether the call runs on stridewise with the op routed: {"routed", "why" or "stats", "check"}.
    A routed result that differs from ATen's stops the run."""
    if op not in sw.supported_ops():
        return {"routed": False, "why": f"{op!r} is not in stridewise.supported_ops() of this build"}
    sw.reset_stats()
    got = _result(case, lambda: sw.use(include=[op]))
    if device.type == "cuda":
        sw.check_errors(True)
    st = sw.stats().get(op, {})
    if not st.get("calls"):
        return {"routed": False, "why": f"stridewise.stats()[{op!r}] counted no call"}
    if st.get("fallback"):
        return {"routed": False, "why": "stridewise handed the call to ATen's kernel (fallback)",
                "stats": {k: v for k, v in st.items() if v}}
    ok, how = _agrees(case, accumulate, got, want, errs, "ours")
    if not ok:
        raise SystemExit(f"stridewise differs from ATen ({how}): {case.desc}")
    return {"routed": True, "stats": {k: v for k, v in st.items() if v}, "check": how}


# ---- one row --------------------------------------------------------------------------------

def _ratio(a, b):
    return a / b if a is not None and b else None


def bench_case(args, sw, case, dtype_name, device, timer, l2):
    make, op, accumulate = CASES[case]
    dtype = DTYPES[dtype_name]
    gen = torch.Generator(device=device)
    gen.manual_seed(2222)
    c0 = make(dtype, device, gen, args.shrink)
    set_bytes = sum(_nbytes(t) for t in c0.args)
    n_sets = 2 if device.type == "cpu" else int(min(max(math.ceil(2 * l2 / max(set_bytes, 1)), 2), 64))
    sets = [c0.args] + [make(dtype, device, gen, args.shrink).args for _ in range(n_sets - 1)]

    want = _result(c0)
    errs = {}
    ours = ours_status(sw, op, c0, want, accumulate, device, errs)
    fg = fgc.fg_status(args, device, op, lambda ctx: _result(c0, ctx),
                       lambda got: _agrees(c0, accumulate, got, want, errs, "flaggems"))
    del want
    call = lambda s: c0.fn(*s)  # noqa: E731
    impls, ctx = {}, {}
    if ours["routed"]:
        impls["ours"], ctx["ours"] = call, (lambda: sw.use(include=[op]))
    impls["aten"] = call
    if fg["ran"]:
        impls["flaggems"], ctx["flaggems"] = call, fg.pop("ctx")
    inner = pick_inner(timer, call, sets, args.target_us)
    t = run_batches(timer, impls, sets, inner, args.reps, args.warmup, ctx)
    det_errors = {}
    if accumulate:  # deterministic mode: ATen's always, ours where routed, each that runs (ATen's
        det = {}    # put_(accumulate=True) on CUDA raises there, for one)
        with bs.deterministic(True):
            for k in ("ours", "aten"):
                try:
                    if k in impls:
                        _result(c0, ctx.get(k, contextlib.nullcontext))
                        det[f"{k}_det"] = call
                except RuntimeError as e:
                    det_errors[k] = str(e).splitlines()[0][:160]
            if det:
                t.update(run_batches(timer, det, sets, 1, max(3, args.reps // 3), 1,
                                     {"ours_det": ctx.get("ours", contextlib.nullcontext)}))
    n_copy = max(2, min(8, math.ceil(2 * l2 / max(2 * c0.payload * c0.args[0].element_size(), 1))))
    csrc = [_randn((c0.payload,), dtype, device, gen) for _ in range(n_copy)]
    cdst = torch.empty_like(csrc[0])
    t.update(run_batches(timer, {"copy": lambda k: cdst.copy_(csrc[k])}, list(range(n_copy)), inner,
                         args.reps, args.warmup))
    med = {k: statistics.median(v) for k, v in t.items()}
    us = lambda k: med.get(k)  # noqa: E731
    gbs = lambda k: c0.moved / med[k] / 1e3 if k in med else None  # noqa: E731
    copy_gbs = 2 * _nbytes(csrc[0]) / med["copy"] / 1e3
    row = {
        "case": case, "dtype": dtype_name, "op": op, "shapes": c0.desc, "sets": n_sets, "calls_per_batch": inner,
        "bytes_per_call": c0.moved, "routed": ours["routed"], "ours": ours,
        "flaggems": {k: v for k, v in fg.items() if k != "ctx"},
        "ours_us": us("ours"), "aten_us": us("aten"), "flaggems_us": us("flaggems"), "copy_us": us("copy"),
        "ours_det_us": us("ours_det"), "aten_det_us": us("aten_det"),
        "ratio": _ratio(us("aten"), us("ours")), "ratio_fg": _ratio(us("flaggems"), us("ours")),
        "ratio_det": _ratio(us("aten_det"), us("ours_det")), "det_over_fast": _ratio(us("ours_det"), us("ours")),
        "ours_gbs": gbs("ours"), "aten_gbs": gbs("aten"), "flaggems_gbs": gbs("flaggems"), "copy_gbs": copy_gbs,
        "ours_pct_copy": _ratio(100.0 * (gbs("ours") or 0.0), copy_gbs) if ours["routed"] else None,
        "aten_pct_copy": 100.0 * gbs("aten") / copy_gbs,
        "det_errors": det_errors, "host_us": None, "validate_pct": None, "raw_us": t,
        "limit_us": c0.moved / copy_gbs / 1e3, "err_ours": errs.get("ours"), "err_aten": errs.get("aten"),
        "err_flaggems": errs.get("flaggems"),
    }
    if ours["routed"]:
        row["host_us"] = bs.host_time(sw, op, call, (sets[0],), device)
        if device.type == "cuda" and not args.quick:
            row.update(bs.kernel_split(sw, op, call, (sets[0],)))
    del sets, csrc, cdst
    return row


# ---- report ---------------------------------------------------------------------------------

def _f(v, fmt, none="-"):
    """v formatted ("...%" in fmt: a percentage already, the sign appended), or `none`."""
    if v is None:
        return none
    return format(v, fmt.rstrip("%")) + ("%" if fmt.endswith("%") else "")


def table(rows):
    out = ["| case | dtype | shapes | op | ours us | ATen us | ATen/ours | FlagGems us | FlagGems/ours | ours GB/s "
           "| ATen GB/s | copy GB/s | limit us | ours % copy | ATen % copy | det ours us | det ATen us "
           "| det ATen/ours | det ours/ours | host us | error ours / ATen / FlagGems |",
           "|---|---|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|"]
    for r in rows:
        fg_us, fg_ratio = fgc.fg_cells(r, "n/a")
        out.append(
            f"| {r['case']} | {r['dtype']} | {r['shapes']} | {r['op']} | {_f(r['ours_us'], '.1f', 'not routed')} | "
            f"{r['aten_us']:.1f} | {_f(r['ratio'], '.2f')} | {fg_us} | {fg_ratio} | {_f(r['ours_gbs'], '.0f')} | "
            f"{r['aten_gbs']:.0f} | {r['copy_gbs']:.0f} | {_f(r.get('limit_us'), '.1f')} | "
            f"{_f(r['ours_pct_copy'], '.0f%')} | {r['aten_pct_copy']:.0f}% | "
            f"{_f(r['ours_det_us'], '.1f')} | {_f(r['aten_det_us'], '.1f')} | {_f(r['ratio_det'], '.2f')} | "
            f"{_f(r['det_over_fast'], '.2f')} | {_f(r['host_us'], '.0f')} | "
            f"{_f(r.get('err_ours'), '.2g')} / {_f(r.get('err_aten'), '.2g')} / {_f(r.get('err_flaggems'), '.2g')} |")
    notes = [f"- not routed ({why}): {cases}" for why, cases in fgc.grouped(rows, lambda r: None if r["routed"]
                                                                         else r["ours"]["why"]).items()]
    notes += fgc.fg_notes(rows)
    for who in ("ours", "aten"):
        notes += [f"- deterministic mode, {'ATen' if who == 'aten' else who} not timed ({err}): {cases}" for err, cases
                  in fgc.grouped(rows, lambda r: r["det_errors"].get(who)).items()]
    return "\n".join(out + [""] + notes)


def summary_line(case, dtype_name, r):
    fg = f"FlagGems {r['flaggems_us']:9.1f} us" if r["flaggems"]["ran"] else "FlagGems n/a"
    ours = f"ours {r['ours_us']:9.1f} us" if r["routed"] else "ours not routed"
    return (f"{case:11s} {dtype_name:9s} {ours} ATen {r['aten_us']:9.1f} us {fg} "
            f"x{_f(r['ratio'], '.2f')} det x{_f(r['ratio_det'], '.2f')} {_f(r['ours_pct_copy'], '.0f')}% of copy")


add_args = fgc.add_args  # --flaggems auto|on|off


def main(argv=None):
    argv = list(sys.argv[1:] if argv is None else argv)
    if "--cpu-smoke" in argv:  # every code path at tiny sizes on the CPU (tests/test_bench_adv_smoke.py)
        argv = [a for a in argv if a != "--cpu-smoke"] + CPU_SMOKE
        torch.set_num_threads(1)  # a shared CI core: OpenMP waits cost ms per call at these sizes
    bs.main(argv, name="bench_adv", title="advanced indexing, take, put: stridewise vs ATen and FlagGems",
            driver=sys.modules[__name__])


if __name__ == "__main__":
    main()
