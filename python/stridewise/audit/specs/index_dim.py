"""index_* family (a 1-D index along one dim): index_select, index_add, index_copy,
index_fill (Scalar and Tensor value), index_reduce."""
from __future__ import annotations

import torch

from .base import Data, Index, OpSpec, Plan, bits_eq, pick_dim, rand_shape, scalar_value

A = "torch.ops.aten."


def _dim_shapes(case, rng, budget=256):
    """self shape S, dim d, index shape I (1-D; 0-D or [1] for a rank-0 self), valid range n,
    and the source shape (S with dim d resized to the index length)."""
    r = case.rank
    S = rand_shape(rng, r, budget, case)
    d = pick_dim(rng, r)
    if r == 0:
        return S, d, ([] if rng.random() < 0.5 else [1]), 1, []
    m = 0 if case.kind == "empty" else rng.randint(1, 5)
    src = list(S)
    src[d] = m
    return S, d, [m], S[d], src


def index_select_plan(case, rng):
    S, d, I, n, src = _dim_shapes(case, rng)
    return Plan({"self": Data(S), "idx": Index(I, n)}, {"dim": d}, out=Data(src))


def _with_source(case, rng, values="normal"):
    S, d, I, n, src = _dim_shapes(case, rng)
    ops = {"self": Data(S, values=values), "idx": Index(I, n), "src": Data(src, values=values)}
    return ops, {"dim": d}, S


def index_add_plan(case, rng):
    ops, sc, S = _with_source(case, rng)
    a = int(case.param("alpha", "1"))
    sc["alpha"] = True if case.dtype == "bool" else a
    return Plan(ops, sc, out=Data(S))


def index_copy_plan(case, rng):
    ops, sc, S = _with_source(case, rng)
    return Plan(ops, sc, out=Data(S))


def index_fill_plan(case, rng):
    S, d, I, n, _ = _dim_shapes(case, rng)
    return Plan({"self": Data(S), "idx": Index(I, n)},
                {"dim": d, "value": scalar_value(case.dtype)}, out=Data(S))


def index_fill_tensor_plan(case, rng):
    S, d, I, n, _ = _dim_shapes(case, rng)
    return Plan({"self": Data(S), "idx": Index(I, n), "src": Data([])}, {"dim": d}, out=Data(S))


def index_reduce_plan(case, rng):
    red = case.param("reduce", "prod")
    ops, sc, S = _with_source(case, rng, values="near1" if red == "prod" else "normal")
    sc["reduce"] = red
    sc["include_self"] = case.param("include_self", "1") == "1"
    return Plan(ops, sc, out=Data(S))


def index_copy_write_check(ns, res, expected):
    """index_copy with duplicate indices: each written element equals one of its writers."""
    dim, idx, src = ns["dim"], ns["idx"], ns["src"]
    sel = res.index_select(dim, idx)
    won = bits_eq(sel, src.reshape(sel.shape)).long()
    z = torch.zeros(res.shape, dtype=torch.long)
    wins = z.index_add(dim, idx, won)
    writes = z.index_add(dim, idx, torch.ones_like(won))
    return torch.where(writes == 0, bits_eq(res, expected), wins >= 1), writes


def _index_reduce_mode(case):
    return {"prod": "prod", "mean": "mean"}.get(case.param("reduce"), "exact")


SPECS = [
    OpSpec(
        "index_select", "index_dim", index_select_plan,
        {"func": A + "index_select.default(self, dim, idx)",
         "out": A + "index_select.out(self, dim, idx, out=out)"},
        operands=("self", "idx"), aten=("index_select", "index_select.out")),
    OpSpec(
        "index_add", "index_dim", index_add_plan,
        {"func": A + "index_add.default(self, dim, idx, src, alpha=alpha)",
         "inplace": A + "index_add_.default(self, dim, idx, src, alpha=alpha)",
         "out": A + "index_add.out(self, dim, idx, src, alpha=alpha, out=out)"},
        operands=("self", "idx", "src"), compare="accum",
        count_call=A + "index_add.default(self, dim, idx, src, alpha=alpha)",
        value_scalars=("alpha",), params={"alpha": ["1", "3"]},
        aten=("index_add", "index_add_", "index_add.out")),
    OpSpec(
        "index_copy", "index_dim", index_copy_plan,
        {"func": A + "index_copy.default(self, dim, idx, src)",
         "inplace": A + "index_copy_.default(self, dim, idx, src)",
         "out": A + "index_copy.out(self, dim, idx, src, out=out)"},
        operands=("self", "idx", "src"), compare="write", write_check=index_copy_write_check,
        aten=("index_copy", "index_copy_", "index_copy.out")),
    OpSpec(
        "index_fill", "index_dim", index_fill_plan,
        {"func": A + "index_fill.int_Scalar(self, dim, idx, value)",
         "inplace": A + "index_fill_.int_Scalar(self, dim, idx, value)",
         "out": A + "index_fill.int_Scalar_out(self, dim, idx, value, out=out)"},
        operands=("self", "idx"),
        aten=("index_fill.int_Scalar", "index_fill_.int_Scalar", "index_fill.int_Scalar_out")),
    OpSpec(
        "index_fill.Tensor", "index_dim", index_fill_tensor_plan,
        {"func": A + "index_fill.int_Tensor(self, dim, idx, src)",
         "inplace": A + "index_fill_.int_Tensor(self, dim, idx, src)",
         "out": A + "index_fill.int_Tensor_out(self, dim, idx, src, out=out)"},
        operands=("self", "idx", "src"),
        aten=("index_fill.int_Tensor", "index_fill_.int_Tensor", "index_fill.int_Tensor_out")),
    OpSpec(
        "index_reduce", "index_dim", index_reduce_plan,
        {"func": A + "index_reduce.default(self, dim, idx, src, reduce, include_self=include_self)",
         "inplace": A + "index_reduce_.default(self, dim, idx, src, reduce, include_self=include_self)",
         "out": A + "index_reduce.out(self, dim, idx, src, reduce, include_self=include_self, out=out)"},
        operands=("self", "idx", "src"), compare="accum", accum=_index_reduce_mode,
        count_call=A + "index_add.default(self, dim, idx, src)",
        params={"reduce": ["prod", "mean", "amax", "amin"], "include_self": ["1", "0"]},
        aten=("index_reduce", "index_reduce_", "index_reduce.out")),
]
