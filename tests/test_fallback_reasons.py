"""stats()[op]["fallback_reasons"]: every call handed to ATen's own kernel counts under the name of
the rule that handed it over (docs/fallbacks.md), and the names add up to the "fallback" total.

Each case below triggers one rule on the CPU with fresh random data, checks that the call counts
one fallback under that rule's name and nothing else, and that the result (or the error) is
native's. Rules a CPU-only run cannot reach (device_mix, rank, unmapped_dtype, core_declined,
complex_product) are named in docs/fallbacks.md with why.
"""
from __future__ import annotations

import pytest
import torch

from stridewise.audit.specs import gather_layouts as specs

def _r(shape, g, dtype=torch.float32):
    return torch.randn(shape, generator=g).to(dtype)


def _cases(g):
    """(rule, op, fn): fn() makes the call (the same inputs each time it is called)."""
    x = _r((5, 4), g)
    cx = torch.complex(_r((5, 4), g), _r((5, 4), g))
    ints = torch.randint(-9, 9, (5, 4), generator=g, dtype=torch.int32)
    u16 = torch.randint(0, 9, (5, 4), generator=g).to(torch.uint16)
    i0 = torch.randint(0, 5, (2,), generator=g)
    five = _r((2, 2, 2, 2, 2), g)
    z = [torch.randint(0, 2, (1,), generator=g) for _ in range(5)]
    return [
        ("dtype_rejected", "scatter_add",
         lambda: u16.scatter_add(0, i0.view(2, 1).expand(2, 4), u16[:2].clone())),
        ("reduce_dtype", "index_reduce",
         lambda: cx.index_reduce(0, i0, cx[:2].clone(), "prod")),
        ("alpha_kind", "index_add", lambda: ints.index_add(0, i0, ints[:2].clone(), alpha=1.5)),
        ("empty_self", "index_select", lambda: torch.ones(0, 4).index_select(0, i0)),
        ("index_terms", "index", lambda: five[z[0], z[1], z[2], z[3], z[4]]),
        ("expanded_self", "index_put",
         lambda: x[0].clone().expand(3, 4).index_put_((i0.clamp(max=2),), x[:2].clone())),
        ("needs_copy", "put", lambda: x.clone().put_(torch.arange(6), x[:2, :3].t())),
    ]


def _run(fn):
    try:
        return None, fn()
    except Exception as e:  # noqa: BLE001 - the error is compared with native's
        return type(e), str(e).splitlines()[0]


@pytest.mark.parametrize("k", range(7))
def test_rule_counts_its_call(sw, seed, k):
    g = torch.Generator().manual_seed(seed)
    rule, op, fn = _cases(g)[k]
    with specs.native():
        n_type, n_val = _run(fn)
    before = sw.stats()
    with sw.use(include=[op]):
        o_type, o_val = _run(fn)
    after = sw.stats()
    assert o_type is n_type, (rule, o_val, n_val)
    if n_type is None:
        m = specs.bitwise_mismatch(o_val, n_val, what=rule)
        assert m is None, m
    else:
        assert o_val == n_val
    got = {r: n - before[op]["fallback_reasons"].get(r, 0)
           for r, n in after[op]["fallback_reasons"].items()}
    assert {r: n for r, n in got.items() if n} == {rule: 1}, (rule, after[op])
    assert after[op]["fallback"] - before[op]["fallback"] == 1, after[op]
    for name, s in after.items():
        assert sum(s["fallback_reasons"].values()) == s["fallback"], (name, s)

