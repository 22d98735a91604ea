"""The op registry: every spec of every family, by name (the report's row names)."""
from __future__ import annotations

from . import flat_adv, gather_scatter, index_dim
from .base import OpSpec

SPECS: dict = {}
for _mod in (gather_scatter, index_dim, flat_adv):
    for _s in _mod.SPECS:
        SPECS[_s.name] = _s

# names accepted by --ops besides the spec names: an ATen base name selects all its overloads
ALIASES = {
    "scatter": ["scatter.src", "scatter.value", "scatter.reduce", "scatter.value_reduce"],
    "index_fill": ["index_fill", "index_fill.Tensor"],
    "index": ["index.Tensor"],
    "index_put_": ["index_put"],
    "put_": ["put"],
}


def resolve(names) -> list:
    """Spec names for a list of --ops entries (spec names, aliases or 'all')."""
    out: list = []
    for n in names:
        n = n.strip()
        if not n:
            continue
        if n == "all":
            out.extend(SPECS)
        elif n in ALIASES:
            out.extend(ALIASES[n])
        elif n in SPECS:
            out.append(n)
        else:
            raise KeyError(f"unknown op {n!r}; known: {', '.join(SPECS)} (or: {', '.join(ALIASES)}, all)")
    seen = set()
    return [n for n in out if not (n in seen or seen.add(n))]


__all__ = ["SPECS", "ALIASES", "OpSpec", "resolve"]
