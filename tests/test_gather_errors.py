"""Argument errors and out-of-range index values: same exception type and message as native
ATen (captured from native at run time, never hard-coded where it can be derived), for the
direct op and for aten routing. CPU out-of-range values: negative and >= size, in every
index layout; the process carries on afterwards."""
from __future__ import annotations

import re

import pytest
import torch

from conftest import DEVICES, fail_msg
from stridewise.testing import layouts
from stridewise.audit.specs import gather_layouts as specs


def _arg_cases(device, g):
    x = specs.random_values([4, 5, 6], torch.float32, g).to(device)
    idx = specs.random_index([4, 3, 6], 5, torch.int64, g).to(device)
    cases = {
        "dim-too-big": (x, 3, idx),
        "dim-too-small": (x, -4, idx),
        "dim-way-off": (x, 100, idx),
        "index-rank-lower": (x, 1, idx[0]),
        "index-rank-higher": (x, 1, idx.unsqueeze(0)),
        "index-int16": (x, 1, idx.to(torch.int16)),
        "index-uint8": (x, 1, idx.to(torch.uint8)),
        "index-float": (x, 1, idx.to(torch.float32)),
        "index-bool": (x, 1, idx.bool()),
        "index-larger-dim0": (x, 1, specs.random_index([5, 3, 6], 5, torch.int64, g).to(device)),
        "index-larger-dim2": (x, 1, specs.random_index([4, 3, 7], 5, torch.int64, g).to(device)),
        "index-larger-expanded": (x, 1, idx[:1].expand(6, 3, 6)),
        "0dim-self-dim1": (x[0, 0, 0], 1, idx[0, 0, 0]),
        "0dim-self-1d-index-bad": (x[0, 0, 0], 0, torch.tensor([0, 3], device=device)),
        "empty-self-nonempty-index": (x[:, :0], 1, torch.full_like(idx, 2)),
    }
    if device == "cuda":
        cases["index-on-cpu"] = (x, 1, idx.cpu())
        cases["self-on-cpu"] = (x.cpu(), 1, idx)
    return cases


# Bad index *values* rather than bad arguments. Native CUDA cannot be the oracle for these in
# this process: ATen answers them with a device-side assert that leaves the CUDA context
# unusable (seen on the H200, 2026-12-01: every later CUDA test failed). On CUDA the oracle is
# native on a CPU copy (the same check, ATen's wording), and ours runs in sync check mode,
# whose message carries ATen's wording after "stridewise.gather (cuda): ".
VALUE_CASES = {"0dim-self-1d-index-bad", "empty-self-nonempty-index"}

ARG_NAMES = ["dim-too-big", "dim-too-small", "dim-way-off", "index-rank-lower", "index-rank-higher",
             "index-int16", "index-uint8", "index-float", "index-bool", "index-larger-dim0",
             "index-larger-dim2", "index-larger-expanded", "0dim-self-dim1", "0dim-self-1d-index-bad",
             "empty-self-nonempty-index", "index-on-cpu", "self-on-cpu"]


def _strip_where(msg: str) -> str:
    return re.sub(r"\s*\(when checking argument.*?\)", "", specs.first_line(msg))


def _ours(sw, entry, s, d, i):
    if entry == "op":
        return specs.capture(lambda: torch.ops.stridewise.gather(s, d, i))
    with sw.use(include=["gather"]):
        return specs.capture(lambda: torch.gather(s, d, i))


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("entry", ["op", "aten"])
@pytest.mark.parametrize("name", ARG_NAMES)
def test_argument_errors_match_native(sw, name, entry, device, seed):
    cases = _arg_cases(device, torch.Generator().manual_seed(seed))
    if name not in cases:
        pytest.skip(f"{name} applies to CUDA only")
    s, d, i = cases[name]
    if device == "cuda" and name in VALUE_CASES:
        with specs.native():
            n_type, n_msg = specs.capture(lambda: torch.gather(s.cpu(), d, i.cpu()))
        assert n_type is RuntimeError, f"[{name}] native CPU no longer rejects the case: {n_msg}"
        before = sw.get_cuda_check_mode()
        sw.set_cuda_check_mode("sync")
        try:
            o_type, o_msg = _ours(sw, entry, s, d, i)
        finally:
            sw.set_cuda_check_mode(before)
        want = specs.first_line(n_msg)
        assert o_type is n_type and f"stridewise.gather (cuda): {want}" in (o_msg or ""), (
            f"[{name} {entry} cuda] native CPU: {n_type.__name__}: {want}\n"
            f" ours (sync mode): {getattr(o_type, '__name__', None)}: {o_msg}")
        return
    with specs.native():
        n_type, n_msg = specs.capture(lambda: torch.gather(s, d, i))
    if n_type is None:
        # Native accepts it (e.g. an empty self with ... ); then ours must agree bitwise.
        o_type, o_res = _ours(sw, entry, s, d, i)
        assert o_type is None, f"[{name}] native accepted, ours raised {o_type}: {o_res}"
        assert specs.bitwise_mismatch(o_res, n_msg) is None
        return
    o_type, o_msg = _ours(sw, entry, s, d, i)
    if name.endswith("-on-cpu"):
        # ATen's device check names its generated wrapper ("(when checking argument index in
        # method wrapper_CUDA_gather)"); the wording before that must match.
        n_msg, o_msg = _strip_where(n_msg), _strip_where(o_msg or "")
    assert o_type is n_type and specs.first_line(o_msg) == specs.first_line(n_msg), (
        f"[{name} {entry} {device}] self {layouts.describe(s)} index {layouts.describe(i)} dim={d}\n"
        f" native: {n_type.__name__}: {n_msg}\n ours:   {getattr(o_type, '__name__', None)}: {o_msg}")


# --- out-of-range values ------------------------------------------------------------------

OOB_VALUES = [16, 17, 1 << 40, -1, -16, -17, -(1 << 62)]
OOB_LAYOUTS = ["contiguous", "expand", "transpose", "step_slice", "offset", "compound", "expand_all"]


def _oob_inputs(device, seed, layout, bad, index_dtype=torch.int64):
    """x (4,16,24) fp16 (dim 1 has size 16, as in the seed); an index of `layout` whose
    values are valid except ONE element set to `bad` (so the message is order independent;
    for expand_all every element is `bad`)."""
    case = specs.GatherCase((4, 16, 24), (4, 3, 24), 1, torch.float16, index_dtype,
                            index_layout=layout, seed=seed)
    inp = specs.build_inputs(case, device)
    idx = inp["index"]
    # write the bad value into ONE storage element the view uses
    pos = torch.randint(0, idx.numel(), (1,), generator=torch.Generator().manual_seed(seed)).item()
    coord = specs._unravel(pos, tuple(idx.shape))
    base = torch.empty(0, dtype=idx.dtype, device=idx.device).set_(
        idx.untyped_storage(), 0, (idx.untyped_storage().nbytes() // idx.element_size(),), (1,))
    off = idx.storage_offset() + sum(c * s for c, s in zip(coord, idx.stride()))
    base[off] = bad
    return inp["self"], idx, coord


@pytest.mark.parametrize("entry", ["op", "aten"])
@pytest.mark.parametrize("layout", OOB_LAYOUTS)
@pytest.mark.parametrize("bad", OOB_VALUES)
def test_cpu_out_of_range_matches_native(sw, bad, layout, entry, seed):
    x, idx, coord = _oob_inputs("cpu", seed, layout, bad)
    with specs.native():
        n_type, n_msg = specs.capture(lambda: torch.gather(x, 1, idx))
    assert n_type is not None, "native accepted an out-of-range index?"
    errors0 = sw.stats()["gather"]["errors"]
    o_type, o_msg = _ours(sw, entry, x, 1, idx)
    assert o_type is n_type and o_msg == n_msg, fail_msg([
        f"[bad={bad} at {coord} layout={layout} {entry}] index {layouts.describe(idx)}",
        f" native: {n_type.__name__}: {n_msg}",
        f" ours:   {getattr(o_type, '__name__', None)}: {o_msg}"])
    assert sw.stats()["gather"]["errors"] == errors0 + 1
    # the process carries on: a valid gather right after is correct
    idx_ok = idx.clamp(0, 15)
    got = torch.ops.stridewise.gather(x, 1, idx_ok)
    assert specs.bitwise_mismatch(got, specs.reference({"self": x, "index": idx_ok, "dim": 1})) is None


@pytest.mark.parametrize("entry", ["op", "aten", "op-out", "aten-out"])
@pytest.mark.parametrize("index_dtype", specs.INDEX_DTYPES, ids=specs.dtype_name)
def test_cpu_out_of_range_many_bad(sw, index_dtype, entry, seed):
    """Several bad values: the message names one of them (the one ATen would pick depends
    on iteration order, so only its form is pinned), type is ATen's."""
    g = torch.Generator().manual_seed(seed)
    x = specs.random_values([4, 16, 24], torch.float32, g)
    idx = specs.random_index([4, 5, 24], 16, index_dtype, g)
    bad_vals = [16, -1, 99, -40]
    flat = idx.view(-1)
    pos = torch.randperm(flat.numel(), generator=g)[:4]
    for p, b in zip(pos.tolist(), bad_vals):
        flat[p] = b
    with specs.native():
        n_type, n_msg = specs.capture(lambda: torch.gather(x, 1, idx))
    out = torch.empty(4, 5, 24)
    fn = {
        "op": lambda: torch.ops.stridewise.gather(x, 1, idx),
        "aten": lambda: torch.gather(x, 1, idx),
        "op-out": lambda: torch.ops.stridewise.gather.out(x, 1, idx, out=out),
        "aten-out": lambda: torch.gather(x, 1, idx, out=out),
    }[entry]
    with sw.use(include=["gather"]):
        o_type, o_msg = specs.capture(fn)
    assert o_type is n_type, (n_type, n_msg, o_type, o_msg)
    m = re.fullmatch(r"index (-?\d+) is out of bounds for dimension 1 with size 16", o_msg)
    assert m and int(m.group(1)) in bad_vals, o_msg


@pytest.mark.parametrize("bad", [5, -1])
def test_cpu_out_of_range_rank0_and_negative_dim(sw, bad):
    x = torch.tensor(3.5)
    i = torch.tensor(bad)
    with specs.native():
        n = specs.capture(lambda: torch.gather(x, -1, i))
    o = specs.capture(lambda: torch.ops.stridewise.gather(x, -1, i))
    assert n[0] is not None and o == n, (n, o)
    y = torch.randn(3, 4)
    j = torch.tensor([[0, bad]]).expand(3, 2)
    with specs.native():
        n = specs.capture(lambda: torch.gather(y, -1, j))
    o = specs.capture(lambda: torch.ops.stridewise.gather(y, -1, j))
    assert n[0] is not None and o == n, (n, o)


def test_cpu_bad_index_into_empty_dim(sw):
    """gather along a dim of size 0 with a non-empty index: every value is out of range."""
    x = torch.randn(3, 0)
    i = torch.zeros(3, 2, dtype=torch.long)
    with specs.native():
        n = specs.capture(lambda: torch.gather(x, 1, i))
    o = specs.capture(lambda: torch.ops.stridewise.gather(x, 1, i))
    assert n[0] is not None and o == n, (n, o)


@pytest.mark.parametrize("layout", ["contiguous", "transpose", "compound"])
@pytest.mark.parametrize("where", ["first", "middle", "last"])
def test_cpu_out_of_range_large(sw, layout, where, seed):
    """One bad value in an index above the parallel grain (several chunks): same message as
    native whichever chunk holds it."""
    case = specs.GatherCase((40, 33, 65), (37, 41, 64), 1, torch.float32, index_layout=layout, seed=seed)
    inp = specs.build_inputs(case, "cpu")
    idx = inp["index"]
    coord = {"first": (0, 0, 0), "middle": (18, 20, 31), "last": (36, 40, 63)}[where]
    base = torch.empty(0, dtype=idx.dtype).set_(
        idx.untyped_storage(), 0, (idx.untyped_storage().nbytes() // idx.element_size(),), (1,))
    base[idx.storage_offset() + sum(c * s for c, s in zip(coord, idx.stride()))] = 33
    x = inp["self"]
    with specs.native():
        n = specs.capture(lambda: torch.gather(x, 1, idx))
    o = specs.capture(lambda: torch.ops.stridewise.gather(x, 1, idx))
    assert n[0] is not None and o == n, (layout, where, n, o)
