// The CUDA scatter's segment path, for calls whose lines (scatter.h) all share one index
// sequence: the index has stride 0 (or size 1) on every dim but `dim`, so lines differ only
// in their out and src offsets (PyG's aggregation over an expanded index, the MoE combine,
// any 1-D scatter). Instead of one atomic per element (or, deterministic, one thread walking
// each line), on the call's stream, gated by the abort word:
//  1. sort_keys: keys[i] = index value of step i, vals[i] = i (i in [0, line_len));
//  2. cub::DeviceRadixSort::SortPairs (a DoubleBuffer over two key and two value arrays in
//     the workspace; stable, so equal keys keep index order), bits [0, end_bit);
//  3. the sorted path's back half (common/segments_launch.h): seg_acc + seg_fix (accumulating
//     combines) or seg_put (copy), fixed chunks of sorted positions, one write per (segment,
//     line), no atomics.
// This file: the selection rule, the sort's shape, step 1 and the sort's arguments.
//
// Host and device compilable (the host emulation test runs these bodies); no __global__
// code and no CUDA runtime calls. The launches are in scatter_cuda_dispatch.h (Launcher::
// sorted), the kernels and the CUB call in scatter_cuda.cu.
#pragma once

#include <cstdint>
#include <string>

#include "common/segments_launch.h"
#include "scatter/scatter_cuda_impl.h"
#include "stridewise/scatter.h"

namespace stridewise {
namespace cuda_scatter {

using namespace cuda_seg;  // NOLINT: SegArgs, SegJob, the chunk and vector rules

// The lines' calculator of the sorted path is ScatterPlan::lines.
static_assert(int(kSegOut) == int(kScatterOut) && int(kSegSrc) == int(kScatterSrc),
              "the sorted path reads ScatterPlan::lines' out and src offsets");

// Which path run_scatter takes where several could run. kAuto: the rules of sort_shape and
// tile_shape (scatter_cuda_tile.h); kNever: neither, the atomics or lines kernels (tests,
// benchmarks: the reference path); kAlways: the segment path whenever the index is shared
// (tests); kTile: the tile path whenever it can take the call, else the atomics (tests);
// kBins: the bins path (scatter_cuda_bins.h) whenever it can take the call, else the atomics;
// kBinsSplit: the same, lines cut into chunks of 3 steps (tests: the flush by atomics).
enum class PathChoice : int { kAuto, kNever, kAlways, kTile, kBins, kBinsSplit };

// STRIDEWISE_SCATTER_CUDA_PATH's values: auto | plain (kNever) | segments (kAlways) | tile |
// bins | bins_split.
// False (and *c untouched) for anything else.
inline bool parse_path_choice(const char* s, PathChoice* c) {
  const std::string v = s ? s : "";
  if (v.empty() || v == "auto")
    *c = PathChoice::kAuto;
  else if (v == "plain")
    *c = PathChoice::kNever;
  else if (v == "segments")
    *c = PathChoice::kAlways;
  else if (v == "tile")
    *c = PathChoice::kTile;
  else if (v == "bins")
    *c = PathChoice::kBins;
  else if (v == "bins_split")
    *c = PathChoice::kBinsSplit;
  else
    return false;
  return true;
}

// Selection rule (kAuto), for a shared index with line_len >= 2:
//  - deterministic: always (the alternative is one thread walking each line);
//  - otherwise for accumulating combines when the sort is paid for (seg_pays, the rule the
//    k-index family shares). Below that, one atomic per element; copy (any writer may win) is
//    one plain write per element.

struct SortShape {
  bool use = false;
  int64_t n = 0;      // items: line_len
  int end_bit = 1;    // bits of out_dim_size - 1 (at least 1)
  bool wide = false;  // keys uint64 and positions int64, else uint32 and int32
  int64_t lines = 0;  // ScatterPlan::lines.numel (the carry's width)
};

// The index is the same sequence for every line.
inline bool index_shared(const ScatterArgs& a) {
  for (int d = 0; d < a.index.rank; ++d)
    if (d != a.dim && a.index.sizes[d] != 1 && a.index.strides[d] != 0) return false;
  return true;
}

inline SortShape sort_shape(const ScatterArgs& a, const ScatterPlan& p, PathChoice choice) {
  SortShape s;
  if (choice != PathChoice::kAuto && choice != PathChoice::kAlways) return s;
  if (p.elems.numel == 0 || p.line_len < 2 || !index_shared(a)) return s;
  if (choice == PathChoice::kAuto && !a.deterministic &&
      (!a.desc.accumulates() || !seg_pays(p.elems.numel, p.lines.numel)))
    return s;
  s.use = true;
  s.n = p.line_len;
  s.end_bit = 1;
  while (s.end_bit < 64 && (uint64_t(p.out_dim_size - 1) >> s.end_bit) != 0) ++s.end_bit;
  s.wide = p.out_dim_size > (int64_t(1) << 32) || p.line_len > kI32Max;
  s.lines = p.lines.numel;
  return s;
}

// ---- step 1: keys and positions -------------------------------------------------------------

struct KeysArgs {
  const void* index;
  bool idx64;
  int64_t index_dim_stride;  // elements; every line's index offset is 0 (shared index)
  int64_t n;
  void* keys;  // uint32 / uint64 (wide)
  void* vals;  // int32 / int64 (wide)
  bool wide;
  Abort abort;
};

// A bad value only becomes a key nobody uses: the later kernels are gated by the abort word
// (and sorted_* never address with a key >= size).
SW_HOST_DEVICE SW_INLINE void sort_keys_thread(const KeysArgs& a, int64_t block, int64_t thread,
                                               int64_t grid) {
  for (int64_t i = block * kThreads + thread; i < a.n; i += grid * kThreads) {
    const int64_t v = load_index(a.index, i * a.index_dim_stride, a.idx64);
    if (a.wide) {
      static_cast<uint64_t*>(a.keys)[i] = static_cast<uint64_t>(v);
      static_cast<int64_t*>(a.vals)[i] = i;
    } else {
      static_cast<uint32_t*>(a.keys)[i] = static_cast<uint32_t>(v);
      static_cast<int32_t*>(a.vals)[i] = static_cast<int32_t>(i);
    }
  }
}

// ---- step 2: the sort (CUB on the device, std::stable_sort in the host emulation) ----------

struct SortArgs {
  void* temp;  // CUB's temporary storage
  size_t temp_bytes;
  void* keys[2];  // keys[0], vals[0]: sort_keys' output; the sorted pair ends in keys[sel]
  void* vals[2];
  SortShape shape;
};

// Internal (tests, benchmarks): scatter_cuda_workspace_bytes and scatter_cuda with the sorted
// path's choice given (scatter_cuda itself uses kAuto). Defined in scatter_cuda.cu.
size_t scatter_cuda_workspace_bytes_with(const ScatterArgs& args, const ScatterPlan& plan,
                                         PathChoice choice);
Status scatter_cuda_with(const ScatterArgs& args, const ScatterPlan& plan, void* workspace,
                         size_t workspace_bytes, void* stream, ErrorDetail* err, PathChoice choice);

}  // namespace cuda_scatter
}  // namespace stridewise
