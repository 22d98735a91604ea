"""Flat and advanced indexing: take, put, index.Tensor, index_put, embedding.

index.Tensor / index_put patterns (param ``pat``): one index tensor, two adjacent, two
separated (the result's broadcast dims first), a bool mask over one or two dims, and two index
tensors that broadcast together ((p, 1) with (q,)). index_put's values: the result's shape, its
last dim only, or 0-dim (one value broadcast everywhere). The matrix adds int32 indices,
negative / duplicate / out-of-range values, and every layout of each operand (an expanded
negative index among them)."""
from __future__ import annotations

import torch

from .base import Data, Index, OpSpec, Plan, bits_eq, rand_shape

A = "torch.ops.aten."


def _numel(shape):
    n = 1
    for s in shape:
        n *= s
    return n


def take_plan(case, rng):
    S = rand_shape(rng, case.rank, 256, case)
    I = rand_shape(rng, case.rank, 64, case)
    if case.kind == "empty" and I:
        I[rng.randrange(len(I))] = 0
    return Plan({"self": Data(S), "idx": Index(I, _numel(S))}, {}, out=Data(I))


def put_plan(case, rng):
    S = rand_shape(rng, case.rank, 256, case)
    I = rand_shape(rng, case.rank, 64, case)
    if case.kind == "empty" and I:
        I[rng.randrange(len(I))] = 0
    return Plan({"self": Data(S), "idx": Index(I, _numel(S)), "src": Data(I)},
                {"accumulate": case.param("accumulate", "0") == "1"}, out=Data(S))


def _adv_indices(case, rng):
    """Index list (None = full slice) for index.Tensor / index_put, and the result shape
    (a function of the built tensors when a bool mask decides it)."""
    r = case.rank
    S = rand_shape(rng, r, 256, case)
    pat = case.param("pat", "one")
    if pat == "split" and r < 3:
        pat = "two"
    if pat == "bcast" and r < 2:
        pat = "one"
    if pat == "bcast":
        # two adjacent index tensors that broadcast together: (p, 1) with (q,) -> (p, q)
        p0 = rng.randrange(r - 1)
        B = [rng.randint(1, 4), rng.randint(1, 5)]
        if case.kind == "empty":
            B[rng.randrange(2)] = 0
        idx = [None] * p0 + [Index([B[0], 1], S[p0]), Index([B[1]], S[p0 + 1])]
        out = S[:p0] + B + S[p0 + 2:]
        return S, idx, (lambda t, out=out: out)
    if pat == "two" and r < 2:
        pat = "one"
    if pat == "mask":
        p = rng.randrange(r)
        m = rng.randint(1, min(2, r - p))
        idx = [None] * p + [Index(S[p:p + m], 0, mask=True)]

        def result(t, S=S, p=p, m=m):
            return S[:p] + [int(t["idx"][p].sum())] + S[p + m:]
        return S, idx, result
    k = 2 if pat in ("two", "split") else 1
    if pat == "split":
        p0 = rng.randrange(r - 2)
        pos = [p0, rng.randrange(p0 + 2, r)]
    else:
        p0 = rng.randrange(r - k + 1)
        pos = list(range(p0, p0 + k))
    rest = [S[j] for j in range(r) if j not in pos]
    B = rand_shape(rng, min(r, 4), max(1, 512 // max(1, _numel(rest))))
    if case.kind == "empty":
        B[rng.randrange(len(B))] = 0
    idx = [None] * (max(pos) + 1)
    for j in pos:
        idx[j] = Index(B, S[j])
    if pat == "split":
        out = B + rest
    else:
        out = S[:pos[0]] + B + S[pos[-1] + 1:]
    return S, idx, (lambda t, out=out: out)


def index_plan(case, rng):
    S, idx, result = _adv_indices(case, rng)
    return Plan({"self": Data(S), "idx": idx}, {}, out=Data(result))


def index_put_plan(case, rng):
    S, idx, result = _adv_indices(case, rng)
    u = rng.random()
    trail, scalar = u < 0.3, 0.3 <= u < 0.45

    def values_shape(t):
        shape = result(t)
        if scalar:
            return []  # one value broadcast everywhere (x[i] = v with a 0-dim v)
        return shape[len(shape) - 1:] if trail and shape else shape  # broadcast from the last dim
    return Plan({"self": Data(S), "idx": idx, "src": Data(values_shape)},
                {"accumulate": case.param("accumulate", "0") == "1"}, out=Data(S))


def embedding_plan(case, rng):
    V, D = rng.randint(1, 6), rng.randint(1, 4)
    I = rand_shape(rng, case.rank, 128, case)
    if case.kind == "empty" and I:
        I[rng.randrange(len(I))] = 0
    return Plan({"self": Data([V, D]), "idx": Index(I, V)}, {}, out=Data(I + [D]))


def put_write_check(ns, res, expected):
    idx, src = ns["idx"], ns["src"]
    at = res.take(idx)
    won = bits_eq(at, src.reshape(at.shape)).long()
    z = torch.zeros(res.shape, dtype=torch.long)
    wins = z.clone().put_(idx, won, accumulate=True)
    writes = z.clone().put_(idx, torch.ones_like(won), accumulate=True)
    return torch.where(writes == 0, bits_eq(res, expected), wins >= 1), writes


def index_put_write_check(ns, res, expected):
    idx, src = ns["idx"], ns["src"]
    at = torch.ops.aten.index.Tensor(res, idx)
    won = bits_eq(at, src.expand(at.shape)).long()
    z = torch.zeros(res.shape, dtype=torch.long)
    wins = torch.ops.aten.index_put.default(z, idx, won, True)
    writes = torch.ops.aten.index_put.default(z, idx, torch.ones_like(won), True)
    return torch.where(writes == 0, bits_eq(res, expected), wins >= 1), writes


def _acc_or_write(case):
    return "sum" if case.param("accumulate", "0") == "1" else "write"


SPECS = [
    OpSpec(
        "take", "flat_adv", take_plan,
        {"func": A + "take.default(self, idx)", "out": A + "take.out(self, idx, out=out)"},
        operands=("self", "idx"), aten=("take", "take.out")),
    OpSpec(
        "put", "flat_adv", put_plan,
        {"func": A + "put.default(self, idx, src, accumulate)",
         "inplace": A + "put_.default(self, idx, src, accumulate)",
         "out": A + "put.out(self, idx, src, accumulate, out=out)"},
        operands=("self", "idx", "src"), compare="accum", accum=_acc_or_write,
        count_call=A + "put.default(self, idx, src, True)", write_check=put_write_check,
        params={"accumulate": ["0", "1"]}, aten=("put", "put_", "put.out")),
    OpSpec(
        "index.Tensor", "flat_adv", index_plan,
        {"func": A + "index.Tensor(self, idx)", "out": A + "index.Tensor_out(self, idx, out=out)"},
        operands=("self", "idx"), params={"pat": ["one", "two", "split", "mask", "bcast"]}, min_rank=1,
        aten=("index.Tensor", "index.Tensor_out")),
    OpSpec(
        "index_put", "flat_adv", index_put_plan,
        {"func": A + "index_put.default(self, idx, src, accumulate)",
         "inplace": A + "index_put_.default(self, idx, src, accumulate)",
         "out": A + "index_put.out(self, idx, src, accumulate, out=out)"},
        operands=("self", "idx", "src"), compare="accum", accum=_acc_or_write,
        count_call=A + "index_put.default(self, idx, src, True)", write_check=index_put_write_check,
        params={"accumulate": ["0", "1"], "pat": ["one", "two", "split", "mask", "bcast"]}, min_rank=1,
        aten=("index_put", "index_put_", "index_put.out")),
    # the unchecked forms torch.compile's decompositions emit (upsampling, index_put): no masks in
    # _unsafe_index (ATen refuses them), functional only
    OpSpec(
        "_unsafe_index", "flat_adv", index_plan,
        {"func": A + "_unsafe_index.Tensor(self, idx)"},
        operands=("self", "idx"), params={"pat": ["one", "two", "split", "bcast"]}, min_rank=1,
        aten=("_unsafe_index.Tensor",)),
    OpSpec(
        "_unsafe_index_put", "flat_adv", index_put_plan,
        {"func": A + "_unsafe_index_put.default(self, idx, src, accumulate)"},
        operands=("self", "idx", "src"), compare="accum", accum=_acc_or_write,
        count_call=A + "index_put.default(self, idx, src, True)", write_check=index_put_write_check,
        params={"accumulate": ["0", "1"], "pat": ["one", "two", "split", "mask", "bcast"]}, min_rank=1,
        aten=("_unsafe_index_put",)),
    OpSpec(
        "embedding", "flat_adv", embedding_plan,
        {"func": A + "embedding.default(self, idx)", "out": A + "embedding.out(self, idx, out=out)"},
        operands=("self", "idx"), aten=("embedding", "embedding.out"),
        notes="self is the weight (always 2-D); the rank is the index's"),
]
