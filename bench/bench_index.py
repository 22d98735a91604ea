#!/usr/bin/env python3
"""stridewise's dim-indexed ops vs ATen and FlagGems on one CUDA device, measured in the same
run with bench_scatter.py's method and columns (FlagGems: bench/fg_common.py, where its import
works and it registers the op).

    PYTHONPATH=python python3 bench/bench_index.py                   # every case, 3 dtypes
    PYTHONPATH=python python3 bench/bench_index.py --quick --cases moe_index_add --dtypes bfloat16
    PYTHONPATH=python python3 bench/bench_index.py --device cpu --shrink 16 --quick   # smoke run

Cases (issue 21's list; T*k = 131072 rows of H = 4096 into T = 16384 for the MoE combine):
  moe_index_add     out (T, H).index_add_(0, tok (T*k), src (T*k, H)): top-k routing, each token
                    exactly k = 8 times in shuffled order (ATen 4.49 ms bfloat16 / 3.69 ms float32
                    on the H200, 2026-11-29)
  moe_index_add_nc  the same with src stored transposed and out a column slice
  dup_index_add     moe_index_add with every index value in [0, 16): heavy duplicates
  sorted_index_add  moe_index_add with the index sorted
  index_amax        moe_index_add's shapes through index_reduce_(..., 'amax')
  index_mean        the same with 'mean', include_self=False
  select_rows       index_select(self (65536, 1024), 0, 32768 uniform indices, out=)
  select_rows_topk  the same with 32768 indices clustered as top-k results (sorted runs)
  select_rows_nc    select_rows from a transposed self (stored (1024, 65536)): each row read is a
                    column of the storage (issue 37: 5% of a copy's bandwidth in ATen and ours)
  select_rows_hot   select_rows with every index one of 64 hot rows
  select_cols       index_select(self (4096, 4096), 1, 2048 uniform indices, out=)
  select_cols_nc    the same from a transposed self
  copy_rows         out (65536, 1024).index_copy_(0, 32768 distinct rows, src)
  embedding_fwd     embedding.out(weight (65536, 1024), ids (32, 1024) uniform)
  embedding_bwd     embedding_dense_backward(grad (32, 1024, 1024), ids, 65536) copied into a
                    preallocated out (the copy is in both sides' time)
  emb_bwd_4096, emb_bwd_zipf, emb_bwd_one   grad (64, 512, 4096) into 50000 rows (issue 36): ids
                    uniform, Zipf-skewed (P(k) ~ 1/k) or one token; emb_bwd_768, emb_bwd_768_zipf:
                    768 wide; emb_bwd_pad: padding_idx (an id that occurs); emb_bwd_freq: Zipf ids
                    with scale_grad_by_freq
  fill_cols         self (8192, 16384).index_fill_(1, 1024 distinct random columns, 3.0): one
                    element per 32-byte sector along a row (issue 33's case)
  fill_cols_64      the same with 64 columns (few keys: a launch-bound call)
  fill_cols_t       fill_cols' call on a self stored transposed (randn(16384, 8192).t()): each
                    filled column is a contiguous run in memory
  fill_rows         self (8192, 16384).index_fill_(0, 1024 distinct random rows, 3.0)
  fill_rows_t       fill_rows' call on the transposed self: scattered along memory rows
The fills' bytes per call are the index plus the 32-byte sectors of self they write, each once
(bytes_of_fill); the copy reference copies self's bytes. "limit" is those bytes at the copy's
GB/s.
Each case also runs in deterministic mode for ours and ATen ("det" columns). The results go to
$OUT (or bench/results) as bench_index.md / .json / .png.
"""
from __future__ import annotations

import math
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
import bench_scatter as bs  # noqa: E402
from bench_scatter import _randn  # noqa: E402


def _moe_rows(device, gen, shrink, pattern):
    T, H, k = 16384 // shrink, 4096 // min(shrink, 16), 8
    if pattern == "dup":
        tok = torch.randint(0, min(16, T), (T * k,), device=device, generator=gen)
    else:
        tok = torch.arange(T, device=device).repeat_interleave(k)
        if pattern != "sorted":
            tok = tok[torch.randperm(T * k, device=device, generator=gen)]
    return T, H, k, tok


def moe(reduce="add", pattern="topk", contiguous=True):
    def make(dtype, device, gen, shrink):
        T, H, k, tok = _moe_rows(device, gen, shrink, pattern)
        if contiguous:
            out, src = _randn((T, H), dtype, device, gen), _randn((T * k, H), dtype, device, gen)
        else:
            out = _randn((T, H + 64), dtype, device, gen)[:, :H]
            src = _randn((H, T * k), dtype, device, gen).t()
        if reduce == "add":
            fn = lambda o, i, s: o.index_add_(0, i, s)  # noqa: E731
        elif reduce == "mean":
            fn = lambda o, i, s: o.index_reduce_(0, i, s, "mean", include_self=False)  # noqa: E731
        else:
            fn = lambda o, i, s: o.index_reduce_(0, i, s, reduce)  # noqa: E731
        nc = "" if contiguous else " (src transposed, out a slice)"
        return out, tok, src, fn, f"out ({T},{H}) <- ({T * k},{H}) {pattern}{nc}", 0
    return make


def select(dim, pattern="uniform", transposed=False):
    def make(dtype, device, gen, shrink):
        if dim == 0:
            N, D, M = 65536 // shrink, 1024 // min(shrink, 8), 32768 // shrink
            self_ = _randn((D, N), dtype, device, gen).t() if transposed else \
                _randn((N, D), dtype, device, gen)
        else:
            N, D, M = 4096 // shrink, 4096 // shrink, 2048 // shrink
            self_ = _randn((D, N), dtype, device, gen).t() if transposed else \
                _randn((N, D), dtype, device, gen)
        n_dim = self_.size(dim)
        if pattern == "topk":  # runs of neighbouring rows, as top-k results sorted by position
            idx = (torch.randint(0, n_dim, (M // 8, 1), device=device, generator=gen)
                   + torch.arange(8, device=device)).clamp_max(n_dim - 1).view(-1)
        elif pattern == "hot":
            hot = torch.randperm(n_dim, device=device, generator=gen)[:64]
            idx = hot[torch.randint(0, 64, (M,), device=device, generator=gen)]
        else:
            idx = torch.randint(0, n_dim, (M,), device=device, generator=gen)
        shape = list(self_.shape)
        shape[dim] = M
        out = torch.empty(shape, dtype=dtype, device=device)
        fn = lambda o, i, s: torch.index_select(s, dim, i, out=o)  # noqa: E731
        layout = " transposed" if transposed else ""
        return out, idx, self_, fn, f"({tuple(self_.shape)}){layout} dim {dim} <- {M} {pattern}", 0
    return make


def copy_rows(dtype, device, gen, shrink):
    N, M, D = 65536 // shrink, 32768 // shrink, 1024 // min(shrink, 8)
    rows = torch.randperm(N, device=device, generator=gen)[:M]
    return (_randn((N, D), dtype, device, gen), rows, _randn((M, D), dtype, device, gen),
            lambda o, i, s: o.index_copy_(0, i, s), f"out ({N},{D}) <- rows ({M},{D})", 0)


def embedding(backward):
    def make(dtype, device, gen, shrink):
        N, D, B, L = 65536 // shrink, 1024 // min(shrink, 8), 32, 1024 // shrink
        ids = torch.randint(0, N, (B, L), device=device, generator=gen)
        if backward:
            grad = _randn((B, L, D), dtype, device, gen)
            fn = lambda o, i, s: o.copy_(  # noqa: E731
                torch.ops.aten.embedding_dense_backward(s, i, o.shape[0], -1, False))
            return torch.empty(N, D, dtype=dtype, device=device), ids, grad, fn, \
                f"grad ({B},{L},{D}) -> ({N},{D})", 0
        w = _randn((N, D), dtype, device, gen)
        fn = lambda o, i, s: torch.ops.aten.embedding.out(s, i, out=o)  # noqa: E731
        return torch.empty(B, L, D, dtype=dtype, device=device), ids, w, fn, \
            f"weight ({N},{D}) <- ids ({B},{L})", 0
    return make


def _ids(n, shape, pattern, device, gen):
    """Token ids in [0, n): uniform, zipf (P(k) ~ 1/(k+1), ranks shuffled over the vocabulary) or
    one (a single token everywhere)."""
    if pattern == "one":
        return torch.full(shape, n // 2, device=device, dtype=torch.int64)
    if pattern == "zipf":
        w = 1.0 / torch.arange(1, n + 1, device=device, dtype=torch.float64)
        ranks = torch.multinomial(w, math.prod(shape), replacement=True, generator=gen)
        return torch.randperm(n, device=device, generator=gen)[ranks].view(shape)
    return torch.randint(0, n, shape, device=device, generator=gen)


def embedding_bwd(pattern="uniform", D=4096, padding_idx=-1, scale=False):
    """embedding_dense_backward(grad (64, 512, D), ids, 50000, padding_idx, scale_grad_by_freq)
    (issue 36's cases). The result becomes out's storage (set_, no copy): the call alone is timed,
    its fresh (50000, D) result from the caching allocator on both sides."""
    def make(dtype, device, gen, shrink):
        N, B, L, d = 50000 // shrink, 64, 512 // shrink, D // min(shrink, 8)
        ids = _ids(N, (B, L), pattern, device, gen)
        pad = -1 if padding_idx < 0 else int(ids.flatten()[0])  # a padding id that occurs
        grad = _randn((B, L, d), dtype, device, gen)
        fn = lambda o, i, s: o.set_(  # noqa: E731
            torch.ops.aten.embedding_dense_backward(s, i, o.shape[0], pad, scale))
        what = f"{pattern}{', padding_idx' if pad >= 0 else ''}{', scale_grad_by_freq' if scale else ''}"
        return torch.empty(N, d, dtype=dtype, device=device), ids, grad, fn, \
            f"grad ({B},{L},{d}) -> ({N},{d}) {what}", 0
    return make


def fill(dim, m=1024, transposed=False):
    def make(dtype, device, gen, shrink):
        R, C = 8192 // shrink, 16384 // shrink
        self_ = _randn((C, R), dtype, device, gen).t() if transposed else _randn((R, C), dtype, device, gen)
        k = max(1, m // shrink)
        idx = torch.randperm(self_.size(dim), device=device, generator=gen)[:k]
        ref = torch.empty(R * C, dtype=dtype, device=device)  # the copy reference: self's bytes
        fn = lambda o, i, s: o.index_fill_(dim, i, 3.0)  # noqa: E731
        t = " (self transposed)" if transposed else ""
        return self_, idx, ref, fn, f"({R},{C}){t} dim {dim} <- {k} {'columns' if dim else 'rows'}", 0
    return make


def bytes_of_fill(dim):
    """The index's bytes plus the 32-byte sectors of self the fill writes, each counted once:
    a marker with self's layout is filled the same way and its storage read by sector."""
    def count(out0, i0):
        n = out0.untyped_storage().nbytes()
        mark = torch.zeros(n, dtype=torch.uint8, device=out0.device)
        es = out0.element_size()  # the first byte of each element written stands for it
        view = mark.as_strided(out0.size(), [s * es for s in out0.stride()], out0.storage_offset() * es)
        view.index_fill_(dim, i0, 1)
        sectors = int(mark[: n // 32 * 32].view(-1, 32).amax(1).sum())
        return 32 * sectors + i0.numel() * i0.element_size()
    return count


def bytes_of_embedding_bwd(out0, i0):
    """grad read (len(ids) rows of D), the index, the table written once (N x D)."""
    row = out0.size(1) * out0.element_size()
    return i0.numel() * row + i0.numel() * i0.element_size() + out0.numel() * out0.element_size()


EMB_BWD = ("emb_bwd_4096", "emb_bwd_zipf", "emb_bwd_one", "emb_bwd_768", "emb_bwd_768_zipf", "emb_bwd_pad",
           "emb_bwd_freq")

FILLS = {
    "fill_cols": (1, 1024, False), "fill_cols_64": (1, 64, False), "fill_cols_t": (1, 1024, True),
    "fill_rows": (0, 1024, False), "fill_rows_t": (0, 1024, True),
}

CASES = {
    "moe_index_add": (moe(), "index_add"),
    "moe_index_add_nc": (moe(contiguous=False), "index_add"),
    "dup_index_add": (moe(pattern="dup"), "index_add"),
    "sorted_index_add": (moe(pattern="sorted"), "index_add"),
    "index_amax": (moe("amax"), "index_reduce"),
    "index_mean": (moe("mean"), "index_reduce"),
    "select_rows": (select(0), "index_select"),
    "select_rows_topk": (select(0, "topk"), "index_select"),
    "select_rows_nc": (select(0, transposed=True), "index_select"),
    "select_rows_hot": (select(0, "hot"), "index_select"),
    "select_cols": (select(1), "index_select"),
    "select_cols_nc": (select(1, transposed=True), "index_select"),
    "copy_rows": (copy_rows, "index_copy"),
    "embedding_fwd": (embedding(False), "embedding"),
    "embedding_bwd": (embedding(True), "embedding_dense_backward"),
    "emb_bwd_4096": (embedding_bwd(), "embedding_dense_backward"),
    "emb_bwd_zipf": (embedding_bwd("zipf"), "embedding_dense_backward"),
    "emb_bwd_one": (embedding_bwd("one"), "embedding_dense_backward"),
    "emb_bwd_768": (embedding_bwd(D=768), "embedding_dense_backward"),
    "emb_bwd_768_zipf": (embedding_bwd("zipf", D=768), "embedding_dense_backward"),
    "emb_bwd_pad": (embedding_bwd(padding_idx=0), "embedding_dense_backward"),
    "emb_bwd_freq": (embedding_bwd("zipf", scale=True), "embedding_dense_backward"),
    **{name: (fill(*spec), "index_fill") for name, spec in FILLS.items()},
}


def main(argv=None):
    # bench_scatter's driver, with these cases and op names, writing bench_index.*
    bs.MAKERS.clear()
    bs.OP_OF.clear()
    for name, (make, op) in CASES.items():
        bs.MAKERS[name] = make
        bs.OP_OF[name] = op
    bs.CASE_ORDER[:] = list(CASES)
    bs.BYTES_OF.clear()
    bs.BYTES_OF.update({name: bytes_of_fill(spec[0]) for name, spec in FILLS.items()})
    bs.BYTES_OF.update({name: bytes_of_embedding_bwd for name in EMB_BWD})
    bs.EXACT_OPS = bs.EXACT_OPS + ("index_fill",)  # a fill moves bytes: bitwise equal to ATen
    bs.BYTES_NOTE = ("src read + index storage addressed + 2 x out bytes touched; the fills: index + "
                     "32-byte sectors of self written, each once; emb_bwd_*: grad + index read, the table "
                     "written once")
    argv = list(sys.argv[1:] if argv is None else argv)
    if not any(a.startswith("--cases") for a in argv):
        argv += ["--cases", ",".join(CASES)]
    bs.main(argv, name="bench_index", title="dim-indexed ops: stridewise vs ATen")


if __name__ == "__main__":
    main()
