"""gather out=: non-contiguous out written in place with the rest of its storage untouched,
out resized by ATen's rules, overlapping / wrongly typed / misplaced out rejected with
ATen's exact exception type and message (captured from native at run time)."""
from __future__ import annotations

import re
import warnings

import pytest
import torch

from conftest import DEVICES, fail_msg
from stridewise.audit.specs import gather_layouts as specs
from stridewise.audit.specs.gather_layouts import GatherCase, RUNNERS, check_gather

OUT_LAYOUTS = ["transpose", "step_slice", "offset", "permute", "compound_writable",
               "step_slice@0:3", "offset@7"]


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("runner", ["op", "aten"])
@pytest.mark.parametrize("out_layout", OUT_LAYOUTS)
@pytest.mark.parametrize("dtype", [torch.float16, torch.float64, torch.int8, torch.complex128],
                         ids=specs.dtype_name)
def test_noncontiguous_out_in_place(sw, out_layout, dtype, runner, device, seed):
    """check_gather verifies: same data_ptr, geometry unchanged, values bitwise equal to
    native, storage bytes outside the view still poison, whole storage equal to what native
    gather.out leaves in an identical poisoned buffer."""
    case = GatherCase((5, 6, 7), (4, 9, 6), 1, dtype, index_layout="compound",
                      self_layout="transpose", out_layout=out_layout).with_seed(seed)
    problems = check_gather(case, RUNNERS[runner], device)
    assert not problems, fail_msg(problems)


def _both(device, seed, dtype=torch.float32):
    g = torch.Generator().manual_seed(seed)
    x = specs.random_values([5, 6], dtype, g).to(device)
    idx = specs.random_index([5, 4], 6, torch.int64, g).to(device)
    return x, idx


def _run_out(fn, out):
    """(exception type or None, message or result, [warning messages])."""
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        try:
            r = fn(out)
            err = (None, r)
        except Exception as e:  # noqa: BLE001
            err = (type(e), str(e))
    return err + ([str(x.message) for x in w],)


ENTRIES = {
    "op": lambda x, d, i: (lambda o: torch.ops.stridewise.gather.out(x, d, i, out=o)),
    "aten": lambda x, d, i: (lambda o: torch.gather(x, d, i, out=o)),
}

RESIZE_OUTS = {
    "empty": lambda dev, dt: torch.empty(0, device=dev, dtype=dt),
    "bigger-wrong-shape": lambda dev, dt: torch.empty(7, 9, device=dev, dtype=dt),
    "smaller": lambda dev, dt: torch.empty(3, device=dev, dtype=dt),
    "same-numel-other-shape": lambda dev, dt: torch.empty(4, 5, device=dev, dtype=dt),
    "noncontig-wrong-shape": lambda dev, dt: torch.empty(9, 12, device=dev, dtype=dt)[::2, ::3],
    "transposed-wrong-shape": lambda dev, dt: torch.empty(8, 6, device=dev, dtype=dt).t(),
}


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("entry", list(ENTRIES))
@pytest.mark.parametrize("kind", list(RESIZE_OUTS))
def test_out_resize_rules(sw, kind, entry, device, seed):
    """A wrongly shaped out is resized exactly as native resizes it: same final shape,
    strides, storage offset, same 'storage kept or reallocated' outcome, same warning."""
    x, idx = _both(device, seed)
    native_out = RESIZE_OUTS[kind](device, x.dtype).fill_(float("nan"))
    ours_out = RESIZE_OUTS[kind](device, x.dtype).fill_(float("nan"))
    n_ptr, o_ptr = native_out.data_ptr(), ours_out.data_ptr()
    # torch.ops calls report C++ warnings on stderr, not as Python warnings: compare each
    # entry with native reached the same way.
    native_fn = (lambda o: torch.ops.aten.gather.out(x, 1, idx, out=o)) if entry == "op" else \
        (lambda o: torch.gather(x, 1, idx, out=o))
    with specs.native():
        n_err, n_res, n_warn = _run_out(native_fn, native_out)
    runner = ENTRIES[entry](x, 1, idx)
    if entry == "aten":
        with sw.use(include=["gather"]):
            o_err, o_res, o_warn = _run_out(runner, ours_out)
    else:
        o_err, o_res, o_warn = _run_out(runner, ours_out)
    ctx = f"[{kind} {entry} {device}]"
    assert (o_err, o_res if o_err else None) == (n_err, n_res if n_err else None), \
        f"{ctx} native: {n_err} {n_res if n_err else ''} | ours: {o_err} {o_res if o_err else ''}"
    if n_err is None:
        assert o_res is ours_out or o_res.data_ptr() == ours_out.data_ptr(), f"{ctx} did not return out"
        geo = lambda t: (tuple(t.shape), t.stride(), t.storage_offset())  # noqa: E731
        assert geo(ours_out) == geo(native_out), f"{ctx} geometry {geo(ours_out)} != native {geo(native_out)}"
        assert (ours_out.data_ptr() == o_ptr) == (native_out.data_ptr() == n_ptr), \
            f"{ctx} storage reuse differs from native"
        m = specs.bitwise_mismatch(ours_out, native_out)
        assert m is None, f"{ctx} {m}"
    assert o_warn == n_warn, f"{ctx} warnings differ: native {n_warn} ours {o_warn}"
    assert sw.stats()["gather"]["copies"] == 0


def _error_cases(device, seed):
    """name -> (self, dim, index, out factory); every one is rejected by native."""
    x, idx = _both(device, seed)
    base = torch.empty(40, device=device)
    idx_sq = specs.random_index([5, 6], 6, torch.int64, torch.Generator().manual_seed(seed)).to(device)
    i64 = idx_sq.clone()
    ibuf = specs.random_index([40], 6, torch.int64, torch.Generator().manual_seed(seed + 1)).to(device)
    cases = {
        "out-expanded": (x, 1, idx, lambda: torch.empty(5, 1, device=device).expand(5, 4)),
        "out-expand-all": (x, 1, idx, lambda: torch.empty(1, 1, device=device).expand(5, 4)),
        # (an out aliased through nonzero strides, e.g. as_strided((5, 4), (2, 1)), is
        # accepted by ATen: its overlap check answers TOO_HARD; the result then depends on
        # write order, so it is not compared)
        "out-dtype-double": (x, 1, idx, lambda: torch.empty(5, 4, device=device, dtype=torch.float64)),
        "out-dtype-half": (x, 1, idx, lambda: torch.empty(5, 4, device=device, dtype=torch.float16)),
        "out-dtype-int": (x, 1, idx, lambda: torch.empty(5, 4, device=device, dtype=torch.int64)),
        "out-is-self": (x, 1, idx_sq, lambda: x),
        "out-overlaps-self": (base[:30].view(5, 6), 1, idx_sq, lambda: base[10:40].view(5, 6)),
        "out-partially-overlaps-index": (
            i64, 1, ibuf[:20].view(5, 4), lambda: ibuf[10:30].view(5, 4)),
        "out-dtype-and-overlap": (x, 1, idx, lambda: torch.empty(1, 1, dtype=torch.int8, device=device).expand(5, 4)),
    }
    if device == "cuda":
        cases["out-on-cpu"] = (x, 1, idx, lambda: torch.empty(5, 4))
    return cases


ERROR_NAMES = ["out-expanded", "out-expand-all", "out-dtype-double",
               "out-dtype-half", "out-dtype-int", "out-is-self", "out-overlaps-self",
               "out-partially-overlaps-index", "out-dtype-and-overlap", "out-on-cpu"]


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("entry", list(ENTRIES))
@pytest.mark.parametrize("name", ERROR_NAMES)
def test_out_errors_match_native(sw, name, entry, device, seed):
    cases = _error_cases(device, seed)
    if name not in cases:
        pytest.skip(f"{name} applies to CUDA only")
    x, dim, idx, make_out = cases[name]
    n_out = make_out()
    n_before = specs.storage_bytes(n_out).clone()
    with specs.native():
        n_type, n_msg = specs.capture(lambda: torch.gather(x, dim, idx, out=n_out))
    assert n_type is not None, f"native accepted {name}; the test's premise is wrong"
    specs.storage_bytes(n_out).copy_(n_before)
    o_out = make_out()
    o_before = specs.storage_bytes(o_out).clone()
    fn = ENTRIES[entry](x, dim, idx)
    if entry == "aten":
        with sw.use(include=["gather"]):
            o_type, o_msg = specs.capture(lambda: fn(o_out))
    else:
        o_type, o_msg = specs.capture(lambda: fn(o_out))
    if name.endswith("-on-cpu"):  # ATen's device check names its generated wrapper; not compared
        n_msg, o_msg = (re.sub(r"\s*\(when checking argument.*?\)", "", specs.first_line(m or ""))
                        for m in (n_msg, o_msg))
    assert o_type is n_type and specs.first_line(o_msg) == specs.first_line(n_msg), (
        f"[{name} {entry} {device}]\n native: {n_type.__name__}: {n_msg}\n ours:   "
        f"{getattr(o_type, '__name__', None)}: {o_msg}")
    if "dtype" in name or "expand" in name:
        assert torch.equal(specs.storage_bytes(o_out), o_before), f"[{name}] out written before rejecting"


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("entry", list(ENTRIES))
def test_out_fully_overlapping_index_allowed(sw, entry, device, seed):
    """Native accepts out == index (full overlap, same dtype): each element reads its own
    index before writing it. Ours must agree, value for value."""
    g = torch.Generator().manual_seed(seed)
    src = torch.randint(0, 6, (5, 6), generator=g).to(device)
    idx_n = torch.randint(0, 6, (5, 6), generator=g).to(device)
    idx_o = idx_n.clone()
    with specs.native():
        torch.gather(src, 1, idx_n, out=idx_n)
    fn = ENTRIES[entry](src, 1, idx_o)
    if entry == "aten":
        with sw.use(include=["gather"]):
            fn(idx_o)
    else:
        fn(idx_o)
    assert torch.equal(idx_o, idx_n)


@pytest.mark.parametrize("device", DEVICES)
def test_out_whole_base_buffer_untouched(sw, device, seed):
    """Explicit form of the storage check: a 3-d out carved from the middle of a poisoned
    buffer with steps on two dims and a transpose; every byte outside the view keeps its
    poison and every byte inside holds the result."""
    g = torch.Generator().manual_seed(seed)
    x = specs.random_values([6, 8, 5], torch.float32, g).to(device)
    idx = specs.random_index([6, 3, 5], 8, torch.int64, g).to(device)
    buf = specs.poison([1000], torch.float32).to(device)
    out = buf[17:17 + 6 * 2 * 5 * 3 * 4].view(6, 2 * 5, 3 * 4)[:, ::2, ::3][:, :, :3].transpose(1, 2)
    assert out.shape == (6, 3, 5) and not out.is_contiguous()
    before = buf.clone()
    ptr = out.data_ptr()
    torch.ops.stridewise.gather.out(x, 1, idx, out=out)
    assert out.data_ptr() == ptr
    want = specs.reference({"self": x, "index": idx, "dim": 1})
    assert specs.bitwise_mismatch(out, want) is None
    mask = specs.view_mask(out).view(-1, 4)[:, 0].to(device)
    b_after, b_before = specs.bits_view(buf), specs.bits_view(before)
    assert torch.equal(b_after[~mask], b_before[~mask]), "bytes outside the out view changed"
