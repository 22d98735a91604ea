// CUDA scatter family: the contract is in scatter.h; the launch sequence and workspace in
// scatter_cuda_dispatch.h, the kernel bodies in scatter_cuda_impl.h (both shared with the
// host emulation test), the element arithmetic and atomics in common/elem_arith.h. This
// file holds what needs a GPU: the __global__ wrappers, the bad-index report, the abort
// word's per-block check and the launches; the entry's setup and checks are CudaCall's
// (common/cuda_call.h).
//
// Host work per call: CudaCall's write setup (cudaGetDevice, the (lazily allocated) error
// record and abort word: two atomic loads and one fetch_add; cudaStreamIsCapturing), the host
// planning of the workspace path (plan_loop over out's shape and the index's), 2..5 launches
// and cudaGetLastError; the segment path (scatter_cuda_sorted.h) adds CUB's host-side temp-size
// query (twice: workspace bytes and call) and its radix sort's launches. No allocation, no
// synchronization (unless CudaCheckMode::kSync).
#include <cuda_runtime.h>

#include <cstdlib>

#include "common/cuda_call.h"
#include "common/cuda_report.cuh"
#include "common/cuda_status.cuh"
#include "common/radix_sort.cuh"
#include "scatter/scatter_cuda_dispatch.h"
#include "stridewise/cuda_errors.h"
#include "stridewise/scatter.h"

namespace stridewise {
namespace cuda_scatter {
namespace {

using detail::block_aborted;

template <typename I, int D>
__global__ void __launch_bounds__(kThreads) scatter_validate_kernel(const ValidateArgs<I, D> a) {
  __shared__ int block_claim;
  if (threadIdx.x == 0) block_claim = 0;
  __syncthreads();
  BadIndex bad;
  validate_thread(a, I(blockIdx.x), I(threadIdx.x), I(gridDim.x), bad);
  if (!bad.any) return;
  *static_cast<volatile int64_t*>(a.abort.word) = a.abort.gen;
  detail::report_bad_index(&block_claim, a.site.rec, a.site.op, a.site.dim, a.site.size, bad.value,
                           bad.position);
}

template <typename U, typename I, int D>
__global__ void __launch_bounds__(kThreads) scatter_copy_kernel(const CopyArgs<I, D> a) {
  if (block_aborted(a.abort)) return;
  copy_thread<U>(a, I(blockIdx.x), I(threadIdx.x), I(gridDim.x));
}

template <typename U, typename I, int D>
__global__ void __launch_bounds__(kThreads) scatter_put_elems_kernel(const PutArgs<I, D> a) {
  if (block_aborted(a.abort)) return;
  put_elems_thread<U>(a, I(blockIdx.x), I(threadIdx.x), I(gridDim.x));
}

template <typename U, typename I, int D>
__global__ void __launch_bounds__(kThreads) scatter_put_lines_kernel(const PutArgs<I, D> a) {
  if (block_aborted(a.abort)) return;
  put_lines_thread<U>(a, I(blockIdx.x), I(threadIdx.x), I(gridDim.x));
}

template <typename U, typename I, int D>
__global__ void __launch_bounds__(kThreads) scatter_claim_kernel(const ClaimArgs<I, D> a) {
  if (block_aborted(a.abort)) return;
  claim_thread<U>(a, blockIdx.x, threadIdx.x, gridDim.x);
}

template <typename U, typename I, int D>
__global__ void __launch_bounds__(kThreads)
    scatter_claim_final_kernel(const ClaimFinalArgs<I, D> a) {
  if (block_aborted(a.abort)) return;
  claim_final_thread<U>(a, I(blockIdx.x), I(threadIdx.x), I(gridDim.x));
}

template <typename T, typename I, int D>
__global__ void __launch_bounds__(kThreads) scatter_acc_elems_kernel(const AccArgs<I, D> a) {
  if (block_aborted(a.abort)) return;
  acc_elems_thread<T>(a, I(blockIdx.x), I(threadIdx.x), I(gridDim.x));
}

template <typename T, typename I, int D>
__global__ void __launch_bounds__(kThreads) scatter_acc_lines_kernel(const AccArgs<I, D> a) {
  if (block_aborted(a.abort)) return;
  acc_lines_thread<T>(a, I(blockIdx.x), I(threadIdx.x), I(gridDim.x));
}

template <typename T, typename I, int D>
__global__ void __launch_bounds__(kThreads) scatter_ws_init_kernel(const WsArgs<I, D> a) {
  if (block_aborted(a.abort)) return;
  ws_init_thread<T>(a, I(blockIdx.x), I(threadIdx.x), I(gridDim.x));
}

template <typename T, typename I, int D>
__global__ void __launch_bounds__(kThreads) scatter_ws_final_kernel(const WsArgs<I, D> a) {
  if (block_aborted(a.abort)) return;
  ws_final_thread<T>(a, I(blockIdx.x), I(threadIdx.x), I(gridDim.x));
}

__global__ void __launch_bounds__(kThreads) scatter_sort_keys_kernel(const KeysArgs a) {
  if (block_aborted(a.abort)) return;
  sort_keys_thread(a, int64_t(blockIdx.x), int64_t(threadIdx.x), int64_t(gridDim.x));
}

template <typename U, int V, typename I, int D>
__global__ void __launch_bounds__(kThreads)
    scatter_rows_put_kernel(const SegArgs<I, D> a, int64_t index_dim_stride) {
  if (block_aborted(a.abort)) return;
  rows_put_thread<U, V>(a, index_dim_stride, int64_t(blockIdx.x), int64_t(threadIdx.x),
                        int64_t(gridDim.x));
}

// One block per tile of lines (grid-stride), the four phases of tile_phase separated by
// barriers; dynamic shared memory of TileShape::smem_bytes.
template <typename T, typename I, int D>
__global__ void __launch_bounds__(kTileThreads)
    scatter_tile_kernel(const TileArgs<I, D> a, int64_t tiles) {
  extern __shared__ __align__(16) unsigned char tile_mem[];
  if (block_aborted(a.abort)) return;
  for (int64_t t = blockIdx.x; t < tiles; t += gridDim.x) {
    for (int phase = 0; phase < 4; ++phase) {
      tile_phase<T>(a, phase, t, int64_t(threadIdx.x), int64_t(blockDim.x), tile_mem);
      __syncthreads();
    }
  }
}

// Groups of a.group threads (a warp, or the block) per item, grid-stride; each group's bins in
// its slab of the dynamic shared memory. A warp's phases are separated by __syncwarp, a
// block's by __syncthreads: items are uniform over a group, so each barrier is reached by all
// of it.
template <typename T, typename I, int D>
__global__ void __launch_bounds__(kBinsThreads) scatter_bins_kernel(const BinsArgs<I, D> a) {
  extern __shared__ __align__(16) unsigned char bins_mem[];
  if (block_aborted(a.abort)) return;
  const int64_t groups = blockDim.x / a.group, g = threadIdx.x / a.group, t = threadIdx.x % a.group;
  void* const slab = bins_mem + g * a.slab_bytes;
  const int64_t items = bins_items(a);
  for (int64_t item = blockIdx.x * groups + g; item < items; item += gridDim.x * groups) {
    bins_item(a, item, [&](int phase, int64_t k) {
      bins_phase<T>(a, phase, item, k, t, slab);
      if (a.group == kBinsWarp)
        __syncwarp();
      else
        __syncthreads();
    });
  }
}

// The common radix sort (common/radix_sort.cuh) over SortArgs' buffers, keys of K (temp ==
// nullptr: the size query, host only).
template <typename K, typename V, typename N>
cudaError_t radix_sort(const SortArgs& a, size_t* bytes, cudaStream_t stream, int* sel) {
  K* const keys[2] = {static_cast<K*>(a.keys[0]), static_cast<K*>(a.keys[1])};
  V* const vals[2] = {static_cast<V*>(a.vals[0]), static_cast<V*>(a.vals[1])};
  return radix_sort_pairs(a.temp, bytes, keys, vals, static_cast<N>(a.shape.n), a.shape.end_bit,
                          stream, sel);
}

cudaError_t radix_sort_any(const SortArgs& a, size_t* bytes, cudaStream_t stream, int* sel) {
  if (a.shape.wide)
    return radix_sort<unsigned long long, long long, int64_t>(a, bytes, stream, sel);
  return radix_sort<unsigned int, int, int>(a, bytes, stream, sel);
}

struct CudaRunner {
  cudaStream_t stream;
  template <typename T, typename I, int D>
  void bins(const BinsArgs<I, D>& a, unsigned blocks, int threads, int64_t smem) {
    scatter_bins_kernel<T, I, D>
        <<<blocks, static_cast<unsigned>(threads), static_cast<size_t>(smem), stream>>>(a);
  }
  template <typename I, int D>
  void validate(const ValidateArgs<I, D>& a, unsigned blocks) {
    scatter_validate_kernel<I, D><<<blocks, kThreads, 0, stream>>>(a);
  }
  template <typename U, typename I, int D>
  void copy(const CopyArgs<I, D>& a, unsigned blocks) {
    scatter_copy_kernel<U, I, D><<<blocks, kThreads, 0, stream>>>(a);
  }
  template <typename U, typename I, int D>
  void put_elems(const PutArgs<I, D>& a, unsigned blocks) {
    scatter_put_elems_kernel<U, I, D><<<blocks, kThreads, 0, stream>>>(a);
  }
  template <typename U, typename I, int D>
  void put_lines(const PutArgs<I, D>& a, unsigned blocks) {
    scatter_put_lines_kernel<U, I, D><<<blocks, kThreads, 0, stream>>>(a);
  }
  template <typename U, typename I, int D>
  void claim(const ClaimArgs<I, D>& a, unsigned blocks) {
    scatter_claim_kernel<U, I, D><<<blocks, kThreads, 0, stream>>>(a);
  }
  template <typename U, typename I, int D>
  void claim_final(const ClaimFinalArgs<I, D>& a, unsigned blocks) {
    scatter_claim_final_kernel<U, I, D><<<blocks, kThreads, 0, stream>>>(a);
  }
  void zero(void* p, int64_t bytes) {
    (void)cudaMemsetAsync(p, 0, static_cast<size_t>(bytes), stream);
  }
  template <typename T, typename I, int D>
  void acc_elems(const AccArgs<I, D>& a, unsigned blocks) {
    scatter_acc_elems_kernel<T, I, D><<<blocks, kThreads, 0, stream>>>(a);
  }
  template <typename T, typename I, int D>
  void acc_lines(const AccArgs<I, D>& a, unsigned blocks) {
    scatter_acc_lines_kernel<T, I, D><<<blocks, kThreads, 0, stream>>>(a);
  }
  // CUB's temporary bytes for s; -1 when the query fails.
  int64_t sort_temp_bytes(const SortShape& s) {
    SortArgs q{nullptr, 0, {nullptr, nullptr}, {nullptr, nullptr}, s};
    size_t bytes = 0;
    int sel = 0;
    if (radix_sort_any(q, &bytes, stream, &sel) != cudaSuccess) return -1;
    return static_cast<int64_t>(bytes);
  }
  void sort_keys(const KeysArgs& a, unsigned blocks) {
    scatter_sort_keys_kernel<<<blocks, kThreads, 0, stream>>>(a);
  }
  // The buffer (0 or 1) holding the sorted pairs; -1 on failure.
  int sort(const SortArgs& a) {
    size_t bytes = a.temp_bytes;
    int sel = -1;
    return radix_sort_any(a, &bytes, stream, &sel) == cudaSuccess ? sel : -1;
  }
  // The sorted path's back half (common/segments_launch.h), shared with index_k.
  Status segments(const cuda_seg::SegJob& j) { return cuda_seg::run_segments_cuda(j, stream); }
  template <typename U, int V, typename I, int D>
  void rows_put(const SegArgs<I, D>& a, int64_t index_dim_stride, unsigned blocks) {
    scatter_rows_put_kernel<U, V, I, D><<<blocks, kThreads, 0, stream>>>(a, index_dim_stride);
  }
  template <typename T, typename I, int D>
  void tile(const TileArgs<I, D>& a, int64_t tiles, unsigned blocks, int64_t smem) {
    // Above 48 KB a kernel must opt in; a refusal surfaces at the launch (cudaGetLastError).
    (void)cudaFuncSetAttribute(scatter_tile_kernel<T, I, D>,
                               cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(smem));
    scatter_tile_kernel<T, I, D>
        <<<blocks, kTileThreads, static_cast<size_t>(smem), stream>>>(a, tiles);
  }
  template <typename T, typename I, int D>
  void ws_init(const WsArgs<I, D>& a, unsigned blocks) {
    scatter_ws_init_kernel<T, I, D><<<blocks, kThreads, 0, stream>>>(a);
  }
  template <typename T, typename I, int D>
  void ws_final(const WsArgs<I, D>& a, unsigned blocks) {
    scatter_ws_final_kernel<T, I, D><<<blocks, kThreads, 0, stream>>>(a);
  }
};

}  // namespace

size_t scatter_cuda_workspace_bytes_with(const ScatterArgs& args, const ScatterPlan& plan,
                                         PathChoice choice) {
  CudaRunner runner{nullptr};  // the size query launches nothing
  return static_cast<size_t>(call_layout(args, plan, choice, runner).total);
}

Status scatter_cuda_with(const ScatterArgs& args, const ScatterPlan& plan, void* workspace,
                         size_t workspace_bytes, void* stream, ErrorDetail* err,
                         PathChoice choice) {
  if (plan.elems.numel == 0 && (plan.in_place || plan.copy.numel == 0)) return Status::kOk;

  CudaCall call;
  Status st = call.open(stream, /*write=*/true, err);
  if (st != Status::kOk) return st;
  const ScatterSite site{call.rec, static_cast<int32_t>(args.desc.op), plan.dim, plan.out_dim_size};
  CudaRunner runner{call.stream};
  std::string why;
  st = run_scatter(args, plan, workspace, workspace_bytes, site, call.abort, runner, &why, choice);
  if (st != Status::kOk) {
    if (err) *err = ErrorDetail{};
    if (err) err->op = args.desc.op;
    return detail::fail(err, st, why);
  }
  return call.close(err);
}

// STRIDEWISE_SCATTER_CUDA_PATH (auto|plain|segments|tile|bins|bins_split), read once: forces a path
// for benchmarks and profiles (where the call allows it). An unknown value is ignored (auto), never
// an error on a user's call.
namespace {
PathChoice forced_path() {
  static const PathChoice choice = [] {
    PathChoice c = PathChoice::kAuto;
    return parse_path_choice(std::getenv("STRIDEWISE_SCATTER_CUDA_PATH"), &c) ? c
                                                                              : PathChoice::kAuto;
  }();
  return choice;
}
}  // namespace

}  // namespace cuda_scatter

size_t scatter_cuda_workspace_bytes(const ScatterArgs& args, const ScatterPlan& plan) {
  return cuda_scatter::scatter_cuda_workspace_bytes_with(args, plan, cuda_scatter::forced_path());
}

Status scatter_cuda(const ScatterArgs& args, const ScatterPlan& plan, void* workspace,
                    size_t workspace_bytes, void* stream, ErrorDetail* err) {
  return cuda_scatter::scatter_cuda_with(args, plan, workspace, workspace_bytes, stream, err,
                                         cuda_scatter::forced_path());
}

}  // namespace stridewise
