"""The device run's own tools, on CPU: scripts/sanitizer_summary.py (whose kernel a
compute-sanitizer error is in), scripts/check_python_deps.py (a phase stops at its start when a
declared package is missing) and bench/drift.py (did our timings move by more than ATen's and
the copy's between two runs). Each is fed text or files made here, including the fault it
exists to catch."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SUMMARY = ROOT / "scripts" / "sanitizer_summary.py"
DEPS = ROOT / "scripts" / "check_python_deps.py"
DRIFT = ROOT / "bench" / "drift.py"

ATEN_NARROW = """========= COMPUTE-SANITIZER
========= Invalid __global__ read of size 4 bytes
=========     at void at::native::_scatter_gather_elementwise_kernel<(int)128, (int)8, void at::native::_cuda_scatter_gather_internal_kernel<(bool)1, bool>::operator ()<at::native::ReduceAdd>(at::TensorIterator &, long, long, long, const T1 &)::[lambda(int) (instance 1)]>(int, T3)+0x1b0
=========     by thread (5,0,0) in block (0,0,0)
=========     Address 0x7f00000000d2 is out of bounds
=========     and is 2 bytes after the nearest allocation at 0x7f0000000000 of size 210 bytes
=========     Saved host backtrace up to driver entry point at kernel launch time
=========         Host Frame: [0x2a7f] in libcuda.so
========= Program hit cudaErrorLaunchFailure (error 719) due to "unspecified launch failure" on CUDA API call to cudaStreamSynchronize.
=========     Saved host backtrace up to driver entry point at error
========= ERROR SUMMARY: 2 errors
"""
OURS = """========= COMPUTE-SANITIZER
========= Invalid __global__ write of size 8 bytes
=========     at void stridewise::cuda_scatter::(anonymous namespace)::scatter_copy_kernel<unsigned long long, unsigned int, (int)4>(stridewise::cuda_scatter::CopyArgs<unsigned int, (int)4>)+0x90
=========     by thread (1,0,0) in block (0,0,0)
========= ERROR SUMMARY: 1 error
"""
RACE_OURS = """========= COMPUTE-SANITIZER
========= Error: Race reported between Write access at 0x150 in /tmp/swrun/core/src/scatter/scatter_cuda_tile.h:120:void stridewise::cuda_scatter::scatter_tile_kernel<float>(T1)
=========     and Read access at 0x170 in /tmp/swrun/core/src/scatter/scatter_cuda_tile.h:130:void stridewise::cuda_scatter::scatter_tile_kernel<float>(T1) [4 hazards]
========= RACECHECK SUMMARY: 1 hazard displayed (1 error, 0 warnings)
"""
# An API error whose host frames pass through stridewise: not an error in our kernels.
API_OOM = """========= COMPUTE-SANITIZER
========= Program hit cudaErrorMemoryAllocation (error 2) due to "out of memory" on CUDA API call to cudaMalloc.
=========     Saved host backtrace up to driver entry point at error
=========         Host Frame: c10::cuda::c10_cuda_check_implementation(int, char const*, char const*, unsigned int, bool) [0x45f2c] in libc10_cuda.so
=========         Host Frame: stridewise::scatter_cuda(stridewise::ScatterArgs const&) [0x1234] in libstridewise_torch.so
========= ERROR SUMMARY: 1 error
"""
CLEAN = """========= COMPUTE-SANITIZER
========= ERROR SUMMARY: 0 errors
"""


def _run(*args):
    r = subprocess.run([sys.executable, *map(str, args)], capture_output=True, text=True)
    return r.returncode, r.stdout + r.stderr


def _logs(tmp_path, *texts):
    paths = []
    for i, t in enumerate(texts):
        p = tmp_path / f"san_{i}.log"
        p.write_text(t)
        paths.append(p)
    return paths


def test_sanitizer_summary_blames_only_our_kernels(tmp_path):
    rc, out = _run(SUMMARY, *_logs(tmp_path, ATEN_NARROW, CLEAN))
    assert rc == 0, out
    assert "2 (0 in stridewise kernels)" in out and "aten-cuda-narrow-atomic-cas" in out, out
    assert "_scatter_gather_elementwise_kernel" in out, out
    rc, out = _run(SUMMARY, *_logs(tmp_path, ATEN_NARROW, OURS))
    assert rc == 1 and "(1 in stridewise kernels)" in out and "scatter_copy_kernel" in out, out
    rc, out = _run(SUMMARY, *_logs(tmp_path, API_OOM))
    assert rc == 0 and "(0 in stridewise kernels)" in out and "CUDA API error" in out, out
    rc, out = _run(SUMMARY, *_logs(tmp_path, RACE_OURS))
    assert rc == 1 and "(1 in stridewise kernels)" in out and "scatter_tile_kernel" in out, out


def test_sanitizer_summary_refuses_logs_without_a_verdict(tmp_path):
    """A tool that never finished (killed, or never started) is not a clean run."""
    rc, out = _run(SUMMARY, *_logs(tmp_path, "========= COMPUTE-SANITIZER\nsome output\n"))
    assert rc == 1 and "did not finish" in out, out


def test_check_python_deps_names_what_is_missing(tmp_path):
    rc, out = _run(DEPS, "--phase", "pytest")
    assert rc == 0, out  # this interpreter has what the package declares
    fake = tmp_path / "pyproject.toml"
    fake.write_text('[project]\nname = "x"\ndependencies = ["numpy>=1", '
                    '"no-such-package-sw>=1.0"]\n[project.optional-dependencies]\n'
                    'test = ["pytest>=999"]\n')
    rc, out = _run(DEPS, "--phase", "pytest", "--pyproject", fake)
    assert rc == 3, out
    assert "phase pytest cannot start" in out and "no-such-package-sw>=1.0 (not installed)" in out
    assert "pytest>=999 (installed:" in out and "numpy" not in out.split("declares:")[1], out


def _bench(path, rows, spread=0.01):
    """rows: (case, dtype, ours us, ATen us); repetitions spread by +-spread around each."""
    reps = lambda t: [t * (1 - spread), t, t, t * (1 + spread)]  # noqa: E731
    path.write_text(json.dumps({"header": "", "rows": [
        {"case": c, "dtype": d, "ours_us": o, "aten_us": a, "copy_us": 10.0, "host_us": 99.0,
         "raw_us": {"ours": reps(o), "aten": reps(a)}} for c, d, o, a in rows]}))
    return path


def test_drift_judges_ours_against_aten_in_the_same_run(tmp_path):
    before = _bench(tmp_path / "s.json", [("a", "float32", 100.0, 200.0), ("b", "float16", 50.0, 80.0)])
    # the machine got 10% slower: ATen and ours alike -> nothing moved
    slower = _bench(tmp_path / "e1.json", [("a", "float32", 110.0, 220.0), ("b", "float16", 50.5, 80.0)])
    rc, out = _run(DRIFT, before, slower)
    assert rc == 0 and "verdict: 0 of 2" in out, out
    # ours 25% slower where ATen moved 10%: beyond the 2% noise of the run
    ours_slow = _bench(tmp_path / "e2.json", [("a", "float32", 125.0, 220.0), ("b", "float16", 50.0, 80.0)])
    rc, out = _run(DRIFT, before, ours_slow)
    assert rc == 1 and "a/float32/ours +13.6%" in out, out
    # ... unless the run's own repetitions spread that much
    noisy = _bench(tmp_path / "e3.json", [("a", "float32", 125.0, 220.0), ("b", "float16", 50.0, 80.0)],
                   spread=0.2)
    rc, out = _run(DRIFT, before, noisy)
    assert rc == 0, out


def test_drift_reads_the_committed_table(tmp_path):
    md = tmp_path / "bench.md"
    md.write_text("# page\n\n| case | dtype | shapes | ours us | ATen us | ATen/ours |\n"
                  "|---|---|---|---:|---:|---:|\n| a | float32 | x | 100.0 | 200.0 | 2.00 |\n\n"
                  "| case | dtype | other |\n|---|---|---|\n| a | float32 | 1 |\n")
    end = _bench(tmp_path / "e.json", [("a", "float32", 130.0, 200.0)])
    rc, out = _run(DRIFT, md, end)
    assert rc == 1 and "a/float32/ours +30.0%" in out, out
