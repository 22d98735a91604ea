"""The complex product of the scatter family on the CPU, bitwise equal to ATen's.

ATen's CPU kernels multiply complex values as `*self_data *= *src_data`; torch 2.13's x86 wheels
compile the complex128 product into fused multiply-adds in their AVX2 and AVX512 kernels and
keep it plain for complex64 and in the DEFAULT kernels (docs/scatter.md, "Complex product").
The adapter asks ATen's kernel which formula it runs; the core computes that one. Checked here:
scatter_reduce prod (include_self both ways) and scatter(reduce="multiply") with a src and with a
value, functional / in place / out= (out poisoned), over an index per element (the line walk)
and an index shared by every line (the segment path), with transposed operands; and in child
processes under each ATEN_CPU_CAPABILITY this CPU has. Fresh random values every run
(STRIDEWISE_SEED reproduces one), full mantissas: the two formulas disagree on about a third of
the products, so a wrong formula fails at once (seen: the plain formula for complex128 failed
every case; test_scatter_gather_ops.py's test_scatter_reduce_prod_cpu_complex128 had 184 of
1870 elements 1 ulp off).
"""
from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import pytest
import torch

from conftest import PYDIR
from stridewise.audit.specs import gather_layouts as specs

DTYPES = [torch.complex64, torch.complex128]


def _values(shape, dtype, g):
    real = torch.float64 if dtype == torch.complex128 else torch.float32
    return torch.complex(torch.randn(shape, generator=g, dtype=real),
                         torch.randn(shape, generator=g, dtype=real)).mul(2).to(dtype)


def _case(dtype, shared, g):
    """self (9, 40) seen transposed from (40, 9), dim 0; index (30, 40) with ~3 writers per
    target (shared: one column expanded over all 40 lines); src (30, 44)[:, 2:42]."""
    self_t = _values([40, 9], dtype, g).t()
    if shared:
        idx = torch.randint(0, 9, (30, 1), generator=g).expand(30, 40)
    else:
        idx = torch.randint(0, 9, (30, 40), generator=g)
    src = _values([30, 44], dtype, g)[:, 2:42]
    return self_t, idx, src


def _same(got, want, what):
    m = specs.bitwise_mismatch(got, want, what=what)
    assert m is None, m


@pytest.mark.parametrize("shared", [False, True], ids=["per-element", "shared-index"])
@pytest.mark.parametrize("include_self", [True, False])
@pytest.mark.parametrize("dtype", DTYPES, ids=specs.dtype_name)
def test_scatter_reduce_prod_bitwise(sw, seed, dtype, include_self, shared):
    g = torch.Generator().manual_seed(seed)
    self_t, idx, src = _case(dtype, shared, g)
    with specs.native():
        want = self_t.scatter_reduce(0, idx, src, "prod", include_self=include_self)
    fb0 = sw.stats()["scatter_reduce"]["fallback"]
    with sw.use(include=["scatter_reduce"]):
        got = self_t.scatter_reduce(0, idx, src, "prod", include_self=include_self)
        inplace = self_t.clone().scatter_reduce_(0, idx, src, "prod", include_self=include_self)
        out = specs.poison([9, 40], dtype).t()
        torch.scatter_reduce(self_t, 0, idx, src, "prod", include_self=include_self, out=out)
    assert sw.stats()["scatter_reduce"]["fallback"] == fb0, sw.stats()["scatter_reduce"]
    for what, t in (("functional", got), ("in place", inplace), ("out=", out)):
        _same(t, want, f"seed {seed} {what}")


@pytest.mark.parametrize("value", [False, True], ids=["src", "value"])
@pytest.mark.parametrize("dtype", DTYPES, ids=specs.dtype_name)
def test_scatter_multiply_bitwise(sw, seed, dtype, value):
    g = torch.Generator().manual_seed(seed)
    self_t, idx, src = _case(dtype, False, g)
    arg = complex(*torch.randn(2, generator=g, dtype=torch.float64).tolist()) if value else src
    with specs.native():
        want = self_t.scatter(0, idx, arg, reduce="multiply")
    fb0 = sw.stats()["scatter"]["fallback"]
    with sw.use(include=["scatter"]):
        got = self_t.scatter(0, idx, arg, reduce="multiply")
    assert sw.stats()["scatter"]["fallback"] == fb0, sw.stats()["scatter"]
    _same(got, want, f"seed {seed} scatter(reduce='multiply', {'value' if value else 'src'})")


CHILD = """
import torch, stridewise as sw
g = torch.Generator().manual_seed({seed})
bad = []
for dt in (torch.complex64, torch.complex128):
    real = torch.float64 if dt == torch.complex128 else torch.float32
    s = torch.complex(torch.randn(500, generator=g, dtype=real), torch.randn(500, generator=g, dtype=real)).to(dt)
    base = torch.complex(torch.randn(60, generator=g, dtype=real), torch.randn(60, generator=g, dtype=real)).to(dt)
    idx = torch.randint(0, 60, (500,), generator=g)
    want = base.scatter_reduce(0, idx, s, "prod")
    with sw.use(include=["scatter_reduce"]):
        got = base.scatter_reduce(0, idx, s, "prod")
    n = int((torch.view_as_real(got) != torch.view_as_real(want)).any(-1).sum())
    if n or sw.stats()["scatter_reduce"]["fallback"]:
        bad.append((str(dt), n, sw.stats()["scatter_reduce"]))
print(torch.backends.cpu.get_cpu_capability(), bad)
"""


def _capabilities():
    have = ["default"]
    flags = open("/proc/cpuinfo").read() if os.path.exists("/proc/cpuinfo") else ""
    if " avx2" in flags and " fma" in flags:
        have.append("avx2")
    if " avx512f" in flags and " avx512bw" in flags and " avx512vl" in flags and " avx512dq" in flags:
        have.append("avx512")
    return have


@pytest.mark.parametrize("cap", _capabilities())
def test_every_cpu_capability(seed, cap):
    """ATen's formula changes with its kernels' capability; the answer the adapter gets from
    ATen must follow it."""
    env = dict(os.environ, PYTHONPATH=str(PYDIR), ATEN_CPU_CAPABILITY=cap)
    r = subprocess.run([sys.executable, "-c", textwrap.dedent(CHILD.format(seed=seed))],
                       capture_output=True, text=True, env=env, timeout=300)
    assert r.returncode == 0, r.stderr[-2000:]
    got_cap, bad = r.stdout.split(" ", 1)
    assert got_cap.lower() == cap and bad.strip() == "[]", f"seed {seed}: {r.stdout}"
