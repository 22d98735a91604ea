// Internal to core/src/*.cu: a kernel's report of a bad index value into its device's mapped
// error record (stridewise/cuda_errors.h), one routine for every kernel family, and the
// writing kernels' per-block test of the call's abort word.
#pragma once

#include <cstdint>

#include "common/kernel_common.h"  // Abort, aborted
#include "stridewise/cuda_errors.h"

namespace stridewise {
namespace detail {

// First reporter per block (`block_claim`: a shared int the block zeroed before its loop),
// then first per device (the record's claim word; a plain read skips the bus atomic while a
// record is already pending). `op` is the OpCode, valid values are [0, size) on `dim`, or
// [-size, size) when `wraps` (the k-index core's wrapping descriptors); the
// bad value and its position come from the thread's BadIndex. Out of line so the hot loops
// do not carry its registers; called at most once per thread, after its loop. Every argument
// is a value: a reference to the caller's BadIndex (or to a field of the kernel's parameter)
// would make that object addressable, and the compiler keeps an addressable object in local
// memory for the whole kernel (the H200 measured gather 10-33% slower that way, 2026-12-02).
static __device__ __noinline__ void report_bad_index(int* block_claim, CudaErrorRecord* rec,
                                                     int32_t op, int64_t dim, int64_t size,
                                                     int64_t value, int64_t position,
                                                     bool wraps = false) {
  if (atomicExch(block_claim, 1) != 0) return;
  volatile CudaErrorRecord* r = rec;
  if (r->claim != 0) return;
  if (atomicCAS(&rec->claim, 0, 1) != 0) return;
  r->op = op;
  r->wraps = wraps ? 1 : 0;
  r->dim = dim;
  r->value = value;
  r->size = size;
  r->position = position;
  __threadfence_system();  // every field reaches the host before the flag does
  r->flag = 1;
}

// True when this call's validation raised the abort word: read once per block, so a block
// either writes or not as a whole.
__device__ __forceinline__ bool block_aborted(const cuda_common::Abort& a) {
  __shared__ int skip;
  if (threadIdx.x == 0) skip = cuda_common::aborted(a) ? 1 : 0;
  __syncthreads();
  return skip != 0;
}

}  // namespace detail
}  // namespace stridewise
