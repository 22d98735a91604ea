"""Case identities: one case is fully described by its id string, so any case can be replayed.

Canonical form (tokens joined by ``/``)::

    OP/VARIANT/LAYOUTS/rRANK/DTYPE/IDXDTYPE/KIND[/PARAMS]/sSEED
    gather/func/idx=expand/r3/float16/i64/rand/s0
    scatter_reduce/out/self=offset,out=compound/r2/float32/i64/dup/reduce=mean,include_self=0/s0

Parsing is lenient: after the op, tokens may come in any order and any may be left out
(defaults: func, all operands contiguous, rank 2, float32, i64, rand, seed 0), and ``idx=``
may be spelt ``index=``. So ``gather/idx=expand/r3/float16/s123`` is a valid id.

The data of a case is drawn from generators seeded by the canonical id itself, so two runs of
the same id (any machine, any process) build bit-identical inputs.
"""
from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass, field, replace
from functools import cached_property

from .layout_names import ALL_LAYOUTS, known_layout

VARIANTS = ("func", "inplace", "out")
KINDS = ("rand", "wide", "dup", "neg", "oob", "oobneg", "oobbig", "empty", "large")
IDX_DTYPES = {"i64": "int64", "i32": "int32", "ibool": "bool"}
ALIASES = {"index": "idx", "indices": "idx", "source": "src", "input": "self", "values": "src",
           "weight": "self"}
DTYPE_NAMES = (
    "float32", "float64", "float16", "bfloat16", "complex64", "complex128",
    "int8", "int16", "int32", "int64", "uint8", "bool", "uint16", "uint32", "uint64",
)


@dataclass(frozen=True)
class Case:
    op: str
    variant: str = "func"
    layouts: tuple = ()  # sorted ((operand, layout), ...) for operands that are not contiguous
    rank: int = 2
    dtype: str = "float32"
    idx_dtype: str = "i64"
    kind: str = "rand"
    params: tuple = ()  # sorted ((key, value_str), ...)
    seed: int = 0
    extra: dict = field(default_factory=dict, compare=False, hash=False)  # not part of the id

    @cached_property  # the fields are frozen; asked for ~20 times per case (runner, seeds)
    def id(self) -> str:
        lay = ",".join(f"{k}={v}" for k, v in self.layouts) or "contig"
        toks = [self.op, self.variant, lay, f"r{self.rank}", self.dtype, self.idx_dtype, self.kind]
        if self.params:
            toks.append(",".join(f"{k}={v}" for k, v in self.params))
        toks.append(f"s{self.seed}")
        return "/".join(toks)

    def layout_of(self, operand: str) -> str:
        return dict(self.layouts).get(operand, "contiguous")

    def param(self, key: str, default=None):
        return dict(self.params).get(key, default)

    @property
    def layout_class(self) -> str:
        """The report's column: the layout applied (``mixed`` when operands differ)."""
        kinds = {v for _, v in self.layouts}
        if not kinds:
            return "contiguous"
        return kinds.pop() if len(kinds) == 1 else "mixed"

    def with_seed(self, seed: int) -> "Case":
        return replace(self, seed=seed)

    def int_seed(self, salt: str = "") -> int:
        h = hashlib.sha256((self.id + "#" + salt).encode()).digest()
        return int.from_bytes(h[:8], "little") & ((1 << 63) - 1)


class CaseIdError(ValueError):
    pass


def make_case(op, variant="func", layouts=None, rank=2, dtype="float32", idx_dtype="i64",
              kind="rand", params=None, seed=0) -> Case:
    lay = tuple(sorted((k, v) for k, v in (layouts or {}).items() if v != "contiguous"))
    par = tuple(sorted((k, _pstr(v)) for k, v in (params or {}).items()))
    return Case(op, variant, lay, int(rank), dtype, idx_dtype, kind, par, int(seed))


def _pstr(v) -> str:
    if isinstance(v, bool):
        return "1" if v else "0"
    return str(v)


def parse_case_id(text: str, operands=None, param_keys=None) -> Case:
    """Parse a (possibly abbreviated) case id. ``operands``/``param_keys`` route ``k=v`` pairs;
    when not given, names of known layouts decide (a value that is a layout name is a layout)."""
    toks = [t for t in text.strip().strip("/").split("/") if t]
    if not toks:
        raise CaseIdError("empty case id")
    op, rest = toks[0], toks[1:]
    kw: dict = {"op": op}
    layouts: dict = {}
    params: dict = {}
    for t in rest:
        if t in VARIANTS:
            kw["variant"] = t
        elif re.fullmatch(r"r\d+", t):
            kw["rank"] = int(t[1:])
        elif re.fullmatch(r"s\d+", t):
            kw["seed"] = int(t[1:])
        elif t in DTYPE_NAMES:
            kw["dtype"] = t
        elif t in IDX_DTYPES:
            kw["idx_dtype"] = t
        elif t in KINDS:
            kw["kind"] = t
        elif t == "contig":
            pass
        elif "=" in t:
            for pair in t.split(","):
                if "=" not in pair:
                    raise CaseIdError(f"bad token {pair!r} in case id {text!r}")
                k, v = pair.split("=", 1)
                k = ALIASES.get(k, k)
                is_layout = (k in operands) if operands is not None else known_layout(v)
                if param_keys is not None and k in param_keys:
                    is_layout = False
                if is_layout:
                    if not known_layout(v):
                        raise CaseIdError(f"unknown layout {v!r} for {k} (known: {', '.join(ALL_LAYOUTS)})")
                    layouts[k] = v
                else:
                    params[k] = v
        else:
            raise CaseIdError(
                f"cannot read token {t!r} of case id {text!r}: expected a variant {VARIANTS}, "
                f"rN, a dtype, an index dtype {tuple(IDX_DTYPES)}, a kind {KINDS}, sN or k=v pairs")
    return make_case(layouts=layouts, params=params, **kw)
