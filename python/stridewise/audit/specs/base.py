"""The op spec: everything the auditor knows about one operator, declaratively.

Adding an op is one ``OpSpec(...)`` entry in a family file (``gather_scatter.py``,
``index_dim.py``, ``flat_adv.py``): a ``plan`` (shapes, index ranges, scalar arguments for a
case), the calls per variant as Python expressions over the operand and scalar names (so the
same text runs in the worker, in the oracle and in repro scripts), and how to compare.
"""
from __future__ import annotations

import random
from dataclasses import dataclass, field
from typing import Callable, Optional

from ..gen import Data, Index, Plan  # noqa: F401  (re-exported for spec files)

# How results are compared (see docs/audit.md, "Oracle"):
#   exact  - data movement: bitwise equal to native CPU on contiguous copies
#   write  - non-accumulating writes with possibly duplicate targets: every written element
#            must equal one of the values written there (ATen leaves the winner unspecified)
#   accum  - accumulation: ``accum(case)`` names the reduction (sum | prod | mean | exact |
#            write, the last for ops whose ``accumulate=False`` form is a plain write);
#            floating types compare to a float64 reference with a tolerance scaled by the
#            number of accumulated terms, integer types compare bitwise
COMPARE_MODES = ("exact", "write", "accum")


@dataclass
class OpSpec:
    name: str  # the op's row in the report, e.g. "scatter.src", "index.Tensor"
    family: str
    plan: Callable[..., Plan]  # (case, rng) -> Plan
    calls: dict  # variant -> expression, e.g. {"func": "torch.ops.aten.gather.default(self, dim, idx)"}
    operands: tuple  # tensor operand names (layout targets), not counting "out"
    index_operands: tuple = ("idx",)
    compare: str = "exact"
    accum: Optional[Callable] = None  # case -> "sum" | "prod" | "mean" | "exact"
    count_call: Optional[str] = None  # expression: per-element term count when data are ones
    value_scalars: tuple = ()  # numeric scalar names (set to 1 for counts, abs() for magnitudes)
    write_check: Optional[Callable] = None  # compare="write": (ns, got, expected) -> (ok, writes)
    params: dict = field(default_factory=dict)  # name -> list of values cycled over cases
    min_rank: int = 0
    aten: tuple = ()  # aten overloads exercised (documentation, listing)
    notes: str = ""

    @property
    def variants(self) -> tuple:
        return tuple(v for v in ("func", "inplace", "out") if v in self.calls)

    def operands_for(self, variant: str) -> tuple:
        return self.operands + (("out",) if variant == "out" else ())

    def mode(self, case) -> str:
        """exact | write | sum | prod | mean for this case."""
        if self.compare != "accum":
            return self.compare
        return self.accum(case) if self.accum else "sum"


# ---------------------------------------------------------------------------------------------
# Shape helpers shared by spec files


def rand_shape(rng: random.Random, rank: int, budget: int = 1024, case=None) -> list:
    """Sizes in 1..4 (mostly 2-3; 1 appears too), product <= budget; ranks >= 7 use 1..2.
    For the ``wide`` kind the last dims are 16..48 (kernels' fast paths start there)."""
    if case is not None and case.kind == "wide" and rank:
        shape = [rng.choice([1, 2, 3, 4]) for _ in range(rank)]
        for k in range(max(0, rank - 2), rank):
            shape[k] = rng.randint(16, 48)
        return shape
    choices = [1, 2, 2, 2] if rank >= 7 else [1, 2, 2, 3, 3, 4]
    shape = []
    left = budget
    for _ in range(rank):
        s = max(1, min(rng.choice(choices), left))
        shape.append(s)
        left = max(1, left // s)
    return shape


def pick_dim(rng: random.Random, rank: int) -> int:
    return rng.randrange(rank) if rank else 0


def zero_one(rng: random.Random, shape: list) -> list:
    """``shape`` with one dim set to 0 (for the ``empty`` kind)."""
    s = list(shape)
    if s:
        s[rng.randrange(len(s))] = 0
    return s


def scalar_value(dtype_name: str):
    """A fill value representable in every dtype of its kind."""
    if dtype_name == "bool":
        return True
    if dtype_name.startswith("complex"):
        return complex(1.5, -2.0)
    if dtype_name.startswith(("float", "bfloat")):
        return 2.5
    return 7


def pbool(v) -> bool:
    return str(v) in ("1", "True", "true")


def bits(t):
    """An integer view of ``t`` where equality means bitwise equality (complex: last dim 2).
    (Also inlined into the repro scripts, so it uses nothing but torch.)"""
    import torch

    t = t.contiguous()
    if t.is_complex():
        t = torch.view_as_real(t).contiguous()
    if t.dtype == torch.bool:
        return t.view(torch.uint8)
    ints = {1: torch.uint8, 2: torch.int16, 4: torch.int32, 8: torch.int64}
    return t.view(ints[t.element_size()])


def bits_eq(a, b):
    """Elementwise bitwise equality of two tensors of the same shape and dtype."""
    ba, bb = bits(a), bits(b)
    eq = ba == bb
    if a.is_complex():
        eq = eq.all(-1)
    return eq
