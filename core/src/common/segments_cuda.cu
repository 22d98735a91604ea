// The sorted path's back half on the GPU: the __global__ wrappers of common/segments.h's bodies
// and their launches, instantiated here once for every family (scatter's segment path and
// index_k's sorted path hand a SegJob to run_segments_cuda). Every kernel writes nothing when
// its block sees the call's abort word raised (a bad index value met by the family's keys
// kernel or validation).
#include <cuda_runtime.h>

#include "common/cuda_report.cuh"
#include "common/segments_launch.h"

namespace stridewise {
namespace cuda_seg {
namespace {

using detail::block_aborted;

template <typename T, int V, typename I, int D>
__global__ void __launch_bounds__(kThreads) seg_acc_kernel(const SegArgs<I, D> a) {
  if (block_aborted(a.abort)) return;
  seg_acc_thread<T, V>(a, int64_t(blockIdx.x), int64_t(threadIdx.x), int64_t(gridDim.x));
}

template <typename T, int V, typename I, int D>
__global__ void __launch_bounds__(kThreads) seg_fix_kernel(const SegArgs<I, D> a) {
  if (block_aborted(a.abort)) return;
  seg_fix_thread<T, V>(a, int64_t(blockIdx.x), int64_t(threadIdx.x), int64_t(gridDim.x));
}

template <typename U, int V, typename I, int D>
__global__ void __launch_bounds__(kThreads) seg_put_kernel(const SegArgs<I, D> a, int units) {
  if (block_aborted(a.abort)) return;
  seg_put_thread<U, V>(a, units, int64_t(blockIdx.x), int64_t(threadIdx.x), int64_t(gridDim.x));
}

struct SegCudaRunner {
  cudaStream_t stream;
  template <typename T, int V, typename I, int D>
  void seg_acc(const SegArgs<I, D>& a, unsigned blocks) {
    seg_acc_kernel<T, V, I, D><<<blocks, kThreads, 0, stream>>>(a);
  }
  template <typename T, int V, typename I, int D>
  void seg_fix(const SegArgs<I, D>& a, unsigned blocks) {
    seg_fix_kernel<T, V, I, D><<<blocks, kThreads, 0, stream>>>(a);
  }
  template <typename U, int V, typename I, int D>
  void seg_put(const SegArgs<I, D>& a, int units, unsigned blocks) {
    seg_put_kernel<U, V, I, D><<<blocks, kThreads, 0, stream>>>(a, units);
  }
};

}  // namespace

Status run_segments_cuda(const SegJob& job, void* stream) {
  SegCudaRunner r{static_cast<cudaStream_t>(stream)};
  return launch_segments(job, r);
}

}  // namespace cuda_seg
}  // namespace stridewise
