"""The scatter family past 2**31 elements on CUDA (skipped without a GPU, and when the GPU has
too little free memory). Each case is checked against an independent computation: ATen's own
kernels run in chunks that each stay below 2**31 elements, plus (case B) a few output rows
summed with plain torch ops that involve no scatter at all. Data are chosen so that every
result is exact whatever the order of accumulation (int8 adds wrap mod 256 and are
associative; bfloat16 data are small integers whose partial sums stay far below 256, where
bfloat16 is exact; max is order independent), so all comparisons are bitwise.

  A  scatter_add, int8 self/src, src has 2**31 + 2**16 elements, dim=1, index (R, L)
     expanded from one row (stride 0 over rows), int32 and int64 index.
  B  scatter_reduce sum / amax (include_self True and False), bfloat16, src 2**31 + 2**15
     elements, dim=0, row-expanded index idx.view(-1, 1).expand(-1, H) (the MoE pattern).
  C  the index addresses past 2**31 elements: self/out int8 (2**20 + 2048, 2048), a small src
     whose rows land in the last rows of out (and a few in the first), dim=0, int32 and
     int64 index (idx * 2048 overflows int32): scatter_add, scatter_reduce sum / amax,
     scatter (distinct targets); functional (new out) and in place.
Peak GPU memory: about 7 GB (A 2.2 GB, B 4.4 GB + temporaries, C 3 x 2.2 GB).
"""
from __future__ import annotations

import sys

import pytest
import torch

from conftest import CUDA_SKIP, fail_msg

pytestmark = CUDA_SKIP
GB = 1 << 30
TWO31 = 1 << 31


def _need(nbytes):
    free, _ = torch.cuda.mem_get_info()
    if free < nbytes + 2 * GB:
        pytest.skip(f"needs {(nbytes + 2 * GB) / GB:.1f} GiB of free GPU memory, {free / GB:.1f} GiB free")


@pytest.fixture(autouse=True)
def _free_cuda_memory():
    yield
    torch.cuda.synchronize()
    torch.cuda.empty_cache()


def _stats(op):
    return dict(sys.modules["stridewise"].stats()[op])


def _gen(seed):
    return torch.Generator(device="cuda").manual_seed(seed)


def _check_stats(st, calls, problems, int64=True):
    if st["calls"] != calls or st["cuda"] != calls:
        problems.append(f"expected {calls} CUDA calls: {st}")
    if st["fallback"] or st["copies"] or st["errors"]:
        problems.append(f"fallback/copies/errors: {st}")
    if st["expanded_index"] != calls:
        problems.append(f"expanded_index not counted on every call: {st}")
    if int64 and st["int64_offsets"] != calls:
        problems.append(f"int64_offsets not counted on every call: {st}")


# --- A -----------------------------------------------------------------------------------

@pytest.mark.parametrize("index_dtype", [torch.int32, torch.int64], ids=["i32", "i64"])
def test_scatter_add_int8_src_past_2_31(sw, index_dtype, seed):
    R, L, M = (1 << 15) + 1, 1 << 16, 512
    assert R * L > TWO31
    _need(R * L + 4 * R * M)
    g = _gen(seed)
    self_ = torch.randint(-128, 128, (R, M), generator=g, device="cuda", dtype=torch.int8)
    src = torch.randint(-128, 128, (R, L), generator=g, device="cuda", dtype=torch.int8)
    base = torch.randint(0, M - 3, (L,), generator=g, device="cuda", dtype=index_dtype)
    index = base.view(1, L).expand(R, L)
    sw.reset_stats()
    with sw.use(include=["scatter_add"]):
        out = self_.scatter_add(1, index, src)
    torch.cuda.synchronize()
    st = _stats("scatter_add")
    problems = []
    _check_stats(st, 1, problems)
    chunk = 8192
    for r0 in range(0, R, chunk):
        ref = self_[r0:r0 + chunk].scatter_add(1, index[r0:r0 + chunk], src[r0:r0 + chunk])
        if not torch.equal(out[r0:r0 + chunk], ref):
            bad = (out[r0:r0 + chunk] != ref).nonzero()[:5].tolist()
            problems.append(f"rows {r0}..{r0 + chunk}: differs from native chunk at {bad}")
    if not torch.equal(out[:, M - 3:], self_[:, M - 3:]):  # columns no index reaches
        problems.append("untouched columns changed")
    assert not problems, fail_msg([f"A scatter_add int8 {tuple(src.shape)} index {index_dtype}"] + problems)


# --- B -----------------------------------------------------------------------------------

@pytest.mark.parametrize("include_self", [True, False], ids=["self", "noself"])
@pytest.mark.parametrize("reduce", ["sum", "amax"])
def test_scatter_reduce_bf16_src_past_2_31(sw, reduce, include_self, seed):
    H, L, N, UNHIT = 4096, (1 << 19) + 8, 1024, 8
    assert L * H > TWO31
    _need(2 * L * H + 16 * N * H)
    g = _gen(seed)
    # values in {-1, 0, 1}: each out position gets ~510 of them, partial sums stay < 256
    src = torch.randint(-1, 2, (L, H), generator=g, device="cuda", dtype=torch.bfloat16)
    self_ = torch.randint(-4, 5, (N, H), generator=g, device="cuda", dtype=torch.bfloat16)
    idx = torch.randint(0, N - UNHIT, (L,), generator=g, device="cuda")  # last rows: no hits
    index = idx.view(-1, 1).expand(L, H)
    sw.reset_stats()
    with sw.use(include=["scatter_reduce"]):
        out = self_.scatter_reduce(0, index, src, reduce, include_self=include_self)
    torch.cuda.synchronize()
    st = _stats("scatter_reduce")
    problems = []
    _check_stats(st, 1, problems)
    # reference: ATen in chunks of src rows (each < 2**31 elements), combined exactly
    hit = torch.bincount(idx, minlength=N) > 0
    chunk = 1 << 17
    if reduce == "sum":
        acc = torch.zeros(N, H, device="cuda", dtype=torch.float32)
        for r0 in range(0, L, chunk):
            acc.scatter_add_(0, index[r0:r0 + chunk], src[r0:r0 + chunk].float())
        full = self_.float() + acc
    else:
        acc = torch.full((N, H), float("-inf"), device="cuda", dtype=torch.bfloat16)
        for r0 in range(0, L, chunk):
            acc.scatter_reduce_(0, index[r0:r0 + chunk], src[r0:r0 + chunk], "amax")
        full = torch.maximum(self_, acc).float()
        acc = acc.float()
    want = full if include_self else torch.where(hit[:, None], acc, self_.float())
    assert want.abs().max() < 256, "test data: sums leave bfloat16's exact integer range"
    want = want.bfloat16()
    if not torch.equal(out, want):
        bad = (out != want).nonzero()[:5].tolist()
        problems.append(f"differs from chunked native at {bad}")
    # independent of any scatter: a few rows reduced with plain torch ops
    for n in torch.randint(0, N - UNHIT, (3,), generator=g, device="cuda").tolist():
        rows = src[(idx == n).nonzero().view(-1)].float()
        r = rows.sum(0) if reduce == "sum" else rows.amax(0)
        if include_self:
            r = r + self_[n].float() if reduce == "sum" else torch.maximum(r, self_[n].float())
        if not torch.equal(out[n].float(), r):
            problems.append(f"row {n} differs from the direct {reduce} of its {rows.shape[0]} src rows")
    if not torch.equal(out[N - UNHIT:], self_[N - UNHIT:]):
        problems.append("rows no index reaches changed")
    assert not problems, fail_msg([f"B scatter_reduce {reduce} include_self={include_self} bf16 "
                                   f"{tuple(src.shape)}"] + problems)


# --- C -----------------------------------------------------------------------------------

@pytest.mark.parametrize("index_dtype", [torch.int32, torch.int64], ids=["i32", "i64"])
@pytest.mark.parametrize("op", ["scatter_add", "sum", "amax", "scatter"])
def test_index_addresses_past_2_31(sw, op, index_dtype, seed):
    N, H, K, TAIL, HEAD = (1 << 20) + 2048, 2048, 8192, 1024, 16
    assert N * H > TWO31 and (N - TAIL) * H > TWO31
    _need(3 * N * H + 8 * K * H)
    g = _gen(seed)
    self_ = torch.randint(-128, 128, (N, H), generator=g, device="cuda", dtype=torch.int8)
    if op == "scatter":  # distinct targets: the winner among duplicates is unspecified
        K = TAIL + HEAD
        idx = torch.cat([torch.arange(N - TAIL, N, device="cuda"), torch.arange(HEAD, device="cuda")])
        idx = idx[torch.randperm(K, generator=g, device="cuda")]
    else:
        idx = torch.randint(N - TAIL, N, (K,), generator=g, device="cuda")
        idx[:HEAD] = torch.randint(0, HEAD, (HEAD,), generator=g, device="cuda")
    idx = idx.to(index_dtype)
    src = torch.randint(-128, 128, (K, H), generator=g, device="cuda", dtype=torch.int8)
    index = idx.view(-1, 1).expand(K, H)
    opname = "scatter_reduce" if op in ("sum", "amax") else op

    def call(t, inplace):
        if op == "scatter_add":
            return t.scatter_add_(0, index, src) if inplace else t.scatter_add(0, index, src)
        if op == "scatter":
            return t.scatter_(0, index, src) if inplace else t.scatter(0, index, src)
        return (t.scatter_reduce_(0, index, src, op) if inplace
                else t.scatter_reduce(0, index, src, op))

    sw.reset_stats()
    with sw.use(include=[opname]):
        out = call(self_, False)
        inplace = self_.clone()
        call(inplace, True)
    torch.cuda.synchronize()
    st = _stats(opname)
    problems = []
    _check_stats(st, 2, problems)
    if not torch.equal(inplace, out):
        problems.append("in-place result != functional result")
    del inplace
    # reference: native on the two small row ranges the index reaches, as views of self
    lo, hi = idx.long() < HEAD, idx.long() >= N - TAIL
    for name, rows, sel, base in (("head", slice(0, HEAD), lo, 0), ("tail", slice(N - TAIL, N), hi, N - TAIL)):
        part_idx = (idx[sel].long() - base).view(-1, 1).expand(-1, H)
        part = self_[rows]
        if op == "scatter_add":
            ref = part.scatter_add(0, part_idx, src[sel])
        elif op == "scatter":
            ref = part.scatter(0, part_idx, src[sel])
        else:
            ref = part.scatter_reduce(0, part_idx, src[sel], op)
        if not torch.equal(out[rows], ref):
            bad = (out[rows] != ref).nonzero()[:5].tolist()
            problems.append(f"{name} rows (from {rows.start}) differ from native at {bad}")
    if not torch.equal(out[HEAD:N - TAIL], self_[HEAD:N - TAIL]):
        problems.append("rows no index reaches changed")
    assert not problems, fail_msg([f"C {op} int8 out {tuple(self_.shape)} index {index_dtype}"] + problems)
