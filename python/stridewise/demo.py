"""``python3 -m stridewise demo [--device cpu|cuda]``: every routed op on layouts that break
naive kernels, against native, in four parts.

1. gather through the seed case and a short layout matrix: the layout (shape/stride/offset of
   self, index and, where given, out), bitwise equality with torch.gather on the same views, the
   median time of both (CUDA events on cuda, perf_counter on cpu);
2. every other routed op once (demo_family.py): bitwise for data movement, the float64 rule for
   accumulations, and stridewise's own counters show its kernel ran;
3. one bad index per family: a catchable error naming op, dim, value and range, nothing written;
4. the scatter family on a GNN-style aggregation (index expanded over the feature dim, as
   PyTorch Geometric builds it) against native, timed.

The last line counts the ops that ran through stridewise. Exits 1 if any result differs, any
bad index was not raised or wrote, or any routed op did not run through stridewise.
"""
from __future__ import annotations

import argparse
import random
import statistics
import time
import warnings
from typing import Callable, List, Optional, Sequence

import torch

import stridewise
from stridewise import demo_family
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


def scatter_family(device: str, seed: int) -> bool:
    """scatter_add_ / scatter_reduce_ (mean, amax) of edge messages into nodes, as message
    passing does it, against native, timed."""
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
    return ok


def main(argv: Optional[Sequence[str]] = None) -> int:
    p = argparse.ArgumentParser(prog="python3 -m stridewise demo", description=__doc__.split("\n")[0])
    p.add_argument("--device", choices=["cpu", "cuda"],
                   default="cuda" if torch.cuda.is_available() else "cpu")
    p.add_argument("--seed", type=int, default=0)
    args = p.parse_args(list(argv) if argv is not None else None)
    warnings.filterwarnings("ignore", message="index_reduce\\(\\) is in beta")
    if args.device == "cuda" and not torch.cuda.is_available():
        p.error("--device cuda: torch.cuda.is_available() is False")

    dev_name = torch.cuda.get_device_name(0) if args.device == "cuda" else "cpu"
    print(f"stridewise {stridewise.__version__} | torch {torch.__version__} | device {args.device} "
          f"({dev_name}) | CUDA check mode {stridewise.get_cuda_check_mode()} | "
          f"median of {RUNS} runs")
    stridewise.reset_stats()
    previous = stridewise.enabled()
    gather_bad = fam_bad = bad_bad = 0
    try:
        print(f"1. gather through {len(build_cases(args.device, args.seed))} layouts (the seed's "
              f"expanded index first), bitwise against torch.gather:")
        gather_cases = build_cases(args.device, args.seed)
        for case in gather_cases:
            gather_bad += not run_case(case, args.device)
        print("\n2. every other routed op once, on a layout where a kernel that assumes contiguous "
              "memory goes wrong (bitwise: data movement; float64: no farther from the float64 "
              "result than native, plus one rounding):")
        fam = demo_family.run_family(args.device, args.seed)
        for r in fam:
            ok = not r["error"] and r["ours"]
            fam_bad += not ok
            print(f"  {r['op']:<25} {r['rule']:<8} {'ok' if ok else 'FAILED':<7} {r['layout']}"
                  + (f"  -- {r['error'] or r['why']}" if not ok else ""))
        print("\n3. a bad index per family, through stridewise: raises, writes nothing:")
        bad = demo_family.run_bad(args.device, args.seed)
        for r in bad:
            ok = bool(r["error"]) and r["kept"]
            bad_bad += not ok
            print(f"  {r['family']:<10} {r['call']:<40} -> {r['error'] or 'NO ERROR RAISED'}; "
                  f"{'nothing written' if r['kept'] else 'WRITTEN'}")
        print("\n4. message passing (GNN aggregation), timed:")
        scatter_ok = scatter_family(args.device, args.seed)
    finally:
        if previous:
            stridewise.enable(previous)
        else:
            stridewise.disable()
    st = stridewise.stats()
    ran = [op for op in stridewise.supported_ops() if st.get(op, {}).get("calls", 0) > st.get(op, {}).get("fallback", 0)]
    print("\nstats (calls through stridewise per op; fallbacks to ATen by rule):")
    print("  " + ", ".join(f"{op} {st[op]['calls']}" + (f" ({st[op]['fallback']} fallback)" if st[op].get("fallback") else "")
                           for op in stridewise.supported_ops() if op in st))
    failures = gather_bad + fam_bad + bad_bad + (not scatter_ok)
    n_ops = len(stridewise.supported_ops())
    rules = [r["rule"] for r in fam]
    print(f"{len(ran)} of {n_ops} routed ops ran through stridewise on {args.device}: gather in "
          f"{len(gather_cases) - gather_bad} of {len(gather_cases)} layouts bitwise equal to native; "
          f"{len(fam) - fam_bad} of {len(fam)} other ops as native ({rules.count('bitwise')} bitwise, "
          f"{rules.count('float64')} by the float64 rule); {len(bad) - bad_bad} of {len(bad)} families "
          f"raised on a bad index and wrote nothing"
          + ("" if failures == 0 and len(ran) == n_ops else f" -- {failures} FAILED"
             + (f", ops not run: {', '.join(op for op in stridewise.supported_ops() if op not in ran)}"
                if len(ran) < n_ops else "")))
    return 1 if failures or len(ran) < n_ops else 0
