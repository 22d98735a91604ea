// CUDA gather: the contract is in gather.h; kernel bodies, kernel choice and dispatch are
// in gather_cuda_impl.h (shared with the host emulation test); design in
// docs/gather_cuda.md. This file holds what needs a GPU: the __global__ wrappers, the
// error report into the mapped record, the launch, and the deferred/sync check.
//
// Host overhead per call: plan_gather (host arithmetic over <= 64 dims; skipped by the
// plan-taking entry point, whose caller planned already), CudaCall's read setup (cudaGetDevice,
// one atomic load for the (lazily allocated) error record), the launch and cudaGetLastError.
// No allocation, no synchronization (unless CudaCheckMode::kSync).
#include <cuda_runtime.h>

#include <cstdlib>

#include "common/cuda_call.h"
#include "common/cuda_report.cuh"
#include "common/cuda_status.cuh"
#include "gather/gather_cuda_impl.h"
#include "stridewise/cuda_errors.h"
#include "stridewise/gather.h"

namespace stridewise {
namespace cuda_gather {
namespace {

// The prologue and epilogue every kernel shares: runs `body(bad)` for this thread, then
// reports what it found. Inlined into each kernel, so the wrappers below cost nothing over
// writing it out; block_claim is one shared int per kernel instantiation.
template <typename Body>
__device__ __forceinline__ void with_bad_index_report(const ErrorSite& site, Body&& body) {
  __shared__ int block_claim;
  if (threadIdx.x == 0) block_claim = 0;
  __syncthreads();
  BadIndex bad;
  body(bad);
  if (bad.any)
    detail::report_bad_index(&block_claim, site.rec, site.op, site.dim, site.size, bad.value,
                             bad.position, site.wraps);
}

// No minimum blocks per SM in __launch_bounds__: capping elems and tile at 32 registers (8 x
// 256 threads, full occupancy, no spills per ptxas) was measured on the H200 (2026-12-01):
// the contiguous random index lost 3-5% (fewer loads in flight per thread), the scattered
// case 2-4%, the clustered index gained 3%. See docs/bench_gather.md.
template <typename E, typename IdxT, typename I, int D>
__global__ void __launch_bounds__(kThreads) gather_elems_kernel(const ElemsArgs<IdxT, I, D> a) {
  with_bad_index_report(a.site, [&](BadIndex& bad) {
    elems_thread<E>(a, I(blockIdx.x), I(threadIdx.x), I(gridDim.x), bad);
  });
}

template <typename U, typename IdxT, typename I, int D>
__global__ void __launch_bounds__(kThreads) gather_rows_kernel(const RowsArgs<IdxT, I, D> a) {
  with_bad_index_report(a.site, [&](BadIndex& bad) {
    rows_thread<U>(a, I(blockIdx.x), I(threadIdx.x), I(gridDim.x), bad);
  });
}

template <typename E, typename IdxT, typename I, int D>
__global__ void __launch_bounds__(kThreads) gather_tile_kernel(const TileArgs<IdxT, I, D> a) {
  __shared__ TileBuffer buf;
  with_bad_index_report(a.site, [&](BadIndex& bad) {
    for (I t = I(blockIdx.x); t < a.num_tiles; t += I(gridDim.x)) {
      tile_load_thread(a, t, I(threadIdx.x), buf);
      __syncthreads();
      tile_store_thread<E>(a, t, I(threadIdx.x), buf, bad);
      __syncthreads();  // the next tile's loads overwrite buf
    }
  });
}

// STRIDEWISE_GATHER_CUDA_KERNEL (auto|elems|plain|tile), read once: forces a kernel for
// benchmarks and profiles. An unknown value is ignored (auto), never an error on a user's call.
KernelChoice forced_kernel() {
  static const KernelChoice choice = [] {
    KernelChoice c = KernelChoice::kAuto;
    return parse_kernel_choice(std::getenv("STRIDEWISE_GATHER_CUDA_KERNEL"), &c)
               ? c
               : KernelChoice::kAuto;
  }();
  return choice;
}

struct CudaRunner {
  cudaStream_t stream;
  template <typename U, typename IdxT, typename I, int D>
  void rows(const RowsArgs<IdxT, I, D>& a, unsigned blocks) {
    gather_rows_kernel<U, IdxT, I, D><<<blocks, kThreads, 0, stream>>>(a);
  }
  template <typename E, typename IdxT, typename I, int D>
  void elems(const ElemsArgs<IdxT, I, D>& a, unsigned blocks) {
    gather_elems_kernel<E, IdxT, I, D><<<blocks, kThreads, 0, stream>>>(a);
  }
  template <typename E, typename IdxT, typename I, int D>
  void tile(const TileArgs<IdxT, I, D>& a, unsigned blocks) {
    gather_tile_kernel<E, IdxT, I, D><<<blocks, kThreads, 0, stream>>>(a);
  }
};

}  // namespace
}  // namespace cuda_gather

Status gather_cuda(const GatherArgs& args, void* stream, ErrorDetail* err) {
  GatherPlan plan;
  const Status st = plan_gather(args, &plan, err);
  if (st != Status::kOk) return st;
  return gather_cuda(args, plan, stream, err);
}

Status gather_cuda(const GatherArgs& args, const GatherPlan& plan, void* stream, ErrorDetail* err) {
  if (plan.loop.numel == 0) return Status::kOk;

  cuda_common::CudaCall call;
  Status st = call.open(stream, /*write=*/false, err);
  if (st != Status::kOk) return st;
  cuda_gather::CudaRunner runner{call.stream};
  std::string why;
  const cuda_gather::ErrorSite site{call.rec, plan.dim, plan.self_dim_size,
                                    static_cast<int32_t>(args.op), plan.wraps};
  st = cuda_gather::run_gather(args, plan, site, runner, &why, cuda_gather::forced_kernel());
  if (st != Status::kOk) return detail::fail(err, st, why);
  return call.close(err);
}

}  // namespace stridewise
