// The sorted path's back half, host side (no CUDA runtime calls): from sorted (key, value)
// pairs to the segment kernels of common/segments.h, one sequence for every family. A family
// fills a SegJob after its own keys kernel and the radix sort (scatter: index values and
// positions along dim; index_k: the terms' offsets and the positions' src offsets) and hands it
// to its Runner's `segments(job)`: on the GPU that is run_segments_cuda (segments_cuda.cu, where
// the kernels are instantiated once for every family), in the host emulation tests
// launch_segments over a runner that provides
//   seg_acc<T, V, I, D>(SegArgs, blocks)   seg_fix<T, V, I, D>(SegArgs, blocks)
//   seg_put<U, V, I, D>(SegArgs, units, blocks)
// Accumulating combines run seg_acc then seg_fix (the carry: seg_carry_bytes); copy runs seg_put.
#pragma once

#include <algorithm>
#include <cstdint>
#include <type_traits>

#include "common/elem_types.h"       // with_type
#include "common/launch_dispatch.h"  // with_offsets, DimBuckets
#include "common/segments.h"
#include "stridewise/layout.h"  // LoopPlan

namespace stridewise {
namespace cuda_seg {

// The segment kernels' offset buckets (their instantiations are shared by every family).
using SegBuckets = DimBuckets<4, kMaxRank>;

// f(integral_constant<int, V>) for V = 1 or 16 / B (the only vector widths instantiated).
template <int B, typename F>
Status with_vec(int v, F&& f) {
  if constexpr (B <= 8 && 16 % B == 0) {
    if (v == 16 / B) return f(std::integral_constant<int, 16 / B>{});
  }
  if (v != 1) return Status::kUnsupported;
  return f(std::integral_constant<int, 1>{});
}

inline int64_t seg_chunks(int64_t n) {
  return ceil_div(n, kSegChunk);
}

// Bytes of the accumulation type (common/elem_arith.h): 4 for float16/bfloat16 (float32) and
// for bool and 1-/2-byte integers (int32); the element size otherwise.
inline int acc_bytes(DType t) {
  return elem_size(t) < 4 ? 4 : elem_size(t);
}

// Whether an accumulating write through shared keys pays for the sort (every family's rule in
// fast mode; deterministic mode sorts regardless): at least kSegMinElems elements in all and
// at least kSegMinLines lines (elements per sorted key). Below that, one atomic per element.
// First estimates (the sort of n keys costs about as much as reading n * kSegMinLines / 8
// elements); the H200's figures beside them are in docs/bench_scatter.md and docs/bench_adv.md.
constexpr int64_t kSegMinElems = int64_t(1) << 20;
constexpr int64_t kSegMinLines = 32;
inline bool seg_pays(int64_t elems, int64_t lines) {
  return elems >= kSegMinElems && lines >= kSegMinLines;
}

// The carry workspace of an accumulating job: two pieces per (chunk, line).
inline int64_t seg_carry_bytes(int64_t n, int64_t lines, DType t) {
  return seg_chunks(n) * 2 * lines * acc_bytes(t);
}

// One call of the back half. The operands' combine and include_self decide the fold; `copy`
// jobs (combine kCopy) move `units` units of `unit` bytes per element.
struct SegJob {
  Operands ops;
  DType dtype = DType::kFloat32;  // the elements' (accumulating jobs)
  int unit = 0, units = 1;        // copy jobs
  LoopPlan<3> lines;              // the lines' (out, -, src) offsets (kSegOut, kSegSrc)
  bool u32 = false;               // every offset the job forms fits 31 bits
  int64_t out_dim_stride = 0, src_dim_stride = 0;
  int64_t size = 0;  // valid keys are [0, size)
  const void* keys = nullptr;
  const void* vals = nullptr;
  bool wide = false;  // keys uint64 and values int64, else uint32 and int32
  // The values are the source elements (SegArgs::src_sorted): accumulating jobs of one line
  // whose element fits the value's slot (4 bytes, or 8 when wide).
  bool src_sorted = false;
  int64_t n = 0;  // sorted pairs
  void* carry = nullptr;
  int v = 1;  // lines per thread (the family's vector rule: 1 or 16 / element bytes)
  Abort abort;
};

template <typename Runner>
Status launch_segments(const SegJob& j, Runner& runner) {
  const bool acc = j.ops.combine != Combine::kCopy;
  return with_offsets(SegBuckets{}, j.u32, j.lines.rank, [&](auto it, auto dims) {
    using I = typename decltype(it)::type;
    constexpr int D = decltype(dims)::value;
    SegArgs<I, D> p{};
    static_cast<Operands&>(p) = j.ops;
    p.keys = j.keys;
    p.vals = j.vals;
    p.wide = j.wide;
    p.n = j.n;
    p.chunk = kSegChunk;
    p.chunks = seg_chunks(j.n);
    p.calc = OffsetCalculator<3, I, D>(j.lines);
    p.lines = j.lines.numel;
    // Lines one vector apart (v > 1) are read whole by a tile; otherwise tiles of one warp,
    // tile-major, keep the src columns in use at once small enough for L2 (SegArgs).
    p.tile_major = j.v == 1;
    const int64_t groups = ceil_div(j.lines.numel, j.v);  // threads per chunk
    const int64_t max_tile = p.tile_major ? 32 : kThreads;
    p.tile_threads = 1;
    while (p.tile_threads < groups && p.tile_threads < max_tile) p.tile_threads *= 2;
    p.tiles = ceil_div(groups, p.tile_threads);
    p.out_dim_stride = static_cast<I>(j.out_dim_stride);
    p.src_dim_stride = static_cast<I>(j.src_dim_stride);
    p.src_sorted = j.src_sorted && acc && j.lines.numel == 1 && j.v == 1 &&
                   elem_size(j.dtype) <= (j.wide ? 8 : 4);
    if (j.src_sorted && !p.src_sorted) return Status::kUnsupported;  // a family's planning bug
    p.size = j.size;
    p.carry = acc ? j.carry : nullptr;
    p.abort = j.abort;
    const unsigned blocks = static_cast<unsigned>(std::max<int64_t>(
        1, std::min(ceil_div(p.chunks * p.tiles, kThreads / p.tile_threads), kMaxBlocks)));
    if (!acc)
      return with_unit(j.unit, [&](auto ut) {
        using U = typename decltype(ut)::type;
        return with_vec<sizeof(U)>(j.v, [&](auto vv) {
          runner.template seg_put<U, decltype(vv)::value, I, D>(p, j.units, blocks);
          return Status::kOk;
        });
      });
    return with_type(j.dtype, [&](auto tt) {
      using T = typename decltype(tt)::type;
      return with_vec<sizeof(T)>(j.v, [&](auto vv) {
        runner.template seg_acc<T, decltype(vv)::value, I, D>(p, blocks);
        runner.template seg_fix<T, decltype(vv)::value, I, D>(p, blocks);
        return Status::kOk;
      });
    });
  });
}

// The GPU's back half (segments_cuda.cu): launch_segments over the kernels, on `stream`.
Status run_segments_cuda(const SegJob& job, void* stream);

}  // namespace cuda_seg
}  // namespace stridewise
