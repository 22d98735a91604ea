// The CUDA scatter's launch helpers (host side): the type and offset-width dispatchers, the
// workspace layout (ws_layout; its parts are described in scatter_cuda_dispatch.h), grid
// sizes and the workspace's scatter plan. Used by the launch sequence in
// scatter_cuda_dispatch.h; no CUDA runtime calls.
#pragma once

#include <algorithm>
#include <cstdint>
#include <type_traits>

#include "common/sort_space.h"
#include "scatter/scatter_cuda_sorted.h"
#include "stridewise/layout.h"
#include "stridewise/scatter.h"

namespace stridewise {
namespace cuda_scatter {

// Where the workspace parts lie; total 0 when the call needs none.
struct WsLayout : SortLayout {
  bool needed = false;
  bool counts = false;
  int64_t count_at = 0;  // bytes from the start
  int64_t total = 0;
  bool sorted = false;  // the sorted path's parts instead: the SortLayout base, then the carry
  SortShape sort;
  int64_t carry_at = 0;
  int64_t shadow_at = 0;  // the bins path's index shadow (scatter_cuda_bins.h), after the rest
  int64_t shadow_bytes = 0;
};

// `sort`: the call's sort_shape; sort_temp: CUB's temporary bytes for it.
inline WsLayout ws_layout(const ScatterArgs& a, const SortShape& sort = {}, int64_t sort_temp = 0) {
  WsLayout w;
  if (sort.use) {
    w.needed = w.sorted = true;
    w.sort = sort;
    static_cast<SortLayout&>(w) = sort_layout(sort.n, sort.wide ? 8 : 4, sort_temp);
    w.carry_at = w.end;
    const int64_t carry =
        a.desc.accumulates() ? seg_carry_bytes(sort.n, sort.lines, a.out.dtype) : 0;
    w.total = w.carry_at + align256(carry);
    return w;
  }
  const Combine c = a.desc.combine;
  if (c == Combine::kCopy) return w;
  const bool low = acc_bytes(a.out.dtype) != elem_size(a.out.dtype);  // narrow: int32/float32
  w.counts = c == Combine::kMean || !a.desc.include_self;
  w.needed = low || w.counts;
  if (!w.needed) return w;
  const int64_t n = a.out.numel();
  w.count_at = align256(n * acc_bytes(a.out.dtype));
  w.total = w.count_at + (w.counts ? align256(n * 4) : 0);
  return w;
}

// The atomics kernel's plan (ScatterPlan::elems order: the target's fastest dim first)
// re-ordered so that consecutive positions stay within one cache line of the target's rows:
// when planned dim 0 is contiguous in the target (operand 0) and is not the scatter dim
// (original dim `dim`), it is split into an inner part of `line_elems` target elements (a
// power of two dividing it, at least 2) and an outer part, and the scatter dim moves between
// them. A warp then adds whole lines to the rows its index values pick, and the blocks
// running at once touch a few narrow columns of the target, which L2 holds while their
// lines fill; in plan order each add to a random row was a partial line of its own
// (ATen's kernel does that: 1.6 ms for (64,4096,1024) float32 along dim 1 on the H200).
// Returns l itself when that does not apply. The same tuples either way (the tests check).
inline LoopPlan<3> interleave_target(const LoopPlan<3>& l, int dim, int64_t line_elems) {
  int pj = -1;
  for (int d = 1; d < l.rank; ++d)
    if (l.perm[d] == dim && l.strides[0][d] == 0) pj = d;
  if (pj < 0 || l.rank + 1 > kMaxRank || l.strides[0][0] != 1) return l;
  int64_t inner = 1;
  while (inner * 2 <= line_elems && l.sizes[0] % (inner * 2) == 0) inner *= 2;
  if (inner < 2 || inner == l.sizes[0]) return l;
  LoopPlan<3> w = l;
  auto put = [&](int at, int from, int64_t size, int64_t mul) {
    w.sizes[at] = size;
    w.perm[at] = l.perm[from];
    for (int k = 0; k < 3; ++k) w.strides[k][at] = l.strides[k][from] * mul;
  };
  put(0, 0, inner, 1);
  put(1, pj, l.sizes[pj], 1);
  put(2, 0, l.sizes[0] / inner, inner);
  int at = 3;
  for (int d = 1; d < l.rank; ++d)
    if (d != pj) put(at++, d, l.sizes[d], 1);
  w.rank = l.rank + 1;
  return w;
}

// Dense strides over out's shape in out's memory order (largest out stride outermost).
inline void ws_strides(const StridedView& out, int64_t* st) {
  int order[kMaxRank];
  for (int d = 0; d < out.rank; ++d) order[d] = d;
  std::stable_sort(order, order + out.rank,
                   [&](int x, int y) { return out.strides[x] > out.strides[y]; });
  int64_t acc = 1;
  for (int i = out.rank - 1; i >= 0; --i) {
    st[order[i]] = acc;
    acc *= out.sizes[order[i]];
  }
}

// A (target, index, src) plan like ScatterPlan::elems (lines: sizes[dim] = 1) with the
// workspace as operand 0.
inline LoopPlan<3> ws_scatter_plan(const ScatterArgs& a, const ScatterPlan& p, const int64_t* wst,
                                   bool lines) {
  const int r = a.index.rank;
  int64_t sizes[kMaxRank] = {}, t[kMaxRank] = {}, s[kMaxRank] = {};
  for (int d = 0; d < r; ++d) {
    sizes[d] = lines && d == p.dim ? (a.index.sizes[d] == 0 ? 0 : 1) : a.index.sizes[d];
    t[d] = d == p.dim ? 0 : wst[d];
    s[d] = a.has_value ? 0 : a.src.strides[d];
  }
  const int64_t* strides[3] = {t, a.index.strides, s};
  int64_t extra[3] = {0, 0, 0};
  if (r > 0 && p.out_dim_size > 0) extra[0] = (p.out_dim_size - 1) * wst[p.dim];
  if (lines && p.line_len > 0) {
    extra[1] = (p.line_len - 1) * p.index_dim_stride;
    extra[2] = (p.line_len - 1) * p.src_dim_stride;
  }
  return plan_loop<3>(r, sizes, strides, extra);
}

}  // namespace cuda_scatter
}  // namespace stridewise
