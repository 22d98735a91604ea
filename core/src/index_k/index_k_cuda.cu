// CUDA advanced indexing: the contract is in index_k.h, the per-thread bodies in
// index_k_cuda_impl.h. This file holds the __global__ wrappers, the launch and the checks.
//
// A call is one kernel for a read; for a write: a validation kernel (raises the call's abort
// word on a bad value), then the copy or atomic kernel, which writes nothing once the word is
// raised. An order-free write whose index every row shares takes a sorted fill: up to 4096 index
// elements the block-sorted fill (one kernel: every block checks and sorts the keys in shared
// memory, then stores), beyond that keys, CUB's sort, then a store per (row, sorted key). The
// sorted path (every mean; the narrow types' adds; deterministic writes that may meet duplicates):
// keys (validating), CUB's stable radix sort, then, per element written, its first writer walks the
// run in index order (a block per sorted position for long rows, a thread per (position, row
// element) otherwise). No host synchronization unless CudaCheckMode::kSync.
#include <cuda_runtime.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <cstring>
#include <cub/device/device_radix_sort.cuh>
#include <type_traits>

#include "common/cuda_call.h"
#include "common/cuda_report.cuh"
#include "common/cuda_status.cuh"
#include "index_k/index_k_cuda_sorted.h"
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

template <typename I, int D>
__global__ void __launch_bounds__(kThreads)
    keys_kernel(const Params<I, D> a, uint64_t* keys, int64_t* vals) {
  with_report(a, [&](Bad& bad) {
    keys_thread(a, keys, vals, I(blockIdx.x), I(threadIdx.x), I(gridDim.x), bad);
  });
}

// Rows (row length >= kThreads): a block per sorted position; a head's threads split its row.
template <typename T, bool kAdd, typename I, int D>
__global__ void __launch_bounds__(kThreads) seg_rows_kernel(const SegParams<I, D> a) {
  if (aborted(a.abort)) return;
  for (int64_t i = blockIdx.x; i < a.n_seq; i += gridDim.x) {
    int64_t end = 0;
    if (!seg_head(a, i, &end)) continue;  // the same answer for the whole block
    for (int64_t r = threadIdx.x; r < a.n_row; r += kThreads) seg_walk<T, kAdd>(a, i, end, I(r));
  }
}

// The same over units of V elements (seg_vec_width).
template <typename T, bool kAdd, int V, typename I, int D>
__global__ void __launch_bounds__(kThreads) seg_rows_vec_kernel(const SegParams<I, D> a) {
  if (aborted(a.abort)) return;
  const int64_t units = a.n_row / V;
  for (int64_t i = blockIdx.x; i < a.n_seq; i += gridDim.x) {
    int64_t end = 0;
    if (!seg_head(a, i, &end)) continue;
    for (int64_t u = threadIdx.x; u < units; u += kThreads)
      seg_walk_vec<T, kAdd, V>(a, i, end, I(u));
  }
}

// Short rows: a thread per (sorted position, row position), in I arithmetic.
template <typename T, bool kAdd, typename I, int D>
__global__ void __launch_bounds__(kThreads) seg_flat_kernel(const SegParams<I, D> a, I n) {
  if (aborted(a.abort)) return;
  for (I t = I(blockIdx.x) * kThreads + threadIdx.x; t < n; t += I(gridDim.x) * kThreads) {
    const DivMod<I> ir = a.row_div.divmod(t);
    seg_at<T, kAdd>(a, int64_t(ir.div), ir.mod);
  }
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

// STRIDEWISE_INDEX_K_CUDA_PATH (auto|plain), read once: "plain" keeps order-free writes off the
// sorted fill, for benchmarks that measure what the sort buys. Any other value is auto, never
// an error on a user's call.
bool sorted_fill_allowed() {
  static const bool allowed = [] {
    const char* v = std::getenv("STRIDEWISE_INDEX_K_CUDA_PATH");
    return v == nullptr || std::strcmp(v, "plain") != 0;
  }();
  return allowed;
}

bool takes_sorted_fill(const IndexKArgs& a, const IndexKPlan& p) {
  return sorted_fill_allowed() && fill_rows_path(a, p);
}

bool takes_block_fill(const IndexKArgs& a, const IndexKPlan& p) {
  return sorted_fill_allowed() && fill_block_path(a, p);
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

// Whether the call sorts its targets first (and so needs sort_space's workspace).
bool sorts(const IndexKArgs& a, const IndexKPlan& p) {
  return takes_sorted_fill(a, p) || sorted_path(a, p);
}

template <typename F>
Status with_offsets(bool u32, int rank, F&& f) {
  if (rank > 25) return Status::kUnsupported;
  auto dims = [&](auto it) {
    if (rank <= 6) return f(it, std::integral_constant<int, 6>{});
    return f(it, std::integral_constant<int, 25>{});
  };
  return u32 ? dims(Tag<uint32_t>{}) : dims(Tag<int64_t>{});
}

// The sorted path's workspace: two key and two value arrays (CUB's DoubleBuffer), then CUB's
// temporary storage.
struct SortSpace {
  uint64_t* keys[2] = {};
  int64_t* vals[2] = {};
  void* temp = nullptr;
  size_t temp_bytes = 0;
  int64_t total = 0;
};

SortSpace sort_space(const IndexKPlan& p, void* base) {
  SortSpace w;
  const int64_t n = p.seq.numel;
  cub::DoubleBuffer<uint64_t> k(nullptr, nullptr);
  cub::DoubleBuffer<int64_t> v(nullptr, nullptr);
  cub::DeviceRadixSort::SortPairs(nullptr, w.temp_bytes, k, v, n);  // size query only
  char* b = static_cast<char*>(base);
  const int64_t arr = align256(n * 8);
  for (int i = 0; i < 2; ++i) {
    w.keys[i] = reinterpret_cast<uint64_t*>(b ? b + i * arr : nullptr);
    w.vals[i] = reinterpret_cast<int64_t*>(b ? b + (2 + i) * arr : nullptr);
  }
  w.temp = b ? b + 4 * arr : nullptr;
  w.total = 4 * arr + align256(int64_t(w.temp_bytes));
  return w;
}

// keys_kernel over IndexKPlan::seq (validating: a bad value raises the abort word), then CUB's
// radix sort of the keys; *sorted receives the buffer that holds them in order.
template <typename I, int D>
Status sort_keys(const IndexKArgs& args, const IndexKPlan& plan, const SortSpace& w,
                 CudaErrorRecord* rec, Abort abort, cudaStream_t s, cub::DoubleBuffer<uint64_t>* k,
                 cub::DoubleBuffer<int64_t>* v) {
  const Params<I, D> p = make_params<I, D>(args, plan, plan.seq, rec, abort);
  keys_kernel<I, D><<<grid_for(plan.seq.numel, int64_t(kThreads) * kUnroll), kThreads, 0, s>>>(
      p, w.keys[0], w.vals[0]);
  *k = cub::DoubleBuffer<uint64_t>(w.keys[0], w.keys[1]);
  *v = cub::DoubleBuffer<int64_t>(w.vals[0], w.vals[1]);
  size_t temp_bytes = w.temp_bytes;
  if (cub::DeviceRadixSort::SortPairs(w.temp, temp_bytes, *k, *v, plan.seq.numel, 0, key_bits(args),
                                      s) != cudaSuccess)
    return Status::kDeviceError;
  return Status::kOk;
}

// The sorted fill (fill_rows_path): the sorted keys, then one store per (row, key).
template <typename I, int D>
Status launch_fill_rows(const IndexKArgs& args, const IndexKPlan& plan, void* ws,
                        CudaErrorRecord* rec, Abort abort, cudaStream_t s) {
  const SortSpace w = sort_space(plan, ws);
  cub::DoubleBuffer<uint64_t> k;
  cub::DoubleBuffer<int64_t> v;
  const Status st = sort_keys<I, D>(args, plan, w, rec, abort, s, &k, &v);
  if (st != Status::kOk) return st;
  const FillParams<I, D> f = make_fill_params<I, D>(args, plan, abort);
  const unsigned blocks = grid_for(int64_t(f.numel), int64_t(kThreads) * kUnroll);
  const uint64_t* sorted = k.Current();
  return with_unit(int(elem_size(args.self.dtype)), [&](auto ut) {
    fill_rows_kernel<typename decltype(ut)::type, I, D><<<blocks, kThreads, 0, s>>>(f, sorted);
    return Status::kOk;
  });
}

// The block-sorted fill (fill_block_path): one kernel, no workspace, no abort word.
template <typename I, int D>
Status launch_fill_block(const IndexKArgs& args, const IndexKPlan& plan, int device,
                         CudaErrorRecord* rec, cudaStream_t s) {
  const Params<I, D> seq = make_params<I, D>(args, plan, plan.seq, rec, Abort{});
  const FillParams<I, D> f = make_fill_params<I, D>(args, plan, Abort{});
  const int64_t n2 = fill_block_keys(plan);
  const unsigned blocks = static_cast<unsigned>(
      std::min<int64_t>(grid_for(int64_t(f.numel), int64_t(kThreads) * kUnroll), one_wave(device)));
  const size_t smem = size_t(n2) * sizeof(I);
  return with_unit(int(elem_size(args.self.dtype)), [&](auto ut) {
    fill_block_kernel<typename decltype(ut)::type, I, D><<<blocks, kThreads, smem, s>>>(seq, f, n2);
    return Status::kOk;
  });
}

template <typename I, int D>
Status launch_sorted(const IndexKArgs& args, const IndexKPlan& plan, void* ws, CudaErrorRecord* rec,
                     Abort abort, cudaStream_t s) {
  const SortSpace w = sort_space(plan, ws);
  cub::DoubleBuffer<uint64_t> k;
  cub::DoubleBuffer<int64_t> v;
  const Status st = sort_keys<I, D>(args, plan, w, rec, abort, s, &k, &v);
  if (st != Status::kOk) return st;
  const SegParams<I, D> g = make_seg_params<I, D>(args, plan, k.Current(), v.Current(), abort);
  const int64_t n = plan.seq.numel * plan.row.numel;
  const bool rows = plan.row.numel >= kThreads || !std::is_same<I, uint32_t>::value;
  const int vec = seg_vec_width(args, plan);
  auto go = [&](auto tag, auto add) {
    using T = typename decltype(tag)::type;
    constexpr bool kAdd = decltype(add)::value;
    const unsigned blocks = grid_for(plan.seq.numel, 1);
    if constexpr (sizeof(T) <= 8) {
      if (vec == 16 / int(sizeof(T))) {
        seg_rows_vec_kernel<T, kAdd, 16 / int(sizeof(T)), I, D><<<blocks, kThreads, 0, s>>>(g);
        return Status::kOk;
      }
    }
    if (rows)
      seg_rows_kernel<T, decltype(add)::value, I, D>
          <<<grid_for(plan.seq.numel, 1), kThreads, 0, s>>>(g);
    else
      seg_flat_kernel<T, decltype(add)::value, I, D>
          <<<grid_for(n, kThreads), kThreads, 0, s>>>(g, I(n));
    return Status::kOk;
  };
  if (!args.desc.accumulates())  // add and mean walk alike (SegParams::mean)
    return with_unit(int(elem_size(args.self.dtype)),
                     [&](auto ut) { return go(ut, std::false_type{}); });
  return elem::with_type(args.self.dtype, [&](auto tag) { return go(tag, std::true_type{}); });
}

Status launch(const IndexKArgs& args, const IndexKPlan& plan, void* ws, int device,
              CudaErrorRecord* rec, Abort abort, cudaStream_t s) {
  const int64_t es = elem_size(args.self.dtype);
  const int rank = std::max({plan.loop.rank, plan.unravel.rank, plan.seq.rank, plan.row.rank});
  return with_offsets(plan.loop.fits_int32, rank, [&](auto it, auto dims) -> Status {
    using I = typename decltype(it)::type;
    constexpr int D = decltype(dims)::value;
    if (takes_block_fill(args, plan)) return launch_fill_block<I, D>(args, plan, device, rec, s);
    if (takes_sorted_fill(args, plan)) return launch_fill_rows<I, D>(args, plan, ws, rec, abort, s);
    if (sorted_path(args, plan)) return launch_sorted<I, D>(args, plan, ws, rec, abort, s);
    const Params<I, D> p = make_params<I, D>(args, plan, plan.loop, rec, abort);
    const unsigned blocks = grid_for(int64_t(p.numel), int64_t(kThreads) * kUnroll);
    if (!writes(args))
      return with_unit(int(es * plan.vec), [&](auto ut) {
        read_kernel<typename decltype(ut)::type, I, D><<<blocks, kThreads, 0, s>>>(p);
        return Status::kOk;
      });
    const Params<I, D> c = make_params<I, D>(args, plan, plan.check, rec, abort);
    check_kernel<I, D>
        <<<grid_for(int64_t(c.numel), int64_t(kThreads) * kUnroll), kThreads, 0, s>>>(c);
    if (args.desc.combine == Combine::kCopy)
      return with_unit(int(es * plan.vec), [&](auto ut) {
        put_kernel<typename decltype(ut)::type, I, D><<<blocks, kThreads, 0, s>>>(p);
        return Status::kOk;
      });
    // An add whose accumulation type is the storage type (the others, and every mean, took the
    // sorted path).
    return elem::with_type(args.self.dtype, [&](auto tag) -> Status {
      using T = typename decltype(tag)::type;
      using A = arith::AccOf<T>;
      if constexpr (std::is_same<A, T>::value)
        add_kernel<T, I, D><<<blocks, kThreads, 0, s>>>(p, static_cast<A*>(args.self.data));
      return Status::kOk;
    });
  });
}

}  // namespace
}  // namespace cuda_index_k

size_t index_k_cuda_workspace_bytes(const IndexKArgs& args, const IndexKPlan& plan) {
  if (plan.loop.numel == 0 || !cuda_index_k::sorts(args, plan)) return 0;
  return static_cast<size_t>(cuda_index_k::sort_space(plan, nullptr).total);
}

Status index_k_cuda(const IndexKArgs& args, const IndexKPlan& plan, void* workspace,
                    size_t workspace_bytes, void* stream, ErrorDetail* err) {
  if (err) *err = ErrorDetail{};
  if (plan.loop.numel == 0) return Status::kOk;
  cuda_common::CudaCall call;
  Status st = call.open(stream, cuda_index_k::writes(args), err);
  if (st != Status::kOk) return st;
  st = cuda_index_k::launch(args, plan, workspace, call.device, call.rec, call.abort, call.stream);
  if (st != Status::kOk) {
    if (err) err->op = args.desc.op;
    return detail::fail(err, st, "index_k_cuda(): more than 25 dims after coalescing");
  }
  return call.close(err);
}

}  // namespace stridewise
