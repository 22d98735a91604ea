"""index_put_(accumulate=True) and put_(accumulate=True) at the sizes where the CUDA core sorts
(issue 36: the backward of x[i] and of take): float32 rows of at least 32 elements and 2^20
elements in all (seg_pays), the narrow types always; hot rows whose runs cross many chunks of the
sorted path's back half; two index tensors; transposed values; a column-slice self; put_ with one
element per position (the payload keys). Each result:
  - no further from the float64 result than the rule of stridewise.testing.accuracy allows
    given ATen's distance, and for float16/bfloat16 no further than ATen's itself (ours sums in
    float32 and rounds once; ATen's CUDA kernel rounds at every add);
  - bitwise the same on a second call and in deterministic mode (the sorted path's order is
    fixed by the keys; put_'s float32 keeps atomics in fast mode, so there deterministic mode is
    compared with itself);
  - routed (stats: one call per call, on the device, no copy, no fallback).
Runs on every device of conftest.DEVICES (the CPU kernels take the same calls)."""
from __future__ import annotations

import pytest
import torch

from conftest import DEVICES
from stridewise.testing import accuracy
from test_index_adv import fail_msg, routing, same_bits, stats_problems

DTYPES = [torch.float32, torch.float16, torch.bfloat16]


def _index(n, m, pattern, g):
    if pattern == "hot64":
        return torch.randperm(n, generator=g)[:64][torch.randint(0, 64, (m,), generator=g)]
    if pattern == "hot1":
        return torch.full((m,), int(torch.randint(-n, n, (1,), generator=g)))
    if pattern == "sorted":
        return torch.randint(-n, n, (m,), generator=g).sort().values
    return torch.randint(-n, n, (m,), generator=g)  # uniform, negatives wrapped


def _case(kind, dtype, device, g):
    """(self, indices, values): 8192 positions of rows of 256 (2^21 elements: past seg_pays)."""
    n, m, w = 4096, 8192, 256
    r = lambda *s: torch.randn(*s, generator=g, dtype=torch.float64).to(dtype).to(device)  # noqa: E731
    if kind == "two":
        x = r(16, 512, w)
        return x, [_index(16, m, "uniform", g).to(device), _index(512, m, "hot64", g).to(device)], r(m, w)
    if kind == "slice_t":  # self a column slice, values stored transposed
        return r(n, w + 64)[:, 64:], [_index(n, m, "hot64", g).to(device)], r(w, m).t()
    if kind.startswith("put"):  # one element per position: put_ over a 2^22-element self
        pattern = "hot64" if kind == "put_hot" else "uniform"
        return r(2048, 2048), [_index(2048 * 2048, 1 << 20, pattern, g).to(device)], r(1 << 20)
    return r(n, w), [_index(n, m, kind, g).to(device)], r(m, w)


def _call(kind, x, idx, v):
    if kind.startswith("put"):
        return x.clone().put_(idx[0], v, accumulate=True)
    return x.clone().index_put_(idx, v, accumulate=True)


def _run(sw, kind, x, idx, v, deterministic=False):
    before = torch.are_deterministic_algorithms_enabled()
    torch.use_deterministic_algorithms(deterministic)
    try:
        with routing(sw, ["put" if kind.startswith("put") else "index_put"]):
            return _call(kind, x, idx, v)
    finally:
        torch.use_deterministic_algorithms(before)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: str(d)[6:])
@pytest.mark.parametrize("kind", ["uniform", "sorted", "hot64", "hot1", "two", "slice_t", "put", "put_hot"])
def test_accumulate_is_close_repeatable_and_routed(sw, seed, device, dtype, kind):
    g = torch.Generator().manual_seed(seed)
    x, idx, v = _case(kind, dtype, device, g)
    op = "put" if kind.startswith("put") else "index_put"
    sw.reset_stats()
    ours = _run(sw, kind, x, idx, v)
    again = _run(sw, kind, x, idx, v)
    det = _run(sw, kind, x, idx, v, deterministic=True)
    det2 = _run(sw, kind, x, idx, v, deterministic=True)
    problems = stats_problems(sw, op, device, least=4)
    native = _call(kind, x, idx, v)
    ref = _call(kind, x.double(), idx, v.double())
    p = accuracy.float64_problem(f"{kind} {dtype}", ours, native, ref)
    if p:
        problems.append(p)
    if dtype != torch.float32 and device == "cuda":  # ATen rounds per add; ours once
        eo, en = accuracy.scaled_error(ours, ref), accuracy.scaled_error(native, ref)
        if eo > en:
            problems.append(f"{kind} {dtype}: error {eo:.3e} from float64 above ATen's {en:.3e}")
    if device == "cuda":
        # fast mode sorts every case but put_'s float32 (one element per position: atomics), so
        # its result is the deterministic one; deterministic mode repeats itself everywhere
        pairs = [("deterministic mode, second call", det2, det)]
        if not (kind.startswith("put") and dtype == torch.float32):
            pairs += [("second call", again, ours), ("deterministic mode", det, ours)]
        for name, a, b in pairs:
            if not same_bits(a, b):
                problems.append(f"{kind} {dtype}: {name} differs bitwise")
    assert not problems, fail_msg(problems)
