"""The native library shares the process's runtimes, and raising an error through it is safe.

- one C++ runtime: after `import stridewise` the process maps exactly one libstdc++ file, and
  libstridewise_torch.so defines none of the runtime's own symbols (a static libstdc++ copied
  into it crashed the first error message that formatted an integer, on the H200 image);
- one CUDA runtime: after a stridewise CUDA call, exactly one libcudart file is mapped (torch's);
- the bad-index raise, in a child process so that a crash fails this test instead of killing
  the suite: every check mode raises a catchable error naming the value, the process lives on
  and its CUDA context still runs kernels (torch's and ours).
"""
from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import pytest

from conftest import CUDA_SKIP, DEVICES, LIB_PATH, PYDIR


def _mapped(pattern: str) -> set[str]:
    with open("/proc/self/maps") as f:
        return {line.split()[-1] for line in f if pattern in line.rsplit("/", 1)[-1]}


def _child(code: str, timeout: float = 180) -> subprocess.CompletedProcess:
    env = dict(os.environ, PYTHONPATH=str(PYDIR))
    env.pop("STRIDEWISE_CUDA_CHECK", None)
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True,
                          text=True, timeout=timeout, env=env)


def test_one_cpp_runtime_in_the_process(sw):
    import torch

    torch.ops.stridewise.gather(torch.ones(3), 0, torch.tensor([2, 0]))  # the library is loaded
    libs = _mapped("libstdc++.so")
    assert len(libs) == 1, f"more than one C++ runtime mapped: {sorted(libs)}"
    # The post-build check (cmake/CheckRuntime.cmake) again, on the library that is loaded.
    nm = subprocess.run(["nm", "-D", "--defined-only", str(LIB_PATH)], capture_output=True, text=True)
    if nm.returncode != 0:
        pytest.skip(f"nm unavailable: {nm.stderr[:200]}")
    inside = [s for s in ("_ZNSo9_M_insertIlEERSoT_", "_ZNSt6locale7classicEv") if s in nm.stdout]
    assert not inside, f"{LIB_PATH.name} defines C++ runtime symbols {inside}: a static libstdc++ was linked in"


@CUDA_SKIP
def test_one_cuda_runtime_in_the_process(sw):
    import torch

    x = torch.randn(4, 16, device="cuda")
    torch.ops.stridewise.gather(x, 1, torch.zeros(4, 2, dtype=torch.long, device="cuda"))
    torch.cuda.synchronize()
    libs = _mapped("libcudart.so")
    assert len(libs) == 1, f"more than one CUDA runtime mapped: {sorted(libs)}"


_RAISE = """
import re, torch, stridewise
mode = {mode!r}
stridewise.set_cuda_check_mode(mode)
x = torch.randn(4, 16, 384, device="{device}")
idx = torch.full((4, 1, 1), {bad}, dtype=torch.int64, device="{device}").expand(4, 1, 384)
try:
    with stridewise.use(include=["gather"]):
        torch.gather(x, 1, idx)
        if mode == "deferred" and x.is_cuda:
            stridewise.check_errors(sync=True)
except (RuntimeError, IndexError) as e:
    msg = str(e)
else:
    raise SystemExit("no error raised")
print("caught:", msg, flush=True)
assert "{bad}" in msg and "dimension 1" in msg, msg
# the process and its device still work: a torch kernel and a stridewise one
a = torch.arange(1000, device="{device}", dtype=torch.float32)
assert float((a * 2).sum().item()) == 999000.0
good = torch.full((4, 1, 1), 15, dtype=torch.int64, device="{device}").expand(4, 1, 384)
got = torch.ops.stridewise.gather(x, 1, good)
assert torch.equal(got.cpu(), x[:, 15:16, :].cpu()), "wrong result after the error"
stridewise.check_errors(sync=True)
print("alive", flush=True)
"""


@pytest.mark.parametrize("bad", [16, -17])
@pytest.mark.parametrize("mode", ["sync", "deferred"])
@pytest.mark.parametrize("device", DEVICES)
def test_bad_index_raise_leaves_the_process_alive(sw, device, mode, bad):
    r = _child(_RAISE.format(mode=mode, device=device, bad=bad))
    assert r.returncode == 0 and "alive" in r.stdout, (
        f"child exited {r.returncode} (negative: killed by signal {-r.returncode})\n"
        f"stdout: {r.stdout[-1500:]}\nstderr: {r.stderr[-3000:]}")
