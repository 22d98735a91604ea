"""The demo's second and third parts: every routed op once, on a layout where a kernel that
assumes contiguous memory goes wrong, against native; one bad index per family.

Each op's case builds fresh inputs (seeded) as views of larger storages: transposed, step-sliced,
offset, expanded (stride 0), permuted. The call runs natively and through stridewise on the same
inputs; what a call returns or writes is compared on its whole storage, so a write outside the
view shows too. Data movement must equal native bit for bit. An accumulation (sums, products,
means) must be no farther from the float64 result of the same call than native is, plus one
rounding (``|ours - ref64| <= |native - ref64| + eps(dtype) * |ref64|`` elementwise): stridewise
carries half-precision sums in float32 and rounds once, so it is not bitwise ATen's there. Each
op's own counters (``stridewise.stats()``) must show the call was stridewise's, not a fallback.
"""
from __future__ import annotations

from typing import Callable, Dict, List, NamedTuple

import torch

import stridewise


class OpCase(NamedTuple):
    op: str  # the routed op (stridewise.supported_ops())
    layout: str  # what is unusual about the operands
    rule: str  # "bitwise" | "float64"
    dtype: torch.dtype
    make: Callable  # (dtype, device, generator) -> dict of inputs (views of larger storages)
    call: Callable  # (inputs) -> the tensor(s) to compare (a written view's whole storage)


def _storage(t: torch.Tensor) -> torch.Tensor:
    """Every element of ``t``'s storage, as a flat tensor (a write past the view shows)."""
    n = t.untyped_storage().nbytes() // t.element_size()
    return t.as_strided((n,), (1,), 0)


def _randn(g, shape, dtype, device, lo=None):
    v = torch.randn(shape, generator=g)
    if lo is not None:  # values in [lo, lo + 1): products stay finite
        v = lo + torch.rand(shape, generator=g)
    return v.to(dtype=dtype, device=device)


def _ix(g, hi, shape, device):
    return torch.randint(0, hi, shape, generator=g).to(device)


def _perm_rows(g, n, k, cols, device):
    """(k, cols) index whose every column holds k distinct values in [0, n): no duplicate target."""
    return torch.stack([torch.randperm(n, generator=g)[:k] for _ in range(cols)], 1).to(device)


def cases() -> List[OpCase]:
    h, f = torch.float16, torch.float32
    return [
        OpCase("scatter", "self transposed, src step-sliced, index per element", "bitwise", f,
               lambda d, dev, g: {"base": _randn(g, (8, 6), d, dev), "idx": _perm_rows(g, 6, 4, 8, dev),
                                  "src": _randn(g, (4, 16), d, dev)[:, ::2]},
               lambda x: _storage(x["base"].t().scatter_(0, x["idx"], x["src"]))),
        OpCase("scatter_add", "index expanded over the features (PyG), self offset", "float64", h,
               lambda d, dev, g: {"base": _randn(g, (70, 16), d, dev), "dst": _ix(g, 64, (512,), dev),
                                  "msg": _randn(g, (512, 16), d, dev)},
               lambda x: _storage(x["base"][3:67].scatter_add_(
                   0, x["dst"].view(-1, 1).expand(512, 16), x["msg"]))),
        OpCase("scatter_reduce", "amax, self transposed, index expanded", "bitwise", f,
               lambda d, dev, g: {"base": _randn(g, (16, 40), d, dev), "dst": _ix(g, 40, (300,), dev),
                                  "src": _randn(g, (300, 16), d, dev)},
               lambda x: _storage(x["base"].t().scatter_reduce_(
                   0, x["dst"].view(-1, 1).expand(300, 16), x["src"], "amax", include_self=False))),
        OpCase("index_select", "self transposed, index step-sliced", "bitwise", h,
               lambda d, dev, g: {"self": _randn(g, (24, 50), d, dev), "idx": _ix(g, 50, (20,), dev)},
               lambda x: torch.index_select(x["self"].t(), 0, x["idx"][::2])),
        OpCase("index_add", "self a row slice (offset), source transposed, alpha 2", "float64", h,
               lambda d, dev, g: {"base": _randn(g, (40, 24), d, dev), "idx": _ix(g, 30, (64,), dev),
                                  "src": _randn(g, (24, 64), d, dev)},
               lambda x: _storage(x["base"][5:35].index_add_(0, x["idx"], x["src"].t(), alpha=2))),
        OpCase("index_copy", "self transposed, distinct indices", "bitwise", f,
               lambda d, dev, g: {"base": _randn(g, (12, 30), d, dev), "idx": torch.randperm(30, generator=g)[:9].to(dev),
                                  "src": _randn(g, (9, 12), d, dev)},
               lambda x: _storage(x["base"].t().index_copy_(0, x["idx"], x["src"]))),
        OpCase("index_reduce", "prod, self step-sliced, repeated indices", "float64", h,
               lambda d, dev, g: {"base": _randn(g, (20, 16), d, dev, lo=0.5), "idx": _ix(g, 10, (40,), dev),
                                  "src": _randn(g, (40, 16), d, dev, lo=0.5)},
               lambda x: _storage(x["base"][::2].index_reduce_(0, x["idx"], x["src"], "prod"))),
        OpCase("embedding", "weight offset (a row slice), indices transposed", "bitwise", h,
               lambda d, dev, g: {"w": _randn(g, (110, 32), d, dev), "ids": _ix(g, 100, (16, 8), dev)},
               lambda x: torch.nn.functional.embedding(x["ids"].t(), x["w"][7:107])),
        OpCase("embedding_dense_backward", "upstream gradient expanded (stride 0), repeated ids",
               "float64", h,
               lambda d, dev, g: {"g": _randn(g, (1, 32), d, dev), "ids": _ix(g, 50, (6, 40), dev)},
               lambda x: torch.ops.aten.embedding_dense_backward(
                   x["g"].expand(240, 32).view(6, 40, 32), x["ids"], 50, -1, False)),
        OpCase("index", "x[i]: x transposed, i expanded", "bitwise", f,
               lambda d, dev, g: {"x": _randn(g, (16, 60), d, dev), "i": _ix(g, 60, (1, 12), dev)},
               lambda x: x["x"].t()[x["i"].expand(5, 12)]),
        OpCase("index_put", "x[i] += v: x transposed, repeated i, accumulate", "float64", h,
               lambda d, dev, g: {"base": _randn(g, (16, 60), d, dev), "i": _ix(g, 60, (200,), dev),
                                  "v": _randn(g, (200, 16), d, dev)},
               lambda x: _storage(x["base"].t().index_put_((x["i"],), x["v"], accumulate=True))),
        OpCase("take", "self permuted, negative indices", "bitwise", f,
               lambda d, dev, g: {"x": _randn(g, (4, 5, 6), d, dev), "i": _ix(g, 240, (7, 9), dev) - 120},
               lambda x: torch.take(x["x"].permute(2, 0, 1), x["i"])),
        OpCase("put", "self step-sliced, repeated indices, accumulate", "float64", h,
               lambda d, dev, g: {"base": _randn(g, (12, 20), d, dev), "i": _ix(g, 120, (300,), dev),
                                  "v": _randn(g, (300,), d, dev)},
               lambda x: _storage(x["base"][:, ::2].put_(x["i"], x["v"], accumulate=True))),
        OpCase("index_fill", "self transposed, repeated indices", "bitwise", f,
               lambda d, dev, g: {"base": _randn(g, (10, 30), d, dev), "idx": _ix(g, 10, (12,), dev)},
               lambda x: _storage(x["base"].t().index_fill_(1, x["idx"], -7.5))),
    ]


def _inputs(case: OpCase, device: str, seed: int, dtype=None) -> Dict[str, torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    x = case.make(case.dtype, device, g)
    if dtype is not None:  # the float64 reference: the same (rounded) inputs, widened
        x = {k: v.to(dtype) if v.is_floating_point() else v for k, v in x.items()}
    return x


def _compare(case: OpCase, ours, native, ref) -> str:
    """'' when ``ours`` passes ``case.rule`` against native (and the float64 ``ref``), else why."""
    if ours.shape != native.shape or ours.dtype != native.dtype:
        return f"shape/dtype {tuple(ours.shape)}/{ours.dtype} vs native {tuple(native.shape)}/{native.dtype}"
    if case.rule == "bitwise":
        same = torch.equal(ours.reshape(-1).view(torch.uint8) if ours.numel() else ours,
                           native.reshape(-1).view(torch.uint8) if native.numel() else native)
        return "" if same else "differs from native (bitwise)"
    a, b, r = ours.double(), native.double(), ref.double()
    slack = torch.finfo(case.dtype).eps * r.abs()
    bad = (a - r).abs() > (b - r).abs() + slack
    if bool(bad.any()):
        k = int(bad.nonzero()[0, 0])
        return (f"{int(bad.sum())} element(s) farther from float64 than native; first [{k}]: ours "
                f"{float(a.view(-1)[k])}, native {float(b.view(-1)[k])}, float64 {float(r.view(-1)[k])}")
    return ""


def run_family(device: str, seed: int) -> List[dict]:
    """Each case natively, through stridewise (that op alone) and, for the float64 rule, natively
    in float64: [{op, layout, rule, error, ours}] (``ours``: stridewise's kernel ran, per its
    counters, not a fallback to ATen's)."""
    out = []
    for k, case in enumerate(cases()):
        native = case.call(_inputs(case, device, seed + k))
        ref = case.call(_inputs(case, device, seed + k, torch.float64)) if case.rule == "float64" else None
        before = stridewise.stats().get(case.op, {})
        with stridewise.use(include=[case.op]):
            ours = case.call(_inputs(case, device, seed + k))
            stridewise.check_errors(sync=True)
        after = stridewise.stats().get(case.op, {})
        ran = after.get("calls", 0) - before.get("calls", 0)
        fell = after.get("fallback", 0) - before.get("fallback", 0)
        out.append({"op": case.op, "layout": case.layout, "rule": case.rule,
                    "error": _compare(case, ours, native, ref), "ours": ran > fell,
                    "why": "" if ran > fell else (f"fell back to ATen: {after.get('fallback_reasons')}"
                                                   if fell else "stridewise's counters show no call")})
    return out


class BadCase(NamedTuple):
    family: str
    call: str  # what the line shows
    value: int  # the bad index value
    run: Callable  # (device) -> (the call, the tensor that must stay as it was)


def _bad(v: torch.Tensor, at: int, value: int) -> torch.Tensor:
    v = v.clone()
    v.view(-1)[at] = value  # one bad value in the middle: the ones before it are valid
    return v


def bad_cases() -> List[BadCase]:
    def gather(dev):  # functional: gather's out= may be partly written (README "Errors")
        x = torch.randn(4, 16, 24, device=dev)
        idx = _bad(torch.randint(0, 16, (4, 1, 1), device=dev), 2, 16).expand(4, 3, 24)
        return (lambda: torch.gather(x, 1, idx)), x

    def scatter(dev):
        x, msg = torch.randn(64, 16, device=dev), torch.randn(512, 16, device=dev)
        dst = _bad(torch.randint(0, 64, (512,), device=dev), 256, 64)
        return (lambda: x.scatter_add_(0, dst.view(-1, 1).expand(512, 16), msg)), x

    def index_dim(dev):
        x, src = torch.randn(30, 8, device=dev), torch.randn(40, 8, device=dev)
        idx = _bad(torch.randint(0, 30, (40,), device=dev), 20, -31)
        return (lambda: x.index_add_(0, idx, src)), x

    def k_index(dev):
        x, v = torch.randn(20, 6, device=dev), torch.randn(50, 6, device=dev)
        i = _bad(torch.randint(0, 20, (50,), device=dev), 25, 20)
        return (lambda: x.index_put_((i,), v, accumulate=True)), x

    def take_put(dev):
        x, v = torch.randn(5, 8, device=dev), torch.randn(30, device=dev)
        i = _bad(torch.randint(-40, 40, (30,), device=dev), 15, 40)
        return (lambda: x.put_(i, v)), x

    def embedding(dev):
        w, ids = torch.randn(100, 16, device=dev), _bad(torch.randint(0, 100, (8, 12), device=dev), 50, 100)
        return (lambda: torch.nn.functional.embedding(ids.t(), w)), w

    return [BadCase("gather", "gather(x, 1, idx)  (idx expanded)", 16, gather),
            BadCase("scatter", "x.scatter_add_(0, idx, src)", 64, scatter),
            BadCase("index_*", "x.index_add_(0, idx, src)", -31, index_dim),
            BadCase("x[i]", "x.index_put_((i,), v, accumulate=True)", 20, k_index),
            BadCase("take/put", "x.put_(i, v)", 40, take_put),
            BadCase("embedding", "embedding(ids.t(), w)", 100, embedding)]


def run_bad(device: str, seed: int) -> List[dict]:
    """Each family's bad index through stridewise: [{family, call, error (the message's first
    line, '' when none was raised), kept (the written tensor is bit for bit as it was)}]."""
    out = []
    for k, case in enumerate(bad_cases()):
        torch.manual_seed(seed + k)
        fn, target = case.run(device)
        before = target.clone()
        err = ""
        try:
            with stridewise.use():
                fn()
                stridewise.check_errors(sync=True)  # CUDA's deferred mode raises here
        except (RuntimeError, IndexError) as e:
            err = f"{type(e).__name__}: {str(e).splitlines()[0]}"
        kept = torch.equal(target.reshape(-1).view(torch.uint8), before.reshape(-1).view(torch.uint8))
        out.append({"family": case.family, "call": case.call, "value": case.value, "error": err,
                    "kept": kept})
    return out
