"""The case matrix: which cases an audit runs, per op and variant.

Per (op, variant), ``full`` runs:
  layouts   every operand (out= included) in every layout class, alone, at every rank
            (0..8 and 10); the element size cycles over 4, 2, 8, 1 and 16-byte dtypes
  compound  every operand in the compound layout together, at every rank
  dtypes    every dtype native CPU supports for the op: contiguous, all-compound, expanded index
  int32     int32 indices in every index layout, at three ranks each (quick too): an int32-only
            bug that shows in one layout class still fails at least three cases there, enough
            for the diagnosis to name int32 (explain.MIN_GROUP)
  kinds     negative, duplicate and out-of-range (n, -n-1, >= 2**32) indices in every index layout
  wide      inner dims of 16..48 (where kernels switch to fast paths), every operand and layout
  empty     size-0 dims, contiguous and compound
Op parameters (reduce=, include_self=, accumulate=, ...) cycle over the cases, so every value
meets every sweep. ``quick`` is the same shape on fewer ranks, dtypes and index layouts.
"""
from __future__ import annotations

import itertools
from dataclasses import dataclass
from typing import Optional

from ..testing.layouts import LAYOUTS
from .caseid import Case, make_case
from .layout_names import EXTRA_LAYOUTS

RANKS_FULL = (0, 1, 2, 3, 4, 5, 6, 7, 8, 10)
RANKS_QUICK = (0, 1, 2, 3, 6, 10)
# preference order per element size, for the layout sweep
ELEM_PREF = {
    4: ("float32", "int32"), 2: ("float16", "bfloat16", "int16"), 8: ("int64", "float64", "complex64"),
    1: ("uint8", "int8", "bool"), 16: ("complex128",),
}
ALL_DTYPES = ("float32", "float64", "float16", "bfloat16", "complex64", "complex128", "int8",
              "int16", "int32", "int64", "uint8", "bool", "uint16", "uint32", "uint64")
BAD_KINDS = ("neg", "dup", "oob", "oobneg", "oobbig")


@dataclass
class MatrixOptions:
    matrix: str = "full"  # full | quick
    seed: int = 0
    dtypes: Optional[tuple] = None  # restrict data dtypes
    ranks: Optional[tuple] = None
    variants: Optional[tuple] = None
    large: bool = False


_SUPPORT: dict = {}


def supported(spec, dtype: str) -> bool:
    """Does native CPU run this op for ``dtype`` (any parameter combination)?"""
    key = (spec.name, dtype)
    if key not in _SUPPORT:
        from . import gen
        from .oracle import Tolerance, reference

        combos = _combos(spec) or [{}]
        ok = False
        for p in combos:
            case = make_case(spec.name, "func", rank=2, dtype=dtype, params=p)
            try:
                ref = reference(spec, gen.build(spec, case), Tolerance())
            except Exception:  # noqa: BLE001
                continue
            if not ref.unsupported:
                ok = True
                break
        _SUPPORT[key] = ok
    return _SUPPORT[key]


def _combos(spec) -> list:
    if not spec.params:
        return []
    keys = sorted(spec.params)
    return [dict(zip(keys, vals)) for vals in itertools.product(*(spec.params[k] for k in keys))]


def representatives(spec, dtypes) -> list:
    reps = []
    for size in (4, 2, 8, 1, 16):
        for d in ELEM_PREF[size]:
            if d in dtypes and supported(spec, d):
                reps.append(d)
                break
    return reps or [d for d in dtypes if supported(spec, d)][:1] or ["float32"]


def cases_for(spec, variant: str, opt: MatrixOptions) -> list:
    quick = opt.matrix == "quick"
    ranks = [r for r in (opt.ranks or (RANKS_QUICK if quick else RANKS_FULL)) if r >= spec.min_rank]
    dtypes = tuple(opt.dtypes or ALL_DTYPES)
    sup = [d for d in dtypes if supported(spec, d)]
    reps = representatives(spec, sup or dtypes)
    operands = spec.operands_for(variant)
    combos = _combos(spec)
    idx_layouts = ("contiguous", "expand", "transpose", "compound") if quick else LAYOUTS
    if spec.family == "gather_scatter":
        idx_layouts = tuple(idx_layouts) + ("expand_nondim",)
    mid = min(max(3, spec.min_rank), max(ranks)) if ranks else 3
    sweep = tuple(LAYOUTS[1:]) + tuple(x for x in EXTRA_LAYOUTS
                                       if x != "expand_nondim" or spec.family == "gather_scatter")
    if quick:
        sweep = tuple(LAYOUTS[1:]) + (("expand_nondim",) if spec.family == "gather_scatter" else ())
    out: list = []
    seen: set = set()
    counter = itertools.count()

    def add(layouts=None, rank=mid, dtype=None, idx_dtype="i64", kind="rand"):
        i = next(counter)
        c = make_case(spec.name, variant, layouts or {}, rank, dtype or reps[i % len(reps)],
                      idx_dtype, kind, combos[i % len(combos)] if combos else None, opt.seed)
        if c.id not in seen:
            seen.add(c.id)
            out.append(c)

    for rank in ranks:  # layouts
        add(rank=rank)
        for operand in operands:
            for lay in sweep:
                add({operand: lay}, rank)
    for rank in ranks:  # compound
        if rank >= 1:
            add({o: "compound" for o in operands}, rank)
    for d in (sup if not quick else [d for d in sup if d in reps or d in ("bfloat16", "bool")]):
        add(rank=mid, dtype=d)
        add({o: "compound" for o in operands}, mid, d)
        add({"idx": "expand"}, mid, d)
    for lay in idx_layouts:  # int32 indices (two more ranks each at the end)
        add({"idx": lay}, mid, idx_dtype="i32")
    for kind in BAD_KINDS:
        for lay in idx_layouts:
            add({"idx": lay}, mid, kind=kind)
            if not quick and max(ranks) >= 1:
                add({"idx": lay}, max(1, spec.min_rank), kind=kind)
    for rank in [r for r in (2, 3) if r >= spec.min_rank]:  # wide (fast paths)
        for operand in operands:
            for lay in (("contiguous",) + sweep if not quick else idx_layouts):
                add({operand: lay}, rank, kind="wide")
    for rank in [r for r in ranks if 1 <= r <= 4]:  # empty
        add(rank=rank, kind="empty")
        add({o: "compound" for o in operands}, rank, kind="empty")
    # int32 at two more ranks per index layout, last: the cases above keep their place in the
    # cycles of dtypes and parameters (and so their ids) from before these were added
    i32_ranks = sorted({max(1, spec.min_rank, min(ranks)), max(ranks)} & set(ranks) - {mid})
    for lay in idx_layouts:
        for rank in i32_ranks:
            add({"idx": lay}, rank, idx_dtype="i32")
    return out


def build_matrix(specs, opt: MatrixOptions) -> list:
    cases: list = []
    for spec in specs:
        for variant in spec.variants:
            if opt.variants and variant not in opt.variants:
                continue
            cases.extend(cases_for(spec, variant, opt))
        if opt.large:
            from . import large

            cases.extend(large.cases(spec.name, opt.seed))
    return cases


def _features(c: Case) -> set:
    f = {("variant", c.variant), ("rank", c.rank), ("dtype", c.dtype), ("idx", c.idx_dtype),
         ("kind", c.kind), ("class", c.layout_class)}
    f.update(("lay", o, lay) for o, lay in c.layouts)
    f.update(("param", k, v) for k, v in c.params)
    return f


def sample(cases, limit: int, seed: int = 0) -> list:
    """At most ``limit`` cases per op (report row), chosen deterministically (from ``seed`` and
    the ids) so that every value of every dimension the op's matrix has (variant, rank, dtype,
    index dtype and kind, layout class, each operand's layout, each parameter value) is kept at
    least once when the limit allows; the rest of the budget is filled at random. The order of
    ``cases`` is kept; --large probes are always kept. For a scarce device: a sized-down audit
    that still meets every dimension of the matrix."""
    if not limit or limit <= 0:
        return list(cases)
    import hashlib

    def key(c):
        return hashlib.sha256(f"{seed}#{c.id}".encode()).digest()

    by_op: dict = {}
    for i, c in enumerate(cases):
        by_op.setdefault(c.op, []).append((i, c))
    keep = set()
    for items in by_op.values():
        items = sorted(items, key=lambda ic: key(ic[1]))
        chosen, covered = [], set()
        for i, c in items:
            if c.kind == "large":
                keep.add(i)
                continue
            f = _features(c)
            if len(chosen) < limit and not f <= covered:
                chosen.append(i)
                covered |= f
        for i, c in items:
            if len(chosen) >= limit:
                break
            if c.kind != "large" and i not in chosen:
                chosen.append(i)
        keep.update(chosen)
    return [c for i, c in enumerate(cases) if i in keep]


def single(case: Case) -> list:
    return [case]
