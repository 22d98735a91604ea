"""stridewise.testing.sanitizer on the CPU: the STRIDEWISE_SANITIZER contract, the class of ATen
CUDA calls memcheck flags (cas_overrun, call_reason), and the switch inside specs.native() that
runs such calls on the CPU under memcheck. The device check of the switch (sanitizer.on_cuda) is
monkeypatched so that CPU tensors drive it; on the H200 the same code runs with real CUDA
tensors (tests/test_scatter_contract.py::test_dtypes_and_duplicates under memcheck).

Seeds: conftest's seed fixture.
"""
from __future__ import annotations

import warnings

import pytest
import torch

from stridewise.testing import sanitizer
from stridewise.audit.specs import gather_layouts as specs

A = torch.ops.aten


def _no_injection(monkeypatch):
    for k in sanitizer.INJECTION_VARS:
        monkeypatch.delenv(k, raising=False)


def test_the_env_var_contract(monkeypatch):
    _no_injection(monkeypatch)
    monkeypatch.delenv(sanitizer.ENV, raising=False)
    assert sanitizer.sanitizer() is None and not sanitizer.memcheck_active()
    assert specs.sanitizer is sanitizer.sanitizer
    for v, want, active in (("memcheck", "memcheck", True), ("RaceCheck", "racecheck", False),
                            (" initcheck ", "initcheck", False), ("none", None, False), ("0", None, False),
                            ("", None, False)):
        monkeypatch.setenv(sanitizer.ENV, v)
        assert (sanitizer.sanitizer(), sanitizer.memcheck_active()) == (want, active), v
    monkeypatch.setenv(sanitizer.ENV, "memchek")  # a typo in the device script is loud
    with pytest.raises(ValueError, match=r"STRIDEWISE_SANITIZER='memchek': expected one of memcheck, "
                                         r"racecheck, initcheck, synccheck"):
        sanitizer.sanitizer()
    # fallback, when the variable is unset: what compute-sanitizer put in a target process's
    # environment on the H200 (2026-12-02), each variable alone
    monkeypatch.delenv(sanitizer.ENV)
    for k, v in (("NV_SANITIZER_INJECTION_PORT_BASE", "49152"),
                 ("NVTX_INJECTION64_PATH", "libsanitizer-collection.so"),
                 ("CUDA_INJECTION64_PATH", "/opt/cuda/compute-sanitizer/libsanitizer-collection.so")):
        _no_injection(monkeypatch)
        monkeypatch.setenv(k, v)
        assert sanitizer.sanitizer() == "unknown" and sanitizer.memcheck_active(), k
    _no_injection(monkeypatch)
    monkeypatch.setenv("CUDA_INJECTION64_PATH", "/opt/nsight/libToolsInjection64.so")  # a profiler
    assert sanitizer.sanitizer() is None


# (op, reduce, dtype, allocation bytes) -> flagged?
CLASS_TABLE = [
    # the H200's case: bool add into a 210-byte allocation, and its neighbours
    ("scatter_add", None, torch.bool, 210, True),
    ("scatter.reduce", "add", torch.bool, 210, True),
    ("scatter_reduce", "sum", torch.bool, 209, True),
    ("scatter_add", None, torch.bool, 212, False),       # a multiple of 4: nothing past the end
    ("scatter_add", None, torch.uint8, 211, True),
    ("scatter_reduce", "amax", torch.int8, 1, True),
    ("scatter_reduce", "amin", torch.int16, 422, True),
    ("scatter_reduce", "prod", torch.int16, 420, False),
    ("scatter.value_reduce", "multiply", torch.uint8, 7, True),
    ("scatter_reduce", "mean", torch.int8, 6, True),
    ("scatter_reduce", "prod", torch.float16, 422, True),  # AtomicFPOp
    ("scatter_reduce", "amax", torch.bfloat16, 6, True),
    ("scatter_add", None, torch.float16, 422, True),      # the __half2 pair
    ("scatter_reduce", "amax", torch.float16, 420, False),
    ("scatter_reduce", "prod", torch.bool, 5, False),     # ATen has no such kernel (raises)
    ("scatter.reduce", "multiply", torch.bool, 5, False),
    ("scatter_add", None, torch.int32, 4 * 7, False),     # native 4-byte atomics
    ("scatter_reduce", "amax", torch.float32, 12, False),
    ("scatter_add", None, torch.complex64, 8, False),
    ("scatter_add", None, torch.float64, 8, False),
    ("scatter.src", None, torch.bool, 5, False),          # copies: plain stores
    ("gather", None, torch.uint8, 5, False),
    ("index_add", None, torch.int8, 5, True),
    ("index_reduce", "amax", torch.uint8, 3, True),
    ("put", None, torch.int16, 6, True),
]


@pytest.mark.parametrize("op,reduce,dtype,nbytes,flagged", CLASS_TABLE,
                         ids=[f"{o}-{r}-{str(d)[6:]}-{n}" for o, r, d, n, _ in CLASS_TABLE])
def test_the_flagged_class(op, reduce, dtype, nbytes, flagged):
    why = sanitizer.cas_overrun(op, reduce, dtype, [nbytes])
    assert (why is not None) == flagged, why
    if flagged:
        assert sanitizer.ISSUE in why and f"{nbytes} bytes" in why and "NVIDIA/cccl#6430" in why, why


@pytest.fixture
def cuda_lookalike(monkeypatch):
    """CPU tensors count as CUDA for the switch; memcheck on."""
    monkeypatch.setattr(sanitizer, "on_cuda", lambda t: isinstance(t, torch.Tensor))
    monkeypatch.setenv(sanitizer.ENV, "memcheck")


def _calls(g, n, dtype):
    """Aten overload calls on a self of ``n`` elements (n bytes in uint8/bool) along dim 0 with
    duplicate targets, fresh random data; the flag each must get."""
    self_ = specs.random_values([n], dtype, g)
    idx = torch.randint(0, n, (3 * n,), generator=g)
    idx[-1] = n - 1  # an atomic into the last element, in the partial word
    src = specs.random_values([3 * n], dtype, g)
    out = specs.poison([n], dtype)
    flagged = n * dtype.itemsize % 4 != 0
    return [
        ("scatter_add", lambda s: A.scatter_add.default(s, 0, idx, src), flagged),
        ("scatter_add_", lambda s: A.scatter_add_.default(s, 0, idx, src), flagged),
        ("scatter_add.out", lambda s: A.scatter_add.out(s, 0, idx, src, out=out.clone()), flagged),
        ("scatter_reduce.two amax", lambda s: A.scatter_reduce.two(s, 0, idx, src, "amax"),
         flagged and dtype != torch.bool),
        ("scatter_.value_reduce add", lambda s: A.scatter_.value_reduce(s, 0, idx, 1, reduce="add"), flagged),
        ("scatter.src (a copy)", lambda s: A.scatter.src(s, 0, idx[:n], src[:n]), False),
        ("gather (a copy)", lambda s: A.gather.default(s, 0, idx), False),
    ]


@pytest.mark.parametrize("dtype", [torch.uint8, torch.bool], ids=["uint8", "bool"])
@pytest.mark.parametrize("n", [210, 212])
def test_the_switch_runs_flagged_native_calls_on_the_cpu(cuda_lookalike, n, dtype, seed):
    """Under memcheck, inside specs.native(), each flagged call takes the CPU route (recorded in
    REROUTED, a SanitizerReroute warning naming the issue) and gives native's result; the
    others run untouched."""
    g = torch.Generator().manual_seed(seed)
    for what, call, flagged in _calls(g, n, dtype):
        self_ = specs.random_values([n], dtype, g)
        want = call(self_.clone())  # outside specs.native(): no switch
        before = len(sanitizer.REROUTED)
        with warnings.catch_warnings(record=True) as seen, specs.native():
            warnings.simplefilter("always")
            got = call(self_.clone())
        took = len(sanitizer.REROUTED) - before
        assert took == int(flagged), (what, n, dtype, sanitizer.REROUTED[before:])
        notes = [str(w.message) for w in seen if issubclass(w.category, sanitizer.SanitizerReroute)]
        assert len(notes) == int(flagged), (what, notes)
        if flagged:
            assert sanitizer.ISSUE in notes[0] and f"{n * dtype.itemsize} bytes" in notes[0], notes[0]
        assert specs.bitwise_mismatch(got, want, what=what) is None


def test_the_switch_is_off_without_memcheck(monkeypatch, seed):
    monkeypatch.setattr(sanitizer, "on_cuda", lambda t: isinstance(t, torch.Tensor))
    g = torch.Generator().manual_seed(seed)
    for tool in (None, "racecheck"):
        if tool is None:
            monkeypatch.delenv(sanitizer.ENV, raising=False)
            _no_injection(monkeypatch)
        else:
            monkeypatch.setenv(sanitizer.ENV, tool)
        before = len(sanitizer.REROUTED)
        with specs.native():
            for _, call, _ in _calls(g, 210, torch.uint8):
                call(specs.random_values([210], torch.uint8, g))
        assert len(sanitizer.REROUTED) == before, (tool, sanitizer.REROUTED[before:])


def test_real_cpu_tensors_are_never_rerouted(monkeypatch, seed):
    """Without the monkeypatched device check, CPU calls stay on the CPU path untouched."""
    monkeypatch.setenv(sanitizer.ENV, "memcheck")
    g = torch.Generator().manual_seed(seed)
    before = len(sanitizer.REROUTED)
    with specs.native():
        for _, call, _ in _calls(g, 210, torch.bool):
            call(specs.random_values([210], torch.bool, g))
    assert len(sanitizer.REROUTED) == before


def test_mean_counts_the_count_tensor(cuda_lookalike, seed):
    """scatter_reduce(mean) adds into a count tensor of the result's size as well: an out= of a
    multiple of 4 bytes does not clear a self whose numel * itemsize is not one."""
    g = torch.Generator().manual_seed(seed)
    self_ = specs.random_values([5, 7], torch.int16, g)  # 70 bytes
    idx = torch.randint(0, 5, (9, 7), generator=g)
    src = specs.random_values([9, 7], torch.int16, g)
    out = torch.empty_strided((5, 7), (8, 1), dtype=torch.int16)  # storage 39 * 2 = 78 bytes
    big = torch.empty(80, dtype=torch.int16)[:35].view(5, 7)       # storage 160 bytes
    for reduce, dest, flagged in (("mean", big, True), ("amax", big, False), ("amax", out, True)):
        why = sanitizer.call_reason(A.scatter_reduce.two_out, (self_, 0, idx, src, reduce), {"out": dest})
        assert (why is not None) == flagged, (reduce, dest.untyped_storage().nbytes(), why)


def test_the_repro_script_says_it_needs_a_gpu_and_exits_0():
    """docs/known_issues/aten_cuda_narrow_atomic_cas.py: every case is listed; without a GPU each
    prints the torch version, the sanitizer environment and the command, and exits 0 (on the
    H200 the same script shows ATen's error under memcheck)."""
    import subprocess
    import sys

    from conftest import ROOT

    script = ROOT / "docs" / "known_issues" / "aten_cuda_narrow_atomic_cas.py"
    r = subprocess.run([sys.executable, str(script), "--list"], capture_output=True, text=True, timeout=120)
    names = r.stdout.split()
    assert r.returncode == 0 and names[0] == "bool_add" and "control_bool_212" in names, r
    if torch.cuda.is_available():
        pytest.skip("a GPU is present: the script would run ATen's kernel (run it under memcheck)")
    for name in ("bool_add", "float16_add_pair"):
        r = subprocess.run([sys.executable, str(script), "--case", name], capture_output=True, text=True,
                           timeout=120, env=dict(__import__("os").environ, STRIDEWISE_SANITIZER="memcheck"))
        assert r.returncode == 0, r
        assert r.stdout.startswith(f"torch {torch.__version__}"), r.stdout
        assert "sanitizer/injection environment: {'STRIDEWISE_SANITIZER': 'memcheck'}" in r.stdout, r.stdout
        assert "this repro needs a CUDA GPU" in r.stdout and f"--case {name}" in r.stdout, r.stdout
