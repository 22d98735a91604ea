"""The layout matrix for gather: every case is compared bitwise with native torch.gather on
the same device (and on CUDA also with the CPU result), with inputs' storages checked
untouched, out= checked in place, and the stats checked (calls, device, noncontig_*,
copies == 0). See python/stridewise/audit/specs/gather_layouts/ for what one check does.

Runners: "op" = torch.ops.stridewise.gather(.out); "aten" = torch.gather under
stridewise.use(include=['gather']); "method" = Tensor.gather; "take_along_dim".
"""
from __future__ import annotations

import random

import pytest
import torch

from conftest import DEVICES, fail_msg
from stridewise.testing import layouts
from stridewise.audit.specs import gather_layouts as specs
from stridewise.audit.specs.gather_layouts import GatherCase, RUNNERS, check_gather


def _run(case, runner, device, seed):
    problems = check_gather(case.with_seed(seed), RUNNERS[runner], device)
    assert not problems, fail_msg(problems)


def _ids(cases):
    return [c.id for c in cases]


# --- the seed's matrix --------------------------------------------------------------------

SEED_CASES = specs.seed_matrix()


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("runner", ["op", "aten", "method"])
@pytest.mark.parametrize("case", SEED_CASES, ids=_ids(SEED_CASES))
def test_seed_matrix(sw, case, runner, device, seed):
    _run(case, runner, device, seed)


@pytest.mark.parametrize("device", DEVICES)
def test_seed_repro_exact(sw, device, seed):
    """The issue's own lines: x (4,16,384) fp16, idx full(15) (4,1,1) expanded to (4,1,384)."""
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(4, 16, 384, generator=g, dtype=torch.float32).to(torch.float16).to(device)
    idx = torch.full((4, 1, 1), 15, device=device, dtype=torch.int64).expand(4, 1, 384)
    assert idx.untyped_storage().nbytes() == 4 * 8  # 4 elements behind 1536 logical ones
    with sw.use(include=["gather"]):
        got = torch.gather(x, 1, idx)
    direct = torch.ops.stridewise.gather(x, 1, idx)
    want = x[:, 15:16, :]
    for name, t in (("aten", got), ("op", direct)):
        m = specs.bitwise_mismatch(t, want.contiguous(), what=name)
        assert m is None, fail_msg([f"seed repro on {device}: {m}"])
    st = sw.stats()["gather"]
    assert st["calls"] == 2 and st["noncontig_index"] == 2 and st["copies"] == 0, st


# --- every layout class for each operand ---------------------------------------------------

CROSS = specs.layout_cross_cases()
CROSS_OUT = specs.layout_cross_cases(out=True)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("runner", ["op", "aten"])
@pytest.mark.parametrize("case", CROSS, ids=_ids(CROSS))
def test_layout_cross(sw, case, runner, device, seed):
    _run(case, runner, device, seed)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("case", CROSS_OUT, ids=_ids(CROSS_OUT))
def test_layout_cross_out(sw, case, device, seed):
    _run(case, "op", device, seed)


CROSS_OUT_ATEN = [c for c in CROSS_OUT if c.self_layout in ("contiguous", "compound")]


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("case", CROSS_OUT_ATEN, ids=_ids(CROSS_OUT_ATEN))
def test_layout_cross_out_aten(sw, case, device, seed):
    _run(case, "aten", device, seed)


TAKE = [GatherCase((4, 5, 6), (4, 3, 6), 1, self_layout=sl, index_layout=il)
        for sl in ("contiguous", "transpose", "compound") for il in layouts.LAYOUTS]


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("case", TAKE, ids=_ids(TAKE))
def test_take_along_dim(sw, case, device, seed):
    _run(case, "take_along_dim", device, seed)


# --- ranks 0..8, 10, 25 with compound views on self, index and out ------------------------

RANK_CASES = specs.rank_cases()


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("runner", ["op", "aten"])
@pytest.mark.parametrize("case", RANK_CASES, ids=_ids(RANK_CASES))
def test_ranks(sw, case, runner, device, seed):
    _run(case, runner, device, seed)


# --- every dtype, int32 and int64 index ----------------------------------------------------

DTYPE_CASES = specs.dtype_cases()


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("runner", ["op", "aten"])
@pytest.mark.parametrize("case", DTYPE_CASES, ids=_ids(DTYPE_CASES))
def test_dtypes(sw, case, runner, device, seed):
    _run(case, runner, device, seed)


OPT_CASES = specs.dtype_cases(specs.OPTIONAL_DTYPES)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("case", OPT_CASES, ids=_ids(OPT_CASES))
def test_optional_dtypes(sw, case, device, seed):
    """uint16/32/64, complex32, float8: where native gather has a kernel, the usual check;
    where it has none, the reference is native gather of the bits (an integer view of the
    same size), so a stridewise result is still checked bit for bit. Skipped only when
    neither native nor stridewise supports the dtype."""
    why = specs.native_supports(case.dtype, device)
    problems = check_gather(case.with_seed(seed), RUNNERS["op"], device)
    if why is not None and problems and all("raised NotImplementedError" in p for p in problems):
        pytest.skip(f"native torch {torch.__version__} gather on {device} does not support "
                    f"{case.dtype} ({why}), and stridewise rejects it too")
    assert not problems, fail_msg(problems)


# --- edge cases: 0-dim, empty, duplicates, negative dim, index smaller than self ---------

EDGE = specs.edge_cases()


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("runner", ["op", "aten"])
@pytest.mark.parametrize("case", EDGE, ids=_ids(EDGE))
def test_edges(sw, case, runner, device, seed):
    _run(case, runner, device, seed)


# --- above the parallel grain: chunks start mid-row ---------------------------------------

LARGE = specs.large_cases()


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("case", LARGE, ids=_ids(LARGE))
def test_large(sw, case, device, seed):
    _run(case, "op", device, seed)


# --- random as_strided views (layouts the generators do not produce) ---------------------

def _random_view(rng, g, shape, make):
    """A random non-overlapping-or-overlapping strided view of `shape` over a fresh buffer:
    random dim order, random gaps, random zero strides, random storage offset."""
    r = len(shape)
    order = list(range(r))
    rng.shuffle(order)
    strides = [0] * r
    span = 1
    for d in order:
        if rng.random() < 0.2:
            strides[d] = 0
            continue
        gap = rng.choice([1, 1, 2, 3])
        strides[d] = span * gap
        span = strides[d] * max(shape[d], 1)
    off = rng.randrange(0, 9)
    base = make([span + off + 1])
    return base.as_strided(shape, strides, off)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("k", range(24))
def test_random_strides(sw, k, device, seed):
    rng = random.Random(seed)
    problems = []
    for trial in range(4):
        r = rng.randint(1, 6)
        sshape = [rng.randint(1, 5) for _ in range(r)]
        dim = rng.randrange(r)
        ishape = [rng.randint(1, s) for s in sshape]
        ishape[dim] = rng.randint(1, 7)
        dt = rng.choice([torch.float32, torch.float16, torch.int64, torch.uint8, torch.complex128])
        it = rng.choice(specs.INDEX_DTYPES)
        g = torch.Generator().manual_seed(seed + trial)
        x = _random_view(rng, g, sshape, lambda s: specs.random_values(s, dt, g).to(device))
        idx = _random_view(rng, g, ishape,
                           lambda s: specs.random_index(s, sshape[dim], it, g).to(device))
        want = specs.reference({"self": x, "index": idx, "dim": dim})
        ctx = f"trial {trial} dim={dim} self: {layouts.describe(x)} | index: {layouts.describe(idx)}"
        try:
            got = torch.ops.stridewise.gather(x, dim, idx)
        except Exception as e:  # noqa: BLE001
            problems.append(f"{ctx}: raised {type(e).__name__}: {e}")
            continue
        m = specs.bitwise_mismatch(got, want)
        if m:
            problems.append(f"{ctx}: {m}")
        # and into a random writable out view
        out = _random_view(rng, g, ishape, lambda s: specs.poison(s, dt).to(device))
        if layouts.is_writable(out):
            torch.ops.stridewise.gather.out(x, dim, idx, out=out)
            m = specs.bitwise_mismatch(out, want, what="out")
            if m:
                problems.append(f"{ctx} | out: {layouts.describe(out)}: {m}")
    assert not problems, fail_msg(problems)


# --- offsets beyond 2**31 (64-bit offset math) ---------------------------------------------

@pytest.mark.parametrize("device", DEVICES)
def test_int64_offsets(sw, device, seed):
    """self spans 2**31 + 16 bytes; the gathered elements sit past the 2 GiB mark. On the CPU
    the pages are never touched except those we write (lazy allocation)."""
    n = (1 << 30) + 8
    try:
        big = torch.empty(2 * n, dtype=torch.uint8, device=device)
    except RuntimeError as e:  # pragma: no cover - machines without 2 GiB to spare
        pytest.skip(f"cannot allocate 2 GiB on {device}: {e}")
    x = big.view(2, n)
    g = torch.Generator().manual_seed(seed)
    cols = torch.stack([n - 64 + torch.randperm(64, generator=g)[:5] for _ in range(2)])  # distinct
    vals = torch.randint(1, 255, (2, 5), generator=g, dtype=torch.int64).to(torch.uint8)
    x[0, cols[0].to(device)] = vals[0].to(device)
    x[1, cols[1].to(device)] = vals[1].to(device)
    idx = cols.to(device)
    got = torch.ops.stridewise.gather(x, 1, idx)
    assert torch.equal(got.cpu(), vals), fail_msg([f"int64 offsets on {device}: got {got.tolist()} "
                                                   f"expected {vals.tolist()}"])
    # the same through a transposed view (dim 0, stride n)
    xt = x.t()
    idx0 = idx.t().contiguous()  # (5, 2) rows, gather along dim 0 of xt (size n)
    got_t = torch.ops.stridewise.gather(xt, 0, idx0)
    assert torch.equal(got_t.cpu(), vals.t()), fail_msg([f"int64 offsets, transposed, on {device}"])
    st = sw.stats()["gather"]
    if "int64_offsets" in st:
        assert st["int64_offsets"] >= 2, st
    del big, x, xt
