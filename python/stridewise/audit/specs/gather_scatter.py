"""gather / scatter family: gather, scatter (src, value, reduce, value_reduce), scatter_add,
scatter_reduce, take_along_dim."""
from __future__ import annotations

import torch

from .base import Data, Index, OpSpec, Plan, bits_eq, pick_dim, rand_shape, scalar_value

A = "torch.ops.aten."


def _shapes(case, rng, budget=256):
    """self shape S, dim d, index shape I (I[k] <= S[k] for k != d)."""
    r = case.rank
    S = rand_shape(rng, r, budget, case)
    d = pick_dim(rng, r)
    I = [rng.randint(1, s) for s in S]
    if r:
        I[d] = rng.randint(1, 4)
    if case.kind == "empty" and r:
        k = rng.randrange(r)
        I[k] = 0
        if k != d and rng.random() < 0.5:
            S[k] = 0
    n = S[d] if r else 1
    return S, d, I, n


def gather_plan(case, rng):
    S, d, I, n = _shapes(case, rng)
    return Plan({"self": Data(S), "idx": Index(I, n)}, {"dim": d}, out=Data(I))


def _scatter_base(case, rng, with_src=True, values="normal"):
    S, d, I, n = _shapes(case, rng)
    ops = {"self": Data(S, values=values), "idx": Index(I, n)}
    if with_src:
        ops["src"] = Data([i + rng.choice([0, 0, 1]) for i in I], values=values)
    return ops, {"dim": d}, S


def scatter_src_plan(case, rng):
    ops, sc, S = _scatter_base(case, rng)
    return Plan(ops, sc, out=Data(S))


def scatter_value_plan(case, rng):
    ops, sc, S = _scatter_base(case, rng, with_src=False)
    sc["value"] = scalar_value(case.dtype)
    return Plan(ops, sc, out=Data(S))


def _reduce_values(case):
    return "near1" if case.param("reduce") in ("multiply", "prod") else "normal"


def scatter_reduce_plan(case, rng):  # scatter.reduce (legacy reduce= add | multiply)
    ops, sc, S = _scatter_base(case, rng, values=_reduce_values(case))
    sc["reduce"] = case.param("reduce", "add")
    return Plan(ops, sc, out=Data(S))


def scatter_value_reduce_plan(case, rng):
    ops, sc, S = _scatter_base(case, rng, with_src=False, values=_reduce_values(case))
    red = case.param("reduce", "add")
    sc["reduce"] = red
    if red == "multiply":
        sc["value"] = 1.0625 if case.dtype.startswith(("float", "bfloat", "complex")) else 3
    else:
        sc["value"] = scalar_value(case.dtype)
    return Plan(ops, sc, out=Data(S))


def scatter_add_plan(case, rng):
    ops, sc, S = _scatter_base(case, rng)
    return Plan(ops, sc, out=Data(S))


def scatter_reduce_two_plan(case, rng):
    ops, sc, S = _scatter_base(case, rng, values=_reduce_values(case))
    sc["reduce"] = case.param("reduce", "sum")
    sc["include_self"] = case.param("include_self", "1") == "1"
    return Plan(ops, sc, out=Data(S))


def _numel(shape):
    n = 1
    for s in shape:
        n *= s
    return n


def take_along_dim_plan(case, rng):
    r = case.rank
    flat = case.param("flat", "0") == "1" or r == 0
    S = rand_shape(rng, r, 256, case)
    if flat:
        I = rand_shape(rng, r, 64, case)
        if case.kind == "empty" and r:
            I[rng.randrange(r)] = 0
        n = _numel(S)
        return Plan({"self": Data(S), "idx": Index(I, n)}, {"dim": None}, out=Data([_numel(I)]))
    d = pick_dim(rng, r)
    I = [s if rng.random() < 0.7 else 1 for s in S]
    I[d] = rng.randint(1, 4)
    if case.kind == "empty":
        I[rng.randrange(r)] = 0
    out = [max(a, b) if k != d else b for k, (a, b) in enumerate(zip(S, I))]
    if 0 in I:
        out = [0 if I[k] == 0 else out[k] for k in range(r)]
    return Plan({"self": Data(S), "idx": Index(I, S[d])}, {"dim": d}, out=Data(out))


def scatter_write_check(ns, res, expected):
    """scatter(src) with duplicate targets: each written element equals one of its writers."""
    dim, idx, src = ns["dim"], ns["idx"], ns["src"]
    srcv = src[tuple(slice(0, s) for s in idx.shape)] if idx.dim() else src
    won = bits_eq(res.gather(dim, idx), srcv).long()
    wins = torch.zeros(res.shape, dtype=torch.long).scatter_add_(dim, idx, won)
    writes = torch.zeros(res.shape, dtype=torch.long).scatter_add_(dim, idx, torch.ones_like(won))
    return torch.where(writes == 0, bits_eq(res, expected), wins >= 1), writes


def _legacy_reduce_mode(case):
    return "prod" if case.param("reduce") == "multiply" else "sum"


def _reduce_mode(case):
    return {"sum": "sum", "prod": "prod", "mean": "mean"}.get(case.param("reduce"), "exact")


SPECS = [
    OpSpec(
        "gather", "gather_scatter", gather_plan,
        {"func": A + "gather.default(self, dim, idx)",
         "out": A + "gather.out(self, dim, idx, out=out)"},
        operands=("self", "idx"), aten=("gather", "gather.out")),
    OpSpec(
        "scatter.src", "gather_scatter", scatter_src_plan,
        {"func": A + "scatter.src(self, dim, idx, src)",
         "inplace": A + "scatter_.src(self, dim, idx, src)",
         "out": A + "scatter.src_out(self, dim, idx, src, out=out)"},
        operands=("self", "idx", "src"), compare="write", write_check=scatter_write_check,
        aten=("scatter.src", "scatter_.src", "scatter.src_out")),
    OpSpec(
        "scatter.value", "gather_scatter", scatter_value_plan,
        {"func": A + "scatter.value(self, dim, idx, value)",
         "inplace": A + "scatter_.value(self, dim, idx, value)",
         "out": A + "scatter.value_out(self, dim, idx, value, out=out)"},
        operands=("self", "idx"), aten=("scatter.value", "scatter_.value", "scatter.value_out")),
    OpSpec(
        "scatter.reduce", "gather_scatter", scatter_reduce_plan,
        {"func": A + "scatter.reduce(self, dim, idx, src, reduce=reduce)",
         "inplace": A + "scatter_.reduce(self, dim, idx, src, reduce=reduce)",
         "out": A + "scatter.reduce_out(self, dim, idx, src, reduce=reduce, out=out)"},
        operands=("self", "idx", "src"), compare="accum", accum=_legacy_reduce_mode,
        count_call=A + "scatter_add.default(self, dim, idx, src)",
        params={"reduce": ["add", "multiply"]},
        aten=("scatter.reduce", "scatter_.reduce", "scatter.reduce_out")),
    OpSpec(
        "scatter.value_reduce", "gather_scatter", scatter_value_reduce_plan,
        {"func": A + "scatter.value_reduce(self, dim, idx, value, reduce=reduce)",
         "inplace": A + "scatter_.value_reduce(self, dim, idx, value, reduce=reduce)",
         "out": A + "scatter.value_reduce_out(self, dim, idx, value, reduce=reduce, out=out)"},
        operands=("self", "idx"), compare="accum", accum=_legacy_reduce_mode,
        count_call=A + "scatter.value_reduce(self, dim, idx, value, reduce='add')",
        value_scalars=("value",), params={"reduce": ["add", "multiply"]},
        aten=("scatter.value_reduce", "scatter_.value_reduce", "scatter.value_reduce_out")),
    OpSpec(
        "scatter_add", "gather_scatter", scatter_add_plan,
        {"func": A + "scatter_add.default(self, dim, idx, src)",
         "inplace": A + "scatter_add_.default(self, dim, idx, src)",
         "out": A + "scatter_add.out(self, dim, idx, src, out=out)"},
        operands=("self", "idx", "src"), compare="accum",
        count_call=A + "scatter_add.default(self, dim, idx, src)",
        aten=("scatter_add", "scatter_add_", "scatter_add.out")),
    OpSpec(
        "scatter_reduce", "gather_scatter", scatter_reduce_two_plan,
        {"func": A + "scatter_reduce.two(self, dim, idx, src, reduce, include_self=include_self)",
         "inplace": A + "scatter_reduce_.two(self, dim, idx, src, reduce, include_self=include_self)",
         "out": A + "scatter_reduce.two_out(self, dim, idx, src, reduce, include_self=include_self, out=out)"},
        operands=("self", "idx", "src"), compare="accum", accum=_reduce_mode,
        count_call=A + "scatter_reduce.two(self, dim, idx, src, 'sum', include_self=include_self)",
        params={"reduce": ["sum", "prod", "mean", "amax", "amin"], "include_self": ["1", "0"]},
        aten=("scatter_reduce.two", "scatter_reduce_.two", "scatter_reduce.two_out")),
    OpSpec(
        "take_along_dim", "gather_scatter", take_along_dim_plan,
        {"func": A + "take_along_dim.default(self, idx, dim)",
         "out": A + "take_along_dim.out(self, idx, dim, out=out)"},
        operands=("self", "idx"), params={"flat": ["0", "1"]},
        aten=("take_along_dim", "take_along_dim.out")),
]
