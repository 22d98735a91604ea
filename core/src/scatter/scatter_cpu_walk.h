// Internals of the CPU scatter (scatter_cpu.cpp, scatter_cpu_segments.cpp): the byte-stride
// walk over a LoopPlan, element loads and stores, and the job every pass reads.
#pragma once

#include <atomic>
#include <cstdint>
#include <cstring>
#include <limits>
#include <type_traits>
#include <vector>

#include "common/cpu_common.h"
#include "common/elem_arith.h"
#include "stridewise/scatter.h"

namespace stridewise {
namespace cpu_scatter {

using namespace elem;        // NOLINT: the storage tags
using namespace arith;       // NOLINT: Conv, Ops, combine, finish_acc
using namespace cpu_common;  // NOLINT: kGrain, kNoError, load, store, load_index, publish_min

// A LoopPlan in bytes, walked row by row (row = planned dim 0).
template <int N>
struct Walk {
  int rank = 1;
  int64_t sizes[kMaxRank] = {};
  int64_t b[N][kMaxRank] = {};
  char* base[N] = {};

  Walk(const LoopPlan<N>& L, const int64_t (&unit)[N], char* const (&ptr)[N]) {
    rank = L.rank > 0 ? L.rank : 1;
    for (int d = 0; d < rank; ++d) {
      sizes[d] = L.rank > 0 ? L.sizes[d] : 1;
      for (int k = 0; k < N; ++k) b[k][d] = L.rank > 0 ? L.strides[k][d] * unit[k] : 0;
    }
    for (int k = 0; k < N; ++k) base[k] = ptr[k];
  }

  // Calls row(p, pos, n) for each row piece of [begin, end): p[k] is operand k's address of
  // position `pos`, n elements follow along dim 0. Stops when row returns false.
  template <typename F>
  void rows(int64_t begin, int64_t end, F&& row) const {
    int64_t coord[kMaxRank];
    char* p[N];
    for (int k = 0; k < N; ++k) p[k] = base[k];
    int64_t rest = begin;
    for (int d = 0; d < rank; ++d) {
      coord[d] = rest % sizes[d];
      rest /= sizes[d];
      for (int k = 0; k < N; ++k) p[k] += coord[d] * b[k][d];
    }
    int64_t pos = begin;
    for (;;) {
      const int64_t n = std::min(sizes[0] - coord[0], end - pos);
      if (!row(p, pos, n)) return;
      pos += n;
      if (pos >= end) return;
      for (int k = 0; k < N; ++k) p[k] -= coord[0] * b[k][0];
      coord[0] = 0;
      for (int d = 1; d < rank; ++d) {
        for (int k = 0; k < N; ++k) p[k] += b[k][d];
        if (++coord[d] < sizes[d]) break;
        for (int k = 0; k < N; ++k) p[k] -= sizes[d] * b[k][d];
        coord[d] = 0;
      }
    }
  }
};

// f(std::integral_constant<int, E>) for element size `bytes` (1, 2, 4, 8, 16); null otherwise.
template <typename F>
RangeFn by_elem_size(int bytes, F&& f) {
  switch (bytes) {
    case 1:
      return f(std::integral_constant<int, 1>{});
    case 2:
      return f(std::integral_constant<int, 2>{});
    case 4:
      return f(std::integral_constant<int, 4>{});
    case 8:
      return f(std::integral_constant<int, 8>{});
    case 16:
      return f(std::integral_constant<int, 16>{});
    default:
      return nullptr;
  }
}

// Where src's elements start: the value scalar (every src stride is 0 then) or src's data.
inline char* src_base(const ScatterArgs& a) {
  return a.has_value ? const_cast<char*>(reinterpret_cast<const char*>(a.value))
                     : static_cast<char*>(a.src.data);
}

// src's scale (index_add's alpha) as the accumulating kernels apply it.
template <typename T>
SrcScale<T> src_scale(const ScatterArgs& a) {
  T alpha;
  std::memcpy(&alpha, a.alpha, sizeof alpha);
  return {a.has_alpha, Conv<T>::load(alpha)};
}

struct Segments;

struct Job {
  const ScatterArgs* args;
  const ScatterPlan* plan;
  bool i64 = true;
  int esize = 0;
  std::atomic<int64_t> first_bad{kNoError};
  const Segments* segments = nullptr;       // set when the segment path runs
  const LoopPlan<1>* index_plan = nullptr;  // the validation walk
};

// The segment path (scatter_cpu_segments.cpp), for an index shared by every line (stride 0
// on every dim but dim, 1-D included): the line_len index values counting-sorted by target
// (stable: equal targets stay in index order), and each line's out and src byte offsets.
// Targets are then split among threads; a target's lines are combined position by position
// along contiguous rows, in index order: bitwise the line walk's result.
struct Segments {
  std::vector<int64_t> start;  // out_dim_size + 1: target v's positions are order[start[v]..)
  std::vector<int64_t> order;  // line_len positions
  std::vector<int64_t> out_off, src_off;  // per line, bytes
  bool contiguous = false;  // out_off[l] == src_off[l] == l * element size for every line
};

// Builds *s when the segment path applies and pays (shared index, line_len >= 2, bounded
// memory); false otherwise. Index values must have been validated.
bool build_segments(const Job& j, Segments* s);

// The range function over targets [begin, end) for this call's dtype and combine.
RangeFn pick_segment_kernel(const ScatterArgs& a);

}  // namespace cpu_scatter
}  // namespace stridewise
