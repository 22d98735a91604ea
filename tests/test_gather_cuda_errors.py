"""Out-of-range index values on CUDA: a catchable RuntimeError naming the op, the dim, the
value and the size, raised by the faulting call ('sync' mode) or by the next stridewise
CUDA call / check_errors(sync=True) ('deferred' mode); the CUDA context stays usable.
Every test here runs under the ``cuda_check_mode`` fixture, which restores the mode and
drains any pending error."""
from __future__ import annotations

import os
import re

import pytest
import torch

from conftest import CUDA_SKIP, fail_msg
from stridewise.audit.specs import gather_layouts as specs

pytestmark = [pytest.mark.cuda_errors]

BAD = [16, 17, 1 << 33, -1, -17]


def _inputs(seed, bad, index_dtype=torch.int64, layout="expand@2", device="cuda"):
    """x (4,16,384) fp16 (dim 1 of size 16, the seed's shape); an index of the seed's layout
    (4,1,1) expanded to (4,1,384), every element `bad`."""
    g = torch.Generator().manual_seed(seed)
    x = specs.random_values([4, 16, 384], torch.float16, g).to(device)
    if layout == "expand@2":
        idx = torch.full((4, 1, 1), bad, dtype=index_dtype, device=device).expand(4, 1, 384)
    else:  # one bad element in a transposed index
        idx = specs.random_index([4, 384, 2], 16, index_dtype, g).to(device).transpose(1, 2)
        idx[2, 1, 100] = bad
    return x, idx


def _assert_names_it(msg, bad):
    """The message names the op, the dim, the size and (as a number of its own, besides the
    ones in 'dimension 1' and 'size 16') the offending value."""
    for part in ("stridewise.gather", "dimension 1", "size 16"):
        assert part in msg, f"CUDA index error message lacks {part!r}: {msg!r}"
    numbers = [int(v) for v in re.findall(r"(?<![\w.])-?\d+", msg)]
    for used in (1, 16):
        if used in numbers:
            numbers.remove(used)
    assert bad in numbers, f"CUDA index error message does not name the value {bad}: {msg!r}"


def _context_usable(seed):
    """A plain CUDA op and a stridewise gather both work after the error."""
    a = torch.arange(1000, device="cuda", dtype=torch.float32)
    assert float((a * 2).sum().item()) == 999000.0
    torch.cuda.synchronize()
    x, _ = _inputs(seed, 0)
    idx = torch.full((4, 1, 1), 15, dtype=torch.int64, device="cuda").expand(4, 1, 384)
    got = torch.ops.stridewise.gather(x, 1, idx)
    torch.cuda.synchronize()
    assert specs.bitwise_mismatch(got.cpu(), x[:, 15:16, :].cpu().contiguous()) is None


def test_check_mode_api(sw):
    """Runs on every machine: the mode switch, its validation and check_errors() on a
    machine with no pending error."""
    before = sw.get_cuda_check_mode()
    try:
        if "STRIDEWISE_CUDA_CHECK" not in os.environ:
            assert before == "deferred", f"default mode must be 'deferred' (no host sync), got {before!r}"
        sw.set_cuda_check_mode("sync")
        assert sw.get_cuda_check_mode() == "sync"
        sw.set_cuda_check_mode("deferred")
        assert sw.get_cuda_check_mode() == "deferred"
        with pytest.raises((ValueError, RuntimeError)):
            sw.set_cuda_check_mode("sometimes")
        assert sw.get_cuda_check_mode() == "deferred"
        sw.check_errors(sync=True)  # nothing pending: no raise
        sw.check_errors(sync=False)
    finally:
        sw.set_cuda_check_mode(before)


@CUDA_SKIP
@pytest.mark.parametrize("entry", ["op", "aten", "op-out"])
@pytest.mark.parametrize("index_dtype", specs.INDEX_DTYPES, ids=specs.dtype_name)
@pytest.mark.parametrize("bad", BAD)
def test_sync_mode_raises_at_the_call(cuda_check_mode, bad, index_dtype, entry, seed):
    sw = cuda_check_mode
    if index_dtype == torch.int32 and abs(bad) >= 1 << 31:
        pytest.skip("value does not fit int32")
    sw.set_cuda_check_mode("sync")
    x, idx = _inputs(seed, bad, index_dtype)
    out = torch.empty(4, 1, 384, dtype=x.dtype, device="cuda")
    fn = {
        "op": lambda: torch.ops.stridewise.gather(x, 1, idx),
        "aten": lambda: torch.gather(x, 1, idx),
        "op-out": lambda: torch.ops.stridewise.gather.out(x, 1, idx, out=out),
    }[entry]
    errors0 = sw.stats()["gather"]["errors"]
    with sw.use(include=["gather"]):
        with pytest.raises(RuntimeError) as ei:
            fn()
    _assert_names_it(str(ei.value), bad)
    assert sw.stats()["gather"]["errors"] >= errors0 + 1
    sw.check_errors(sync=True)  # already reported: nothing pending
    _context_usable(seed)


@CUDA_SKIP
@pytest.mark.parametrize("layout", ["expand@2", "transposed-one-bad"])
@pytest.mark.parametrize("bad", [16, -1])
def test_deferred_mode_raises_at_check_errors(cuda_check_mode, bad, layout, seed):
    sw = cuda_check_mode
    sw.set_cuda_check_mode("deferred")
    x, idx = _inputs(seed, bad, layout=layout)
    torch.ops.stridewise.gather(x, 1, idx)  # returns: no host sync in deferred mode
    with pytest.raises(RuntimeError) as ei:
        sw.check_errors(sync=True)
    _assert_names_it(str(ei.value), bad)
    sw.check_errors(sync=True)  # cleared once reported
    _context_usable(seed)


@CUDA_SKIP
@pytest.mark.parametrize("entry", ["op", "aten"])
@pytest.mark.parametrize("bad", [16, -17])
def test_deferred_mode_raises_at_next_call(cuda_check_mode, bad, entry, seed):
    sw = cuda_check_mode
    sw.set_cuda_check_mode("deferred")
    x, idx = _inputs(seed, bad)
    good = torch.full((4, 1, 1), 3, dtype=torch.int64, device="cuda").expand(4, 1, 384)
    call = (lambda i: torch.ops.stridewise.gather(x, 1, i)) if entry == "op" else \
        (lambda i: torch.gather(x, 1, i))
    with sw.use(include=["gather"]):
        call(idx)
        torch.cuda.synchronize()  # the kernel has run; the record is written
        with pytest.raises(RuntimeError) as ei:
            call(good)
        _assert_names_it(str(ei.value), bad)
        got = call(good)  # and the one after that works
    torch.cuda.synchronize()
    assert specs.bitwise_mismatch(got.cpu(), x[:, 3:4, :].cpu().contiguous()) is None
    _context_usable(seed)


@CUDA_SKIP
def test_many_errors_then_healthy(cuda_check_mode, seed):
    """A burst of faulting launches (deferred), then normal service. In deferred mode a call
    raises the error a kernel launched earlier recorded, as soon as it sees it; so which calls
    of the burst raise depends on how fast the kernels finish (on an idle H200 every second
    call does). Every report names the value, at least one is made, none is lost at the end."""
    sw = cuda_check_mode
    sw.set_cuda_check_mode("deferred")
    x, idx = _inputs(seed, 16)
    reports = []
    for _ in range(20):
        try:
            torch.ops.stridewise.gather(x, 1, idx)
        except RuntimeError as e:
            reports.append(str(e))
    try:
        sw.check_errors(sync=True)
    except RuntimeError as e:
        reports.append(str(e))
    assert reports, "20 faulting launches and no report"
    for msg in reports:
        _assert_names_it(msg, 16)
        assert "deferred check mode" in msg, msg
    sw.check_errors(sync=True)  # everything reported: nothing pending
    _context_usable(seed)
    problems = specs.check_gather(specs.SEED_REPRO.with_seed(seed), specs.RUNNERS["op"], "cuda")
    assert not problems, fail_msg(problems)
