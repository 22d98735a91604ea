"""The dtype rules on the CPU (adapter/common.h dtype_rule): for the dtypes the core has no
arithmetic for (uint16/32/64, complex32, float8), stridewise moves the bytes wherever ATen's CPU
kernel of the op moves them, and hands the call to ATen only where ATen raises (its error,
`dtype_rejected`) or computes in that dtype (`dtype_arith`).

For each op and dtype: native's outcome and ours are the same (bitwise, on random bytes, or the
same exception type and first line), and the call counts under the rule this table promises
(None: the core ran it). A torch whose coverage differs fails here first (measured on 2.13).
"""
from __future__ import annotations

import pytest
import torch

from stridewise.audit.specs import gather_layouts as specs

NO_ARITH = [torch.uint16, torch.uint32, torch.uint64, torch.complex32, torch.float8_e4m3fn,
            torch.float8_e5m2, torch.float8_e4m3fnuz, torch.float8_e5m2fnuz, torch.float8_e8m0fnu]
F8 = {torch.float8_e4m3fn, torch.float8_e5m2, torch.float8_e4m3fnuz, torch.float8_e5m2fnuz}


def _bytes(shape, dtype, g):
    n = 1
    for s in shape:
        n *= s
    return torch.randint(0, 256, (n * dtype.itemsize,), generator=g, dtype=torch.uint8).view(
        dtype).view(shape)


def _ops(g, dtype):
    x = _bytes((5, 4), dtype, g)
    i = torch.randperm(5, generator=g)[:3]
    v = _bytes((3, 4), dtype, g)
    m = torch.rand(5, 4, generator=g) > 0.5
    return {
        # name: (routing name, call, expected rule: None = the core runs it)
        "index_select": ("index_select", lambda: x.index_select(0, i), None),
        "embedding": ("embedding", lambda: torch.nn.functional.embedding(i, x), None),
        "index": ("index", lambda: x[i], None),
        "index_copy": ("index_copy", lambda: x.index_copy(0, i, v),
                       None if dtype == torch.complex32 else "dtype_rejected"),
        "index_put": ("index_put", lambda: x.clone().index_put_((i,), v),
                      None if dtype == torch.complex32 or dtype in F8 else "dtype_rejected"),
        "index_put_acc": ("index_put", lambda: x.clone().index_put_((i,), v, accumulate=True),
                          "dtype_arith" if dtype == torch.complex32 or dtype in F8
                          else "dtype_rejected"),
        "masked_put": ("index_put", lambda: x.clone().index_put_((m,), x[0, 0].clone()),
                       None if dtype == torch.complex32 else "dtype_rejected"),
        "index_add": ("index_add", lambda: x.index_add(0, i, v),
                      "dtype_arith" if dtype == torch.complex32 else "dtype_rejected"),
        "take": ("take", lambda: x.take(i), "dtype_rejected"),
        "put": ("put", lambda: x.clone().put_(i, x[0, :3].clone()), "dtype_rejected"),
    }


def _run(fn):
    try:
        return None, fn()
    except Exception as e:  # noqa: BLE001 - compared with native's
        return type(e), str(e).splitlines()[0]


NAMES = list(_ops(torch.Generator(), torch.uint16))


@pytest.mark.parametrize("name", NAMES)
@pytest.mark.parametrize("dtype", NO_ARITH, ids=specs.dtype_name)
def test_no_arith_dtypes_follow_atens_cpu_kernels(sw, seed, dtype, name):
    g = torch.Generator().manual_seed(seed)
    key, fn, rule = _ops(g, dtype)[name]
    with specs.native():
        n_type, n_val = _run(fn)
    st0 = sw.stats()[key]
    with sw.use(include=[key]):
        o_type, o_val = _run(fn)
    st1 = sw.stats()[key]
    assert o_type is n_type, (o_val, n_val)
    if n_type is None:
        m = specs.bitwise_mismatch(o_val, n_val, what=f"seed {seed}")
        assert m is None, m
    else:
        assert o_val == n_val
    fired = {r: c - st0["fallback_reasons"].get(r, 0) for r, c in st1["fallback_reasons"].items()}
    fired = {r: c for r, c in fired.items() if c}
    assert fired == ({} if rule is None else {rule: 1}), (fired, n_type, n_val)
    if rule == "dtype_rejected":
        assert n_type is NotImplementedError, "dtype_rejected promises ATen raises"
    elif rule is None or rule == "dtype_arith":
        assert n_type is None, "ATen moves or computes it"
