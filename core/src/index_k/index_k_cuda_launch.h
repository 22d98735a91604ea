// The CUDA advanced indexing's launch sequence (host side, no CUDA runtime calls), over a
// Runner that launches each kernel: index_k_cuda.cu's CudaRunner on the GPU, the host
// emulation test's runner on the CPU (core/tests/cuda/test_index_k_emulated.cpp), so the
// test drives this very sequence. A Runner provides, each with the grid it is given:
//   read<U, I, D>(Params, blocks)            check<I, D>(Params, blocks)
//   put<U, I, D>(Params, blocks)             add<T, I, D>(Params, AccOf<T>*, blocks)
//   keys<I, D>(Params, keys, vals, blocks)   sort(SortSpace, n, end_bit) -> buffer 0/1, -1
//   fill_rows<U, I, D>(FillParams, keys, blocks)
//   fill_block<U, I, D>(Params, FillParams, n2, blocks, smem)   one_wave() -> blocks
//   seg_rows<T, kAdd, I, D>(SegParams, blocks)   seg_rows_vec<T, kAdd, V, I, D>(...)
//   seg_flat<T, kAdd, I, D>(SegParams, I n, blocks)
//   sort_temp_bytes(n) -> CUB's temporary bytes for n pairs
#pragma once

#include <algorithm>
#include <cstdint>
#include <type_traits>

#include "common/launch_dispatch.h"
#include "common/sort_space.h"
#include "index_k/index_k_cuda_sorted.h"

namespace stridewise {
namespace cuda_index_k {

// The sorted path's workspace (common/sort_space.h's layout, 8-byte keys and values): two key
// and two value arrays (CUB's DoubleBuffer), then CUB's temporary storage (temp_bytes: the
// runner's size query for n pairs).
struct SortSpace {
  uint64_t* keys[2] = {};
  int64_t* vals[2] = {};
  void* temp = nullptr;
  size_t temp_bytes = 0;
  int64_t total = 0;
};

inline SortSpace sort_space(const IndexKPlan& p, void* base, size_t temp_bytes) {
  SortSpace w;
  const SortLayout l = sort_layout(p.seq.numel, 8, int64_t(temp_bytes));
  w.temp_bytes = temp_bytes;
  char* b = static_cast<char*>(base);
  for (int i = 0; i < 2; ++i) {
    w.keys[i] = reinterpret_cast<uint64_t*>(b ? b + l.keys_at[i] : nullptr);
    w.vals[i] = reinterpret_cast<int64_t*>(b ? b + l.vals_at[i] : nullptr);
  }
  w.temp = b ? b + l.temp_at : nullptr;
  w.total = l.end;
  return w;
}

// Which of the order-free write's sorted fills a call takes; `fill_ok` false keeps every
// call off them (STRIDEWISE_INDEX_K_CUDA_PATH=plain).
inline bool takes_block_fill(const IndexKArgs& a, const IndexKPlan& p, bool fill_ok) {
  return fill_ok && fill_block_path(a, p);
}
inline bool takes_sorted_fill(const IndexKArgs& a, const IndexKPlan& p, bool fill_ok) {
  return fill_ok && fill_rows_path(a, p);
}

// Whether the call sorts its targets first (and so needs sort_space's workspace).
inline bool sorts(const IndexKArgs& a, const IndexKPlan& p, bool fill_ok) {
  return takes_sorted_fill(a, p, fill_ok) || sorted_path(a, p);
}

template <typename Runner>
size_t index_k_workspace_bytes(const IndexKArgs& a, const IndexKPlan& p, bool fill_ok, Runner& r) {
  if (p.loop.numel == 0 || !sorts(a, p, fill_ok)) return 0;
  return static_cast<size_t>(sort_space(p, nullptr, r.sort_temp_bytes(p.seq.numel)).total);
}

// The keys over IndexKPlan::seq (validating: a bad value raises the abort word), then the
// radix sort of the keys; *sel receives the buffer that holds them in order.
template <typename I, int D, typename Runner>
Status sort_keys(const IndexKArgs& args, const IndexKPlan& plan, const SortSpace& w,
                 CudaErrorRecord* rec, Abort abort, Runner& r, int* sel) {
  const Params<I, D> p = make_params<I, D>(args, plan, plan.seq, rec, abort);
  r.template keys<I, D>(p, w.keys[0], w.vals[0],
                        grid_for(plan.seq.numel, int64_t(kThreads) * kUnroll));
  *sel = r.sort(w, plan.seq.numel, key_bits(args));
  return *sel < 0 ? Status::kDeviceError : Status::kOk;
}

// The sorted fill (fill_rows_path): the sorted keys, then one store per (row, key).
template <typename I, int D, typename Runner>
Status launch_fill_rows(const IndexKArgs& args, const IndexKPlan& plan, void* ws,
                        CudaErrorRecord* rec, Abort abort, Runner& r) {
  const SortSpace w = sort_space(plan, ws, r.sort_temp_bytes(plan.seq.numel));
  int sel = 0;
  const Status st = sort_keys<I, D>(args, plan, w, rec, abort, r, &sel);
  if (st != Status::kOk) return st;
  const FillParams<I, D> f = make_fill_params<I, D>(args, plan, abort);
  const unsigned blocks = grid_for(int64_t(f.numel), int64_t(kThreads) * kUnroll);
  const uint64_t* sorted = w.keys[sel];
  return with_unit(int(elem_size(args.self.dtype)), [&](auto ut) {
    r.template fill_rows<typename decltype(ut)::type, I, D>(f, sorted, blocks);
    return Status::kOk;
  });
}

// The block-sorted fill (fill_block_path): one kernel, no workspace, no abort word.
template <typename I, int D, typename Runner>
Status launch_fill_block(const IndexKArgs& args, const IndexKPlan& plan, CudaErrorRecord* rec,
                         Runner& r) {
  const Params<I, D> seq = make_params<I, D>(args, plan, plan.seq, rec, Abort{});
  const FillParams<I, D> f = make_fill_params<I, D>(args, plan, Abort{});
  const int64_t n2 = fill_block_keys(plan);
  const unsigned blocks = static_cast<unsigned>(
      std::min<int64_t>(grid_for(int64_t(f.numel), int64_t(kThreads) * kUnroll), r.one_wave()));
  const size_t smem = size_t(n2) * sizeof(I);
  return with_unit(int(elem_size(args.self.dtype)), [&](auto ut) {
    r.template fill_block<typename decltype(ut)::type, I, D>(seq, f, n2, blocks, smem);
    return Status::kOk;
  });
}

template <typename I, int D, typename Runner>
Status launch_sorted(const IndexKArgs& args, const IndexKPlan& plan, void* ws, CudaErrorRecord* rec,
                     Abort abort, Runner& r) {
  const SortSpace w = sort_space(plan, ws, r.sort_temp_bytes(plan.seq.numel));
  int sel = 0;
  const Status st = sort_keys<I, D>(args, plan, w, rec, abort, r, &sel);
  if (st != Status::kOk) return st;
  const SegParams<I, D> g = make_seg_params<I, D>(args, plan, w.keys[sel], w.vals[sel], abort);
  const int64_t n = plan.seq.numel * plan.row.numel;
  const bool rows = plan.row.numel >= kThreads || !std::is_same<I, uint32_t>::value;
  const int vec = seg_vec_width(args, plan);
  auto go = [&](auto tag, auto add) {
    using T = typename decltype(tag)::type;
    constexpr bool kAdd = decltype(add)::value;
    const unsigned blocks = grid_for(plan.seq.numel, 1);
    if constexpr (sizeof(T) <= 8) {
      if (vec == 16 / int(sizeof(T))) {
        r.template seg_rows_vec<T, kAdd, 16 / int(sizeof(T)), I, D>(g, blocks);
        return Status::kOk;
      }
    }
    if (rows)
      r.template seg_rows<T, kAdd, I, D>(g, grid_for(plan.seq.numel, 1));
    else
      r.template seg_flat<T, kAdd, I, D>(g, I(n), grid_for(n, kThreads));
    return Status::kOk;
  };
  if (!args.desc.accumulates())  // add and mean walk alike (SegParams::mean)
    return with_unit(int(elem_size(args.self.dtype)),
                     [&](auto ut) { return go(ut, std::false_type{}); });
  return elem::with_type(args.self.dtype, [&](auto tag) { return go(tag, std::true_type{}); });
}

// One call's launches. `fill_ok`: the sorted fills allowed (takes_sorted_fill).
template <typename Runner>
Status run_index_k(const IndexKArgs& args, const IndexKPlan& plan, void* ws, CudaErrorRecord* rec,
                   Abort abort, bool fill_ok, Runner& r) {
  const int64_t es = elem_size(args.self.dtype);
  const int rank = std::max({plan.loop.rank, plan.unravel.rank, plan.seq.rank, plan.row.rank});
  return with_offsets(Buckets{}, plan.loop.fits_int32, rank, [&](auto it, auto dims) -> Status {
    using I = typename decltype(it)::type;
    constexpr int D = decltype(dims)::value;
    if (takes_block_fill(args, plan, fill_ok)) return launch_fill_block<I, D>(args, plan, rec, r);
    if (takes_sorted_fill(args, plan, fill_ok))
      return launch_fill_rows<I, D>(args, plan, ws, rec, abort, r);
    if (sorted_path(args, plan)) return launch_sorted<I, D>(args, plan, ws, rec, abort, r);
    const Params<I, D> p = make_params<I, D>(args, plan, plan.loop, rec, abort);
    const unsigned blocks = grid_for(int64_t(p.numel), int64_t(kThreads) * kUnroll);
    if (!writes(args))
      return with_unit(int(es * plan.vec), [&](auto ut) {
        r.template read<typename decltype(ut)::type, I, D>(p, blocks);
        return Status::kOk;
      });
    const Params<I, D> c = make_params<I, D>(args, plan, plan.check, rec, abort);
    r.template check<I, D>(c, grid_for(int64_t(c.numel), int64_t(kThreads) * kUnroll));
    if (args.desc.combine == Combine::kCopy)
      return with_unit(int(es * plan.vec), [&](auto ut) {
        r.template put<typename decltype(ut)::type, I, D>(p, blocks);
        return Status::kOk;
      });
    // An add whose accumulation type is the storage type (the others, and every mean, took the
    // sorted path).
    return elem::with_type(args.self.dtype, [&](auto tag) -> Status {
      using T = typename decltype(tag)::type;
      using A = arith::AccOf<T>;
      if constexpr (std::is_same<A, T>::value)
        r.template add<T, I, D>(p, static_cast<A*>(args.self.data), blocks);
      return Status::kOk;
    });
  });
}

}  // namespace cuda_index_k
}  // namespace stridewise
