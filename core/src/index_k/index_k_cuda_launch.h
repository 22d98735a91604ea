// The CUDA advanced indexing's launch sequence (host side, no CUDA runtime calls), over a
// Runner that launches each kernel: index_k_cuda.cu's CudaRunner on the GPU, the host
// emulation test's runner on the CPU (core/tests/cuda/test_index_k_emulated.cpp), so the
// test drives this very sequence. A Runner provides, each with the grid it is given:
//   read<U, I, D>(Params, blocks)            check<I, D>(Params, blocks)
//   put<U, I, D>(Params, blocks)             add<T, I, D>(Params, AccOf<T>*, blocks)
//   keys<K, Vt, I, D>(Params, keys, vals, payload, blocks)
//   sort(SortSpace, n, end_bit) -> buffer 0/1, -1
//   fill_rows<U, I, D>(FillParams, keys, blocks)
//   fill_block<U, I, D>(Params, FillParams, n2, blocks, smem)   one_wave() -> blocks
//   segments(SegJob) -> Status      the sorted path's back half (common/segments_launch.h)
//   sort_temp_bytes(n) -> CUB's temporary bytes for n pairs (either key width)
#pragma once

#include <algorithm>
#include <cstdint>
#include <limits>
#include <type_traits>

#include "common/launch_dispatch.h"
#include "common/sort_space.h"
#include "index_k/index_k_cuda_sorted.h"

namespace stridewise {
namespace cuda_index_k {

// The sorted path's workspace (common/sort_space.h's layout, keys and values of 8 bytes, or 4
// when `wide` is false: narrow_keys): two key and two value arrays (CUB's DoubleBuffer), then
// CUB's temporary storage (temp_bytes: the runner's size query for n pairs), then
// (`carry_bytes`, an accumulating sorted path) the back half's carry.
struct SortSpace {
  void* keys[2] = {};
  void* vals[2] = {};
  bool wide = true;
  void* temp = nullptr;
  size_t temp_bytes = 0;
  void* carry = nullptr;
  int payload = 0;  // payload_bytes (the sorted path; the fill sorts offsets)
  int64_t total = 0;
};

// The carry an accumulating sorted path needs (0 for copies, so for the sorted fill).
inline int64_t carry_bytes(const IndexKArgs& a, const IndexKPlan& p) {
  if (!a.desc.accumulates()) return 0;
  return cuda_seg::seg_carry_bytes(p.seq.numel, p.row.numel, a.self.dtype);
}

// `wide`: 64-bit keys and values (the sorted fill's; the sorted path's where !narrow_keys).
inline SortSpace sort_space(const IndexKArgs& a, const IndexKPlan& p, bool wide, void* base,
                            size_t temp_bytes) {
  SortSpace w;
  w.wide = wide;
  w.payload = payload_bytes(a, p, wide);  // 0 for copies, so for the sorted fill
  const SortLayout l = sort_layout(p.seq.numel, w.wide ? 8 : 4, int64_t(temp_bytes));
  w.temp_bytes = temp_bytes;
  char* b = static_cast<char*>(base);
  for (int i = 0; i < 2; ++i) {
    w.keys[i] = b ? b + l.keys_at[i] : nullptr;
    w.vals[i] = b ? b + l.vals_at[i] : nullptr;
  }
  w.temp = b ? b + l.temp_at : nullptr;
  w.carry = b ? b + l.end : nullptr;
  w.total = l.end + align256(carry_bytes(a, p));
  return w;
}

// Which of the order-free write's sorted fills a call takes; kPlain keeps every call off them.
inline bool takes_block_fill(const IndexKArgs& a, const IndexKPlan& p, PathChoice c) {
  return c != PathChoice::kPlain && fill_block_path(a, p);
}
inline bool takes_sorted_fill(const IndexKArgs& a, const IndexKPlan& p, PathChoice c) {
  return c != PathChoice::kPlain && fill_rows_path(a, p);
}

// Whether the call sorts its targets first (and so needs sort_space's workspace).
inline bool sorts(const IndexKArgs& a, const IndexKPlan& p, PathChoice c) {
  return takes_sorted_fill(a, p, c) || sorted_path(a, p, c);
}

template <typename Runner>
size_t index_k_workspace_bytes(const IndexKArgs& a, const IndexKPlan& p, PathChoice c, Runner& r) {
  if (p.loop.numel == 0 || !sorts(a, p, c)) return 0;
  const bool wide = takes_sorted_fill(a, p, c) || !narrow_keys(a, p);
  return static_cast<size_t>(sort_space(a, p, wide, nullptr, r.sort_temp_bytes(p.seq.numel)).total);
}

// The keys over IndexKPlan::seq (validating: a bad value raises the abort word), then the
// radix sort of the keys; *sel receives the buffer that holds them in order.
template <typename I, int D, typename Runner>
Status sort_keys(const IndexKArgs& args, const IndexKPlan& plan, const SortSpace& w,
                 CudaErrorRecord* rec, Abort abort, Runner& r, int* sel) {
  const Params<I, D> p = make_params<I, D>(args, plan, plan.seq, rec, abort);
  const unsigned blocks = grid_for(plan.seq.numel, int64_t(kThreads) * kUnroll);
  if (w.wide)
    r.template keys<uint64_t, int64_t, I, D>(p, static_cast<uint64_t*>(w.keys[0]),
                                             static_cast<int64_t*>(w.vals[0]), w.payload, blocks);
  else
    r.template keys<uint32_t, int32_t, I, D>(p, static_cast<uint32_t*>(w.keys[0]),
                                             static_cast<int32_t*>(w.vals[0]), w.payload, blocks);
  *sel = r.sort(w, plan.seq.numel, key_bits(args));
  return *sel < 0 ? Status::kDeviceError : Status::kOk;
}

// The sorted fill (fill_rows_path): the sorted keys, then one store per (row, key).
template <typename I, int D, typename Runner>
Status launch_fill_rows(const IndexKArgs& args, const IndexKPlan& plan, void* ws,
                        CudaErrorRecord* rec, Abort abort, Runner& r) {
  const SortSpace w = sort_space(args, plan, true, ws, r.sort_temp_bytes(plan.seq.numel));
  int sel = 0;
  const Status st = sort_keys<I, D>(args, plan, w, rec, abort, r, &sel);
  if (st != Status::kOk) return st;
  const FillParams<I, D> f = make_fill_params<I, D>(args, plan, abort);
  const unsigned blocks = grid_for(int64_t(f.numel), int64_t(kThreads) * kUnroll);
  const uint64_t* sorted = static_cast<const uint64_t*>(w.keys[sel]);  // wide: wide_keys
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

// The back half's job over the sorted pairs in buffer `sel`: IndexKPlan::row as the lines,
// keys and values as element offsets (strides 1; a key is always a valid offset: a bad value's
// key is 0 and the abort word stops the writes).
inline cuda_seg::SegJob seg_job(const IndexKArgs& args, const IndexKPlan& plan, const SortSpace& w,
                                int sel, Abort abort) {
  cuda_seg::SegJob j;
  const Combine c = args.desc.combine;
  Operands& o = j.ops;
  o.out = args.self.data;
  o.index = nullptr;
  o.src = args.has_value ? nullptr : args.src.data;
  o.idx64 = false;
  o.has_value = args.has_value;
  for (int b = 0; b < 16; ++b) o.value.b[b] = args.value[b];
  o.combine = c == Combine::kMean  ? Combine::kMean
              : c == Combine::kAdd ? Combine::kAdd
                                   : Combine::kCopy;
  o.include_self = c == Combine::kAdd;  // mean: the writers' mean alone (index_k.h)
  o.has_alpha = false;
  o.alpha = Value{};
  j.dtype = args.self.dtype;
  j.unit = int(elem_size(args.self.dtype));
  j.units = 1;
  const LoopPlan<kN>& r = plan.row;
  LoopPlan<3>& l = j.lines;
  l.rank = r.rank;
  l.numel = r.numel;
  l.fits_int32 = r.fits_int32;
  for (int d = 0; d < r.rank; ++d) {
    l.sizes[d] = r.sizes[d];
    l.perm[d] = r.perm[d];
    l.strides[cuda_seg::kSegOut][d] = r.strides[kIkWritten][d];
    l.strides[1][d] = 0;
    l.strides[cuda_seg::kSegSrc][d] = args.has_value ? 0 : r.strides[kIkOther][d];
  }
  j.u32 = plan.loop.fits_int32;
  j.out_dim_stride = 1;
  j.src_dim_stride = 1;
  j.size = std::numeric_limits<int64_t>::max();
  j.keys = w.keys[sel];
  j.vals = w.vals[sel];
  j.wide = w.wide;
  j.src_sorted = w.payload != 0;
  j.n = plan.seq.numel;
  j.carry = w.carry;
  j.v = seg_vec_width(args, plan);
  j.abort = abort;
  return j;
}

template <typename I, int D, typename Runner>
Status launch_sorted(const IndexKArgs& args, const IndexKPlan& plan, void* ws, CudaErrorRecord* rec,
                     Abort abort, Runner& r) {
  const SortSpace w =
      sort_space(args, plan, !narrow_keys(args, plan), ws, r.sort_temp_bytes(plan.seq.numel));
  int sel = 0;
  const Status st = sort_keys<I, D>(args, plan, w, rec, abort, r, &sel);
  if (st != Status::kOk) return st;
  return r.segments(seg_job(args, plan, w, sel, abort));
}

// One call's launches, the paths chosen by `c`.
template <typename Runner>
Status run_index_k(const IndexKArgs& args, const IndexKPlan& plan, void* ws, CudaErrorRecord* rec,
                   Abort abort, PathChoice c, Runner& r) {
  const int64_t es = elem_size(args.self.dtype);
  const int rank = std::max({plan.loop.rank, plan.unravel.rank, plan.seq.rank, plan.row.rank});
  return with_offsets(Buckets{}, plan.loop.fits_int32, rank, [&](auto it, auto dims) -> Status {
    using I = typename decltype(it)::type;
    constexpr int D = decltype(dims)::value;
    if (takes_block_fill(args, plan, c)) return launch_fill_block<I, D>(args, plan, rec, r);
    if (takes_sorted_fill(args, plan, c))
      return launch_fill_rows<I, D>(args, plan, ws, rec, abort, r);
    if (sorted_path(args, plan, c)) return launch_sorted<I, D>(args, plan, ws, rec, abort, r);
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
