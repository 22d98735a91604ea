"""The cases of bench/bench_scatter.py: make(dtype, device, gen, shrink) -> (out, index, src,
fn, shapes, dim), where fn(out, index, src) is the call (in place on out), shapes says what the
row measures and dim is the scattered dim. Every maker draws fresh data from `gen` and divides
its big sizes by `shrink` (the CPU smoke run: --device cpu --shrink 64). The list of cases and
what each measures is bench_scatter.py's docstring.

Two groups (`--cases shared` / `--cases perelem`): "shared", the index shared by every line
(expanded along the other dims: MoE combine, GNN aggregation) plus the first per-element case
and a row copy, the cases of issues 10 and 20; "perelem", issue 23's: the index has its own
value per element, along dims 0, 1 and last, into 16 to millions of targets, with contiguous,
transposed and offset out, copy / add / amax / mean, int32 and int64 index.
"""
from __future__ import annotations

import torch


def _randn(shape, dtype, device, gen):
    return torch.randn(shape, dtype=torch.float32, device=device, generator=gen).to(dtype)


# ---- issues 10 and 20: the shared-index cases ------------------------------------------------

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


def _dim1_sizes(shrink):
    return 64 // min(shrink, 8), 4096 // shrink, 1024 // shrink, 1024 // shrink


def make_dim1(dtype, device, gen, shrink):
    B, N, D, K = _dim1_sizes(shrink)
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


# ---- issue 23: an index with its own value per element ---------------------------------------

# reduce -> (the call's words in a row's shapes, how to call it)
REDUCE = {
    "add": ("scatter_add_", lambda d: lambda o, i, s: o.scatter_add_(d, i, s)),
    "copy": ("scatter_ (copy)", lambda d: lambda o, i, s: o.scatter_(d, i, s)),
    "amax": ("amax, include_self", lambda d: lambda o, i, s: o.scatter_reduce_(d, i, s, "amax", include_self=True)),
    "mean": ("mean, not include_self",
             lambda d: lambda o, i, s: o.scatter_reduce_(d, i, s, "mean", include_self=False)),
}
def _out(shape, dtype, device, gen, layout):
    """out of logical `shape` (2-D for "t" and "off"): contig; t, stored transposed (its dims in
    reverse order); off, rows 1.. of a tensor one row longer (a storage offset)."""
    if layout == "t":
        return _randn(tuple(reversed(shape)), dtype, device, gen).t()
    if layout == "off":
        return _randn((shape[0] + 1,) + tuple(shape[1:]), dtype, device, gen)[1:]
    return _randn(shape, dtype, device, gen)


def _shape(sizes):
    return "(" + ",".join(str(s) for s in sizes) + ("," if len(sizes) == 1 else "") + ")"


def _finish(out, idx, src, dim, reduce, index_dtype, what):
    """The maker's tuple, with a self-describing shapes string: out <- src, the dim, the index
    pattern, out's layout when not contiguous, the call and the index dtype."""
    idx = idx.to(index_dtype)
    words, call = REDUCE[reduce]
    layout = ""
    if out.dim() == 2 and out.stride(0) == 1:
        layout = f", out stored transposed {_shape(tuple(reversed(out.shape)))}"
    elif out.storage_offset():
        layout = f", out a view at storage offset {out.storage_offset()}"
    sep = " " if what.startswith("(") else ", "
    itype = "int32" if index_dtype == torch.int32 else "int64"
    desc = f"out {_shape(out.shape)} <- {_shape(src.shape)} dim {dim}{sep}{what}{layout}, {words}, {itype} index"
    return out, idx, src, call(dim), desc, dim


def per_element(where, reduce="add", bins=None, layout="contig", index_dtype=torch.int64):
    """A maker for one per-element class. where: "dim1" (out (64,4096,1024) <- (64,1024,1024)),
    "dim0" (out (4096,8192) <- (4096,8192)), "last" (out (1M, bins) <- (1M, 128); bins 1024:
    out (65536,1024) <- (65536,1024)), "hist" (out (bins,) <- (16M,)), "perm" (out (8192,4096) <-
    (8192,4096), each column of the index a permutation of the rows: distinct targets)."""
    def make(dtype, device, gen, shrink):
        ri = lambda hi, shape: torch.randint(0, hi, shape, device=device, generator=gen)  # noqa: E731
        if where == "dim1":
            B, N, D, K = _dim1_sizes(shrink)
            out, idx, dim = _out((B, N, D), dtype, device, gen, layout), ri(N, (B, K, D)), 1
            what = f"per-element index in [0,{N})"
        elif where == "dim0":
            R, C = 4096 // shrink, 8192 // shrink
            out, idx, dim = _out((R, C), dtype, device, gen, layout), ri(R, (R, C)), 0
            what = f"per-element index in [0,{R})"
        elif where == "last":
            if bins >= 1024:
                R, K, n = 65536 // shrink, 1024 // min(shrink, 4), 1024 // min(shrink, 4)
            else:
                R, K, n = (1 << 20) // shrink, 128, bins
            out, idx, dim = _out((R, n), dtype, device, gen, layout), ri(n, (R, K)), 1
            what = f"(last), per-element index in [0,{n})"
        elif where == "hist":
            N, n = (1 << 24) // shrink, max(bins // shrink, min(bins, 16))
            out, idx, dim = _out((n,), dtype, device, gen, layout), ri(n, (N,)), 0
            what = f"1-D histogram, index in [0,{n})"
        elif where == "perm":
            R, C = 8192 // shrink, 4096 // shrink
            out, dim = _out((R, C), dtype, device, gen, layout), 0
            idx = torch.rand((R, C), device=device, generator=gen).argsort(dim=0)
            what = "every index column a permutation of the rows"
        else:
            raise ValueError(where)
        src = _randn(idx.shape, dtype, device, gen)
        return _finish(out, idx, src, dim, reduce, index_dtype, what)
    make.reduce = reduce
    return make


I32 = torch.int32
SHARED = {
    "moe_add": lambda *a: _moe(*a, "add"), "moe_amax": lambda *a: _moe(*a, "amax"),
    "moe_add_nc": lambda *a: _moe(*a, "add", contiguous=False),
    "gnn_sum": lambda *a: _gnn(*a, "sum"), "gnn_mean": lambda *a: _gnn(*a, "mean"),
    "gnn_amax": lambda *a: _gnn(*a, "amax"), "gnn_sorted": lambda *a: _gnn(*a, "sum", ordered=True),
    "dup_add": lambda *a: _moe(*a, "add", pattern="dup"),
    "dim1_add": make_dim1, "copy_rows": make_copy_rows,
}
PER_ELEMENT = {
    "dim1_add_i32": per_element("dim1", index_dtype=I32),
    "dim1_amax": per_element("dim1", "amax"),
    "dim1_mean": per_element("dim1", "mean"),
    "dim0_add": per_element("dim0"),
    "dim0_add_t": per_element("dim0", layout="t"),
    "last_add_16": per_element("last", bins=16),
    "last_add_64": per_element("last", bins=64),
    "last_add_64_i32": per_element("last", bins=64, index_dtype=I32),
    "last_amax_64": per_element("last", "amax", bins=64),
    "last_mean_64": per_element("last", "mean", bins=64),
    "last_add_1k": per_element("last", bins=1024),
    "last_add_off": per_element("last", bins=64, layout="off"),
    "last_add_t": per_element("last", bins=64, layout="t"),
    "hist_16": per_element("hist", bins=16),
    "hist_4k": per_element("hist", bins=4096),
    "hist_1m": per_element("hist", bins=1 << 20),
    "hist_4k_i32": per_element("hist", bins=4096, index_dtype=I32),
    "hist_4k_mean": per_element("hist", "mean", bins=4096),
    "perm_copy": per_element("perm", "copy"),
    "perm_copy_t": per_element("perm", "copy", layout="t"),
}
MAKERS = {**SHARED, **PER_ELEMENT}
# case -> bytes(out0, i0) for cases whose bytes per call are not the driver's default (src read +
# index + 2 x out touched): bench_index.py's fills count the sectors they write.
BYTES_OF: dict = {}
CASE_ORDER = list(MAKERS)
CASE_GROUPS = {"shared": list(SHARED), "perelem": list(PER_ELEMENT)}
# The routing name of each case's op (stridewise.use(include=[...])); the rest: scatter_reduce.
OP_OF = {"moe_add": "scatter_add", "moe_add_nc": "scatter_add", "dup_add": "scatter_add",
         "dim1_add": "scatter_add", "copy_rows": "scatter",
         **{c: {"add": "scatter_add", "copy": "scatter"}.get(m.reduce, "scatter_reduce")
            for c, m in PER_ELEMENT.items()}}
