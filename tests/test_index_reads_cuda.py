"""Issue 37's reads on CUDA: ``x[i]`` through one index tensor runs the gather family's kernels
(index_k_as_gather), the very kernel ``index_select`` runs on the same rows; values wrap as
ATen's index wraps them; a bad value raises naming index, self's dim, the value and the size;
rows of a transposed x (the banded walk) equal ATen bit for bit. Fresh random data per test,
outputs compared bitwise with ATen's on the same device."""
from __future__ import annotations

import re

import pytest
import torch

from conftest import CUDA_SKIP

pytestmark = [CUDA_SKIP]

DTYPES = [torch.float32, torch.float16, torch.bfloat16, torch.int8, torch.complex128]


def _values(shape, dtype, g):
    if dtype.is_complex:
        return torch.randn(shape, dtype=dtype, generator=g).cuda()
    return (torch.randn(shape, generator=g) * 20).to(dtype).cuda()


def _x(shape, dtype, g, layout):
    """(n, m) values in `layout`: contig, t (stored transposed), slice (every other column of a
    wider storage, offset 3), expand (one row broadcast). Views of a device storage, so nothing
    on the way makes them contiguous."""
    n, m = shape
    if layout == "t":
        return _values((m, n), dtype, g).t()
    if layout == "slice":
        return _values((n, 2 * m + 3), dtype, g)[:, 3::2]
    if layout == "expand":
        return _values((1, m), dtype, g).expand(n, m)
    return _values(shape, dtype, g)


def _kernels(fn):
    """The CUDA kernels one call launches, by name."""
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as prof:
        fn()
        torch.cuda.synchronize()
    return {e.name for e in prof.events() if e.device_type == torch.autograd.DeviceType.CUDA}


@pytest.mark.parametrize("layout", ["contig", "t", "slice", "expand"])
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_one_index_read_equals_aten(sw, seed, dtype, layout):
    g = torch.Generator().manual_seed(seed)
    x = _x((300, 40), dtype, g, layout)
    i = torch.randint(-300, 300, (7, 29), generator=g).cuda()  # negative values wrap
    j = torch.randint(-40, 40, (50,), generator=g).cuda()
    calls = {"x[i]": lambda: x[i], "x[:, j]": lambda: x[:, j], "x[i.t()]": lambda: x[i.t()],
             "index(x, [0-dim])": lambda: torch.ops.aten.index(x, [torch.tensor(-5, device="cuda")])}
    for name, fn in calls.items():
        want = fn()
        with sw.use(include=["index"]):
            got = fn()
        assert got.shape == want.shape and got.dtype == want.dtype, name
        assert torch.equal(got, want), name
    assert sw.stats()["index"]["calls"] >= len(calls)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16], ids=str)
@pytest.mark.parametrize("transposed", [False, True], ids=["rows", "rows_of_t"])
def test_index_and_index_select_reach_one_kernel(sw, seed, dtype, transposed):
    g = torch.Generator().manual_seed(seed)
    x = _x((4096, 256), dtype, g, "t" if transposed else "contig")
    i = torch.randint(0, 4096, (2048,), generator=g).cuda()
    with sw.use(include=["index", "index_select"]):
        a, b = x[i], torch.index_select(x, 0, i)
        ka = _kernels(lambda: x[i])
        kb = _kernels(lambda: torch.index_select(x, 0, i))
    assert torch.equal(a, x.cpu()[i.cpu()].cuda()) and torch.equal(a, b)
    ours = {k for k in ka if "gather_" in k}
    assert ours and ours == {k for k in kb if "gather_" in k}, (ka, kb)


@pytest.mark.parametrize("bad", [300, -301, 1 << 33])
def test_bad_value_names_index_dim_value_and_size(cuda_check_mode, seed, bad):
    sw = cuda_check_mode
    sw.set_cuda_check_mode("sync")
    g = torch.Generator().manual_seed(seed)
    x = _values((7, 300, 8), torch.float32, g)
    j = torch.randint(0, 300, (64,), generator=g)
    j[17] = bad
    j = j.cuda()
    with sw.use(include=["index"]):
        with pytest.raises(RuntimeError) as ei:
            x[:, j]
    msg = str(ei.value)
    assert "index" in msg and "dimension 1" in msg and "size 300" in msg, msg
    assert str(bad) in re.findall(r"-?\d+", msg), msg
    sw.check_errors(sync=True)
    with sw.use(include=["index"]):
        assert torch.equal(x[:, j.clamp(0, 299)], x.cpu()[:, j.cpu().clamp(0, 299)].cuda())
