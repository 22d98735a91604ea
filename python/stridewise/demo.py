"""``python3 -m stridewise demo [--device cpu|cuda]``: the seed case and a short layout matrix.

For each case: the layout (shape/stride/offset of self, index and, where given, out), whether
stridewise's result is bitwise equal to native torch.gather on the same views, and the median
time of both (CUDA events on cuda, perf_counter on cpu). Then one bad index, raised as a
catchable error; the scatter family on a GNN-style aggregation (index expanded over the feature
dim, as PyTorch Geometric builds it) against native, and a bad index given to an in-place
scatter_add_, which raises and leaves self bit for bit as it was; then the counters. Exits 1 if
any result differs from native or anything was written.
"""
from __future__ import annotations

import argparse
import random
import statistics
import time
from typing import Callable, List, Optional, Sequence

import torch

import stridewise
from stridewise.testing import layouts

RUNS = 7


def _bits(t: torch.Tensor) -> torch.Tensor:
    return t.detach().reshape(-1).contiguous().view(torch.uint8)


def bitwise_equal(a: torch.Tensor, b: torch.Tensor) -> bool:
    if a.shape != b.shape or a.dtype != b.dtype:
        return False
    return a.numel() == 0 or torch.equal(_bits(a).cpu(), _bits(b).cpu())


def median_time_us(fn: Callable[[], object], device: str, runs: int = RUNS) -> float:
    fn()  # warm-up
    samples = []
    for _ in range(runs):
        if device == "cuda":
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            fn()
            end.record()
            end.synchronize()
            samples.append(start.elapsed_time(end) * 1e3)
        else:
            t0 = time.perf_counter()
            fn()
            samples.append((time.perf_counter() - t0) * 1e6)
    return statistics.median(samples)


class Case:
    def __init__(self, name: str, x: torch.Tensor, dim: int, idx: torch.Tensor,
                 out: Optional[Callable[[], torch.Tensor]] = None):
        self.name, self.x, self.dim, self.idx, self.make_out = name, x, dim, idx, out

    def describe(self) -> str:
        parts = [f"dim={self.dim}", "self " + _geo(self.x), "index " + _geo(self.idx)]
        if self.make_out is not None:
            parts.append("out " + _geo(self.make_out()))
        return " | ".join(parts)

    def call(self) -> torch.Tensor:
        if self.make_out is None:
            return torch.gather(self.x, self.dim, self.idx)
        out = self.make_out()
        torch.gather(self.x, self.dim, self.idx, out=out)
        return out


def _geo(t: torch.Tensor) -> str:
    return f"{tuple(t.shape)}/{tuple(t.stride())}@{t.storage_offset()}"


def build_cases(device: str, seed: int = 0) -> List[Case]:
    rng = random.Random(seed)
    gen = torch.Generator().manual_seed(seed)
    dtype = torch.float16

    def values(shape: Sequence[int]) -> torch.Tensor:
        return torch.randn(list(shape), generator=gen).to(dtype=dtype, device=device)

    def indices(hi: int) -> Callable[[Sequence[int]], torch.Tensor]:
        return lambda shape: torch.randint(0, max(hi, 1), list(shape), generator=gen).to(device)

    cases: List[Case] = []
    # The seed (FlagGems #5746): a (4, 1, 384) index expanded from 4 stored elements.
    x = values([4, 16, 384])
    idx = torch.full((4, 1, 1), 15, dtype=torch.int64, device=device).expand(4, 1, 384)
    cases.append(Case("seed", x, 1, idx))

    # The seed fix's regression matrix: index layout x gather dim.
    shape = [4, 16, 24]
    for kind in ("expand", "transpose", "step_slice"):
        for dim in range(3):
            ishape = list(shape)
            ishape[dim] = 5
            x = values(shape)
            idx = layouts.make_layout(kind, ishape, indices(shape[dim]), rng)
            cases.append(Case(f"{kind} dim{dim}", x, dim, idx))

    x = layouts.make_layout("permute", [6, 8, 10], values, rng)
    idx = layouts.make_layout("permute", [6, 3, 10], indices(8), rng)
    cases.append(Case("permute", x, 1, idx))

    x = layouts.make_layout("compound", [6, 8, 10], values, rng)
    idx = layouts.make_layout("compound", [6, 8, 4], indices(10), rng)
    cases.append(Case("compound", x, 2, idx))

    r10 = [2, 1, 3, 2, 1, 2, 3, 1, 2, 2]
    x = layouts.make_layout("transpose", r10, values, rng)
    ishape = list(r10)
    ishape[6] = 4
    idx = layouts.make_layout("expand", ishape, indices(r10[6]), rng)
    cases.append(Case("rank 10", x, 6, idx))

    cases.append(Case("0-dim", values([]), 0, torch.tensor(0, device=device)))
    cases.append(Case("empty index", values([4, 16, 8]), 1,
                      torch.empty(4, 0, 8, dtype=torch.int64, device=device)))

    x = values([8, 32])
    idx = layouts.make_layout("expand", [8, 5], indices(32), rng)
    cases.append(Case("noncontig out", x, 1, idx,
                      out=lambda: torch.empty(5, 8, dtype=dtype, device=device).t()))
    return cases


def run_case(case: Case, device: str) -> bool:
    stridewise.disable()
    want = case.call()
    with stridewise.use(include=["gather"]):
        got = case.call()
    ok = bitwise_equal(got, want)
    t_native = median_time_us(case.call, device)
    with stridewise.use(include=["gather"]):
        t_ours = median_time_us(case.call, device)
    print(f"{case.name:<16} equal={'yes' if ok else 'NO ':<3}  native {t_native:9.1f} us  "
          f"stridewise {t_ours:9.1f} us  {case.describe()}")
    return ok


def bad_index(device: str) -> bool:
    """One out-of-range index through stridewise: a catchable RuntimeError on both devices."""
    x = torch.randn(4, 16, 384, device=device)
    idx = torch.full((4, 1, 1), 16, dtype=torch.int64, device=device).expand(4, 1, 384)
    try:
        with stridewise.use(include=["gather"]):
            torch.gather(x, 1, idx)
            if device == "cuda":
                stridewise.check_errors(sync=True)  # deferred mode: the error is raised here
    except RuntimeError as e:
        print(f"bad index 16 (dim 1 has size 16) -> RuntimeError: {e}")
        return True
    print(f"bad index 16 (dim 1 has size 16) -> NO ERROR RAISED ({device})")
    return False


def scatter_family(device: str, seed: int) -> bool:
    """scatter_add_ / scatter_reduce_ (mean, amax) of edge messages into nodes, as message
    passing does it, against native; then a bad index in place: ATen's error, nothing lost."""
    g = torch.Generator().manual_seed(seed)
    nodes, edges, feat = 512, 4096, 64
    dst = torch.randint(0, nodes, (edges,), generator=g).to(device)
    msg = torch.randn(edges, feat, generator=g).to(device)
    index = dst.view(-1, 1).expand_as(msg)  # stride 0 along the features: PyG's pattern
    ok = True
    for name, fn in (
            ("scatter_add_", lambda o: o.scatter_add_(0, index, msg)),
            ("scatter_reduce_ mean", lambda o: o.scatter_reduce_(0, index, msg, "mean", include_self=False)),
            ("scatter_reduce_ amax", lambda o: o.scatter_reduce_(0, index, msg, "amax", include_self=False))):
        want = fn(torch.zeros(nodes, feat, device=device))
        with stridewise.use(include=["scatter_add", "scatter_reduce"]):
            got = fn(torch.zeros(nodes, feat, device=device))
            t_sw = median_time_us(lambda: fn(torch.zeros(nodes, feat, device=device)), device)
        t_nat = median_time_us(lambda: fn(torch.zeros(nodes, feat, device=device)), device)
        err = float((got - want).abs().max())
        close = err <= 1e-5 * max(1.0, float(want.abs().max()))
        ok &= close
        print(f"{name:22s} max |ours - native| = {err:.2e} ({'ok' if close else 'DIFFERS'})  "
              f"native {t_nat:8.1f} us  stridewise {t_sw:8.1f} us  | msg ({edges}, {feat}) -> ({nodes}, {feat})")
    x = torch.randn(nodes, feat, generator=g).to(device)
    before = x.clone()
    bad = dst.clone()
    bad[edges // 2] = nodes  # one bad value in the middle: every earlier one is valid
    try:
        with stridewise.use(include=["scatter_add"]):
            x.scatter_add_(0, bad.view(-1, 1).expand_as(msg), msg)
            if device == "cuda":
                stridewise.check_errors(sync=True)
        print(f"in-place scatter_add_ with index {nodes} -> NO ERROR RAISED")
        return False
    except RuntimeError as e:
        kept = bitwise_equal(x, before)
        native = ""
        if device == "cpu":  # (on CUDA, ATen's device-side assert would end the process's context)
            y = before.clone()
            try:
                y.scatter_add_(0, bad.view(-1, 1).expand_as(msg), msg)
            except RuntimeError:
                pass
            native = f" (native: self {'unchanged' if bitwise_equal(y, before) else 'partly written'})"
        print(f"in-place scatter_add_ with index {nodes} -> RuntimeError: {str(e).splitlines()[0]}; "
              f"self {'unchanged' if kept else 'WRITTEN'}{native}")
        return ok and kept


def main(argv: Optional[Sequence[str]] = None) -> int:
    p = argparse.ArgumentParser(prog="python3 -m stridewise demo", description=__doc__.split("\n")[0])
    p.add_argument("--device", choices=["cpu", "cuda"],
                   default="cuda" if torch.cuda.is_available() else "cpu")
    p.add_argument("--seed", type=int, default=0)
    args = p.parse_args(list(argv) if argv is not None else None)
    if args.device == "cuda" and not torch.cuda.is_available():
        p.error("--device cuda: torch.cuda.is_available() is False")

    dev_name = torch.cuda.get_device_name(0) if args.device == "cuda" else "cpu"
    print(f"stridewise {stridewise.__version__} | torch {torch.__version__} | device {args.device} "
          f"({dev_name}) | CUDA check mode {stridewise.get_cuda_check_mode()} | "
          f"median of {RUNS} runs")
    stridewise.reset_stats()
    previous = stridewise.enabled()
    failures = 0
    try:
        for case in build_cases(args.device, args.seed):
            failures += not run_case(case, args.device)
        failures += not bad_index(args.device)
        failures += not scatter_family(args.device, args.seed)
    finally:
        if previous:
            stridewise.enable(previous)
        else:
            stridewise.disable()
    print("stats:")
    for op, counters in stridewise.stats().items():
        print(f"  {op}: " + ", ".join(f"{k}={v}" for k, v in counters.items()))
    print("all bitwise equal to native" if failures == 0 else f"{failures} case(s) FAILED")
    return 1 if failures else 0
