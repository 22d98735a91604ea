// CUDA advanced indexing: the contract is in index_k.h, the per-thread bodies in
// index_k_cuda_impl.h and index_k_cuda_sorted.h, the launch sequence in index_k_cuda_launch.h
// (all shared with the host emulation test). This file holds the __global__ wrappers and the
// runner that launches them; the entry's setup and checks are CudaCall's (common/cuda_call.h).
//
// A call is one kernel for a read; for a write: a validation kernel (raises the call's abort
// word on a bad value), then the copy or atomic kernel, which writes nothing once the word is
// raised. An order-free write whose index every row shares takes a sorted fill: up to 4096 index
// elements the block-sorted fill (one kernel: every block checks and sorts the keys in shared
// memory, then stores), beyond that keys, CUB's sort, then a store per (row, sorted key). The
// sorted path (every mean; the narrow types' adds; floating adds over long rows; deterministic
// writes that may meet duplicates): keys (validating), CUB's stable radix sort, then the back half
// every family shares (common/segments_cuda.cu: fixed chunks of sorted positions, one write per
// element, long runs folded in pieces combined in chunk order). No host synchronization unless
// CudaCheckMode::kSync.
#include <cuda_runtime.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <cstring>
#include <type_traits>

#include "common/cuda_call.h"
#include "common/cuda_report.cuh"
#include "common/cuda_status.cuh"
#include "common/radix_sort.cuh"
#include "index_k/index_k_cuda_launch.h"
#include "stridewise/cuda_errors.h"
#include "stridewise/index_k.h"

namespace stridewise {
namespace cuda_index_k {
namespace {

template <typename I, int D, typename Body>
__device__ __forceinline__ void with_report(const Params<I, D>& a, Body&& body) {
  __shared__ int block_claim;
  if (threadIdx.x == 0) block_claim = 0;
  __syncthreads();
  Bad bad;
  body(bad);
  if (bad.b.any) {
    detail::report_bad_index(&block_claim, a.rec, a.op, a.dim[bad.j], a.size[bad.j], bad.b.value,
                             bad.b.position, a.wraps);
    if (a.abort.word) *a.abort.word = a.abort.gen;  // write calls: nothing may be written
  }
}

template <typename U, typename I, int D>
__global__ void __launch_bounds__(kThreads) read_kernel(const Params<I, D> a) {
  with_report(a, [&](Bad& bad) {
    copy_thread<U, false>(a, I(blockIdx.x), I(threadIdx.x), I(gridDim.x), bad);
  });
}

template <typename I, int D>
__global__ void __launch_bounds__(kThreads) check_kernel(const Params<I, D> a) {
  with_report(a,
              [&](Bad& bad) { check_thread(a, I(blockIdx.x), I(threadIdx.x), I(gridDim.x), bad); });
}

// The values were checked: a bad one here cannot occur (it would be skipped, never used).
template <typename U, typename I, int D>
__global__ void __launch_bounds__(kThreads) put_kernel(const Params<I, D> a) {
  if (aborted(a.abort)) return;
  Bad bad;
  copy_thread<U, true>(a, I(blockIdx.x), I(threadIdx.x), I(gridDim.x), bad);
}

template <typename T, typename I, int D>
__global__ void __launch_bounds__(kThreads) add_kernel(const Params<I, D> a, arith::AccOf<T>* acc) {
  if (aborted(a.abort)) return;
  Bad bad;
  add_thread<T>(a, acc, I(blockIdx.x), I(threadIdx.x), I(gridDim.x), bad);
}

template <typename K, typename Vt, typename I, int D>
__global__ void __launch_bounds__(kThreads)
    keys_kernel(const Params<I, D> a, K* keys, Vt* vals, int payload) {
  with_report(a, [&](Bad& bad) {
    keys_thread(a, keys, vals, payload, I(blockIdx.x), I(threadIdx.x), I(gridDim.x), bad);
  });
}

template <typename U, typename I, int D>
__global__ void __launch_bounds__(kThreads)
    fill_rows_kernel(const FillParams<I, D> a, const uint64_t* keys) {
  if (aborted(a.abort)) return;
  fill_rows_thread<U>(a, keys, I(blockIdx.x), I(threadIdx.x), I(gridDim.x));
}

// The block-sorted fill (index_k_cuda_sorted.h): n2 keys in dynamic shared memory.
template <typename U, typename I, int D>
__global__ void __launch_bounds__(kThreads)
    fill_block_kernel(const Params<I, D> seq, const FillParams<I, D> f, int64_t n2) {
  extern __shared__ __align__(16) unsigned char fill_smem[];
  I* const keys = reinterpret_cast<I*>(fill_smem);
  __shared__ int block_claim, any_bad;
  if (threadIdx.x == 0) block_claim = any_bad = 0;
  __syncthreads();
  Bad bad;
  fill_keys_phase(seq, keys, n2, I(threadIdx.x), I(blockDim.x), bad);
  if (bad.b.any) {
    any_bad = 1;
    detail::report_bad_index(&block_claim, seq.rec, seq.op, seq.dim[bad.j], seq.size[bad.j],
                             bad.b.value, bad.b.position, seq.wraps);
  }
  __syncthreads();
  if (any_bad) return;  // the same answer in every block: nothing is written
  for (int64_t k = 2; k <= n2; k *= 2)
    for (int64_t j = k / 2; j > 0; j /= 2) {
      bitonic_step(keys, n2, k, j, I(threadIdx.x), I(blockDim.x));
      __syncthreads();
    }
  fill_rows_thread<U>(f, keys, I(blockIdx.x), I(threadIdx.x), I(gridDim.x));
}

// STRIDEWISE_INDEX_K_CUDA_PATH (auto|plain|sorted), read once: PathChoice's values, for
// benchmarks that measure what a path buys. Any other value is auto, never an error on a
// user's call.
PathChoice path_choice() {
  static const PathChoice choice = [] {
    const char* v = std::getenv("STRIDEWISE_INDEX_K_CUDA_PATH");
    if (v != nullptr && std::strcmp(v, "plain") == 0) return PathChoice::kPlain;
    if (v != nullptr && std::strcmp(v, "sorted") == 0) return PathChoice::kSorted;
    return PathChoice::kAuto;
  }();
  return choice;
}

// Blocks of kThreads resident on `device` at once (one wave), cached per device: the
// block-sorted fill's grid, so that each block sorts its keys once.
int64_t one_wave(int device) {
  constexpr int kDevices = 64;
  static std::atomic<int64_t> cache[kDevices] = {};
  if (device < 0 || device >= kDevices) return 1024;
  int64_t w = cache[device].load(std::memory_order_relaxed);
  if (w > 0) return w;
  int sms = 0, threads = 0;
  if (cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device) != cudaSuccess ||
      cudaDeviceGetAttribute(&threads, cudaDevAttrMaxThreadsPerMultiProcessor, device) !=
          cudaSuccess)
    return 1024;
  w = std::max<int64_t>(1, int64_t(sms) * std::max(1, threads / kThreads));
  cache[device].store(w, std::memory_order_relaxed);
  return w;
}

// The launches of index_k_cuda_launch.h's sequence, on `stream`.
struct CudaRunner {
  cudaStream_t stream;
  int device;
  template <typename U, typename I, int D>
  void read(const Params<I, D>& p, unsigned blocks) {
    read_kernel<U, I, D><<<blocks, kThreads, 0, stream>>>(p);
  }
  template <typename I, int D>
  void check(const Params<I, D>& p, unsigned blocks) {
    check_kernel<I, D><<<blocks, kThreads, 0, stream>>>(p);
  }
  template <typename U, typename I, int D>
  void put(const Params<I, D>& p, unsigned blocks) {
    put_kernel<U, I, D><<<blocks, kThreads, 0, stream>>>(p);
  }
  template <typename T, typename I, int D>
  void add(const Params<I, D>& p, arith::AccOf<T>* acc, unsigned blocks) {
    add_kernel<T, I, D><<<blocks, kThreads, 0, stream>>>(p, acc);
  }
  template <typename K, typename Vt, typename I, int D>
  void keys(const Params<I, D>& p, K* k, Vt* v, int payload, unsigned blocks) {
    keys_kernel<K, Vt, I, D><<<blocks, kThreads, 0, stream>>>(p, k, v, payload);
  }
  // CUB's temporary bytes for n pairs: the larger of the two key widths', at full width (the
  // most any end_bit needs).
  size_t sort_temp_bytes(int64_t n) {
    return std::max(sort_bytes<uint64_t, int64_t>(n, 64), sort_bytes<uint32_t, int32_t>(n, 32));
  }
  // The buffer (0 or 1) holding the sorted pairs; -1 on failure.
  int sort(const SortSpace& w, int64_t n, int end_bit) {
    return w.wide ? run_sort<uint64_t, int64_t>(w, n, end_bit)
                  : run_sort<uint32_t, int32_t>(w, n, end_bit);
  }
  template <typename K, typename Vt>
  size_t sort_bytes(int64_t n, int end_bit) {
    K* const keys[2] = {nullptr, nullptr};
    Vt* const vals[2] = {nullptr, nullptr};
    size_t bytes = 0;
    int sel = 0;
    radix_sort_pairs(nullptr, &bytes, keys, vals, n, end_bit, nullptr, &sel);  // size query only
    return bytes;
  }
  template <typename K, typename Vt>
  int run_sort(const SortSpace& w, int64_t n, int end_bit) {
    K* const keys[2] = {static_cast<K*>(w.keys[0]), static_cast<K*>(w.keys[1])};
    Vt* const vals[2] = {static_cast<Vt*>(w.vals[0]), static_cast<Vt*>(w.vals[1])};
    size_t bytes = w.temp_bytes;
    int sel = -1;
    return radix_sort_pairs(w.temp, &bytes, keys, vals, n, end_bit, stream, &sel) == cudaSuccess
               ? sel
               : -1;
  }
  template <typename U, typename I, int D>
  void fill_rows(const FillParams<I, D>& f, const uint64_t* k, unsigned blocks) {
    fill_rows_kernel<U, I, D><<<blocks, kThreads, 0, stream>>>(f, k);
  }
  int64_t one_wave() { return cuda_index_k::one_wave(device); }
  template <typename U, typename I, int D>
  void fill_block(const Params<I, D>& seq, const FillParams<I, D>& f, int64_t n2, unsigned blocks,
                  size_t smem) {
    fill_block_kernel<U, I, D><<<blocks, kThreads, smem, stream>>>(seq, f, n2);
  }
  // The sorted path's back half (common/segments_launch.h), shared with scatter.
  Status segments(const cuda_seg::SegJob& j) { return cuda_seg::run_segments_cuda(j, stream); }
};

}  // namespace
}  // namespace cuda_index_k

size_t index_k_cuda_workspace_bytes(const IndexKArgs& args, const IndexKPlan& plan) {
  cuda_index_k::CudaRunner runner{nullptr, 0};  // the size query launches nothing
  return cuda_index_k::index_k_workspace_bytes(args, plan, cuda_index_k::path_choice(), runner);
}

Status index_k_cuda(const IndexKArgs& args, const IndexKPlan& plan, void* workspace,
                    size_t workspace_bytes, void* stream, ErrorDetail* err) {
  if (err) *err = ErrorDetail{};
  if (plan.loop.numel == 0) return Status::kOk;
  // A read through one index tensor runs as the gather it is (index_k.h): x[i] and
  // index_select reach one kernel. A plan the gather refuses (none expected) keeps the walk.
  GatherArgs g;
  GatherPlan gp;
  if (cuda_index_k::path_choice() != cuda_index_k::PathChoice::kPlain &&
      index_k_as_gather(args, &g) && plan_gather(g, &gp, nullptr) == Status::kOk)
    return gather_cuda(g, gp, stream, err);
  cuda_common::CudaCall call;
  Status st = call.open(stream, cuda_index_k::writes(args), err);
  if (st != Status::kOk) return st;
  cuda_index_k::CudaRunner runner{call.stream, call.device};
  st = cuda_index_k::run_index_k(args, plan, workspace, call.rec, call.abort,
                                 cuda_index_k::path_choice(), runner);
  if (st != Status::kOk) {
    if (err) err->op = args.desc.op;
    return detail::fail(err, st,
                        st == Status::kDeviceError
                            ? "index_k_cuda(): the radix sort failed"
                            : "index_k_cuda(): no kernel for this element size");
  }
  return call.close(err);
}

}  // namespace stridewise
