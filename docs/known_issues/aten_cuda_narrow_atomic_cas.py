"""ATen CUDA: 1- and 2-byte atomics emulated with a 4-byte access reach past the allocation.

Run on a CUDA machine, one case per process (the first memcheck error loses the context):

    PYTORCH_NO_CUDA_MEMORY_CACHING=1 compute-sanitizer --tool memcheck --error-exitcode 99 \
        python3 docs/known_issues/aten_cuda_narrow_atomic_cas.py [--case NAME]
    python3 docs/known_issues/aten_cuda_narrow_atomic_cas.py --list    # the cases

The caching allocator must be off: with it, a tensor's bytes sit inside a larger cached block
and the bytes past the tensor belong to that block, so memcheck has nothing to report.

What happens (aten/src/ATen/cuda/Atomic.cuh, native/cuda/KernelUtils.cuh): CUDA has no 1- or
2-byte atomic add/mul/max/min for these types, so ATen compare-and-swaps the aligned 32-bit word
around the element (bool/uint8/int8/int16; float16/bfloat16 mul/max/min), and adds float16/
bfloat16 through a 4-byte atomicAdd on the aligned pair. When the allocation's byte size is not a
multiple of 4, an element in its last partial word makes that access cover 1-3 bytes past the
end. The default case is the one the H200 met (torch 2.11.0+cu130, 2026-12-02): a bool tensor of
210 bytes, scatter_add into its last element; memcheck then reports, for ATen's
_scatter_gather_elementwise_kernel<..., bool, long> (ReduceAdd), an "Invalid __global__ read of
size 4 bytes" whose address is "2 bytes after the nearest allocation ... of size 210 bytes", and
the next CUDA call fails (the context is lost). NVIDIA CCCL has the same class of bug
(NVIDIA/cccl#6430). stridewise's tests and auditor keep these kernels from running under
memcheck (stridewise.testing.sanitizer; the auditor's known issue aten-cuda-narrow-atomic-cas).

Each case prints what memcheck is expected to say; the 'control' cases must stay clean. The
cases marked 'inferred' were read from ATen's source first; on the H200 (2026-12-02, torch
2.11.0+cu130) every non-control case gave memcheck's error (the float16 pair as an "Invalid
__global__ atomic", index_add in indexFuncSmallIndex, put in index_elementwise_kernel) and both
controls stayed clean. The script also prints the environment variables a compute-sanitizer run sets that name a
sanitizer or an injection library (to settle what stridewise.testing.sanitizer's fallback can
rely on when STRIDEWISE_SANITIZER is not set).

Without a GPU it says so and exits 0.
"""
from __future__ import annotations

import os
import sys

import torch

HIT = "expected: memcheck reports an invalid __global__ read of size 4 bytes, {past} byte(s) after an allocation of {n} bytes ({kernel})"
CLEAN = "expected: no memcheck error ({why})"


def _cases():
    c = "cuda"
    return {
        # name: (what, run, expectation)
        "bool_add": ("scatter_add_ of True into element 209 of a 210-byte bool tensor (the H200's case)",
                     lambda: torch.zeros(210, dtype=torch.bool, device=c).scatter_add_(
                         0, torch.tensor([209], device=c), torch.ones(1, dtype=torch.bool, device=c)),
                     HIT.format(past=2, n=210, kernel="_scatter_gather_elementwise_kernel, bool, ReduceAdd")),
        "uint8_add": ("scatter_add_ into element 209 of a 210-byte uint8 tensor",
                      lambda: torch.zeros(210, dtype=torch.uint8, device=c).scatter_add_(
                          0, torch.tensor([209], device=c), torch.ones(1, dtype=torch.uint8, device=c)),
                      HIT.format(past=2, n=210, kernel="_scatter_gather_elementwise_kernel, uint8, ReduceAdd")),
        "int16_amax": ("scatter_reduce_(amax) into element 104 of a 210-byte int16 tensor",
                       lambda: torch.zeros(105, dtype=torch.int16, device=c).scatter_reduce_(
                           0, torch.tensor([104], device=c), torch.ones(1, dtype=torch.int16, device=c), "amax"),
                       HIT.format(past=2, n=210, kernel="gpuAtomicMax, int16 CAS")),
        "float16_prod": ("scatter_reduce_(prod) into element 104 of a 210-byte float16 tensor",
                         lambda: torch.ones(105, dtype=torch.float16, device=c).scatter_reduce_(
                             0, torch.tensor([104], device=c), torch.full((1,), 2.0, dtype=torch.float16, device=c),
                             "prod"),
                         HIT.format(past=2, n=210, kernel="AtomicFPOp<Half>, ReduceMultiply")),
        "float16_add_pair": ("scatter_add_ into the last element of a (3, 7) float16 tensor (42 bytes), "
                             "along dim 1 (inferred: the __half2 pair of fastSpecializedAtomicAdd)",
                             lambda: torch.zeros(3, 7, dtype=torch.float16, device=c).scatter_add_(
                                 1, torch.full((3, 1), 6, device=c), torch.ones(3, 1, dtype=torch.float16, device=c)),
                             HIT.format(past=2, n=42, kernel="fastSpecializedAtomicAdd<Half>, inferred")),
        "int8_index_add": ("index_add_ into element 209 of a 210-byte int8 tensor (inferred)",
                           lambda: torch.zeros(210, dtype=torch.int8, device=c).index_add_(
                               0, torch.tensor([209], device=c), torch.ones(1, dtype=torch.int8, device=c)),
                           HIT.format(past=2, n=210, kernel="index_add, int8 CAS, inferred")),
        "int16_put_acc": ("put_(accumulate=True) into element 104 of a 210-byte int16 tensor (inferred)",
                          lambda: torch.zeros(105, dtype=torch.int16, device=c).put_(
                              torch.tensor([104], device=c), torch.ones(1, dtype=torch.int16, device=c), True),
                          HIT.format(past=2, n=210, kernel="put_ accumulate, int16 CAS, inferred")),
        "control_bool_212": ("scatter_add_ into element 211 of a 212-byte bool tensor",
                             lambda: torch.zeros(212, dtype=torch.bool, device=c).scatter_add_(
                                 0, torch.tensor([211], device=c), torch.ones(1, dtype=torch.bool, device=c)),
                             CLEAN.format(why="212 is a multiple of 4: the word around the last byte is inside")),
        "control_float32": ("scatter_add_ into the last element of a 212-byte float32 tensor",
                            lambda: torch.zeros(53, device=c).scatter_add_(
                                0, torch.tensor([52], device=c), torch.ones(1, device=c)),
                            CLEAN.format(why="a native 4-byte atomicAdd on the element itself")),
    }


def main(argv) -> int:
    names = list(_cases())
    if "--list" in argv:
        print("\n".join(names))
        return 0
    name = argv[argv.index("--case") + 1] if "--case" in argv else "bool_add"
    if name not in names:
        print(f"unknown case {name!r}; cases: {', '.join(names)}")
        return 2
    print(f"torch {torch.__version__}  cuda {torch.version.cuda}  "
          f"PYTORCH_NO_CUDA_MEMORY_CACHING={os.environ.get('PYTORCH_NO_CUDA_MEMORY_CACHING')!r}")
    env = {k: v for k, v in sorted(os.environ.items())
           if "SANITIZER" in k.upper() or "INJECTION" in k.upper()}
    print(f"sanitizer/injection environment: {env or 'none'}")
    if not torch.cuda.is_available():
        print("this repro needs a CUDA GPU (torch.cuda.is_available() is False): nothing run.\n"
              "On a GPU: PYTORCH_NO_CUDA_MEMORY_CACHING=1 compute-sanitizer --tool memcheck "
              f"--error-exitcode 99 python3 {sys.argv[0]} --case {name}")
        return 0
    if os.environ.get("PYTORCH_NO_CUDA_MEMORY_CACHING") != "1":
        print("warning: PYTORCH_NO_CUDA_MEMORY_CACHING is not 1: memcheck will see nothing")
    what, run, expect = _cases()[name]
    print(f"device {torch.cuda.get_device_name(0)}; case {name}: {what}")
    print(expect)
    y = run()
    torch.cuda.synchronize()
    print(f"returned; last element {y.reshape(-1)[-1].item()!r}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
