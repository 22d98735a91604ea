// Loop-nest planning; see layout.h for the contract.
#include "stridewise/layout.h"

#include <algorithm>
#include <cstdlib>
#include <limits>

namespace stridewise {
namespace {

constexpr int64_t kInt32Max = std::numeric_limits<int32_t>::max();

// True when planned dim a should move faster than dim b: smaller stride in operand 0,
// then operand 1, ... A stride of 0 (broadcast) says nothing about memory order for that
// operand, so it is skipped in the comparison. Ties keep the original (row-major) order.
template <int N>
bool faster(const int64_t* const* strides, int a, int b) {
  for (int k = 0; k < N; ++k) {
    const int64_t sa = strides[k][a], sb = strides[k][b];
    if (sa == 0 || sb == 0) continue;
    if (sa != sb) return sa < sb;
  }
  return a > b;  // later logical dims move faster in row-major order
}

}  // namespace

template <int N>
LoopPlan<N> plan_loop(int rank, const int64_t* shape, const int64_t* const* strides,
                      const int64_t* extra_extent) {
  LoopPlan<N> p;
  p.numel = 1;
  for (int d = 0; d < rank; ++d) p.numel *= shape[d];

  // 1. drop size-1 dims; an empty shape keeps nothing to iterate.
  int dims[kMaxRank];
  int n = 0;
  if (p.numel != 0)
    for (int d = 0; d < rank; ++d)
      if (shape[d] != 1) dims[n++] = d;

  // 2. order fastest first. Insertion sort: stable, n <= 64, and runs once per call.
  for (int i = 1; i < n; ++i) {
    const int cur = dims[i];
    int j = i - 1;
    while (j >= 0 && !faster<N>(strides, dims[j], cur)) {
      dims[j + 1] = dims[j];
      --j;
    }
    dims[j + 1] = cur;
  }

  // 3. merge neighbours that are contiguous for every operand.
  int r = 0;
  for (int i = 0; i < n; ++i) {
    const int d = dims[i];
    bool merge = r > 0;
    for (int k = 0; k < N && merge; ++k)
      merge = strides[k][d] == p.strides[k][r - 1] * p.sizes[r - 1];
    if (merge) {
      p.sizes[r - 1] *= shape[d];
      continue;
    }
    p.sizes[r] = shape[d];
    p.perm[r] = d;
    for (int k = 0; k < N; ++k) p.strides[k][r] = strides[k][d];
    ++r;
  }
  p.rank = r;

  // 4. 32-bit offsets are exact when the position and every reachable offset fit.
  bool fits = p.numel <= kInt32Max;
  for (int k = 0; k < N && fits; ++k) {
    int64_t extent = extra_extent ? extra_extent[k] : 0;
    for (int d = 0; d < r; ++d) extent += (p.sizes[d] - 1) * p.strides[k][d];
    fits = extent >= 0 && extent <= kInt32Max;
  }
  p.fits_int32 = fits;
  return p;
}

namespace {

// Largest power of two <= cap that divides n (1 when n is odd).
int64_t pow2_divisor(int64_t n, int64_t cap) {
  int64_t b = 1;
  while (b * 2 <= cap && n % (b * 2) == 0) b *= 2;
  return b;
}

}  // namespace

template <int N>
LoopPlan<N> block_loop(const LoopPlan<N>& p, const int64_t* want_bytes, const int64_t* elem_bytes,
                       int64_t max_box) {
  if (p.rank < 2) return p;
  // inner[d]: elements of planned dim d that go into the box (1 = the dim stays outside).
  int64_t inner[kMaxRank];
  for (int d = 0; d < p.rank; ++d) inner[d] = 1;
  int order[kMaxRank];  // box dims after dim 0, in the order operands asked for them
  int n_box = 0;
  for (int k = 1; k < N; ++k) {
    if (want_bytes[k] <= 0) continue;
    int f = -1;
    for (int d = 0; d < p.rank; ++d)
      if (p.strides[k][d] != 0 && (f < 0 || p.strides[k][d] < p.strides[k][f])) f = d;
    if (f <= 0 || inner[f] > 1) continue;  // runs along dim 0 already, or taken by another
    const int64_t per_run = want_bytes[k] / (p.strides[k][f] * elem_bytes[k]);
    const int64_t b = per_run >= 2 ? pow2_divisor(p.sizes[f], per_run) : 1;
    if (b < 2) continue;
    inner[f] = b;
    order[n_box++] = f;
  }
  if (n_box == 0 || p.rank + n_box > kMaxRank) return p;  // each inner part adds a dim
  int64_t run0 = p.strides[0][0] > 0 ? want_bytes[0] / (p.strides[0][0] * elem_bytes[0]) : 1;
  inner[0] = p.sizes[0] <= run0 ? p.sizes[0] : pow2_divisor(p.sizes[0], run0);
  // Keep the box within max_box: halve the widest inner part after dim 0's.
  auto box = [&] {
    int64_t b = inner[0];
    for (int i = 0; i < n_box; ++i) b *= inner[order[i]];
    return b;
  };
  while (box() > max_box) {
    int w = order[0];
    for (int i = 1; i < n_box; ++i)
      if (inner[order[i]] > inner[w]) w = order[i];
    if (inner[w] < 2) break;
    inner[w] /= 2;
  }

  LoopPlan<N> q;
  q.numel = p.numel;
  q.fits_int32 = p.fits_int32;
  auto push = [&](int d, int64_t size, int64_t step) {  // step: stride multiplier
    if (size <= 1) return;
    q.sizes[q.rank] = size;
    q.perm[q.rank] = p.perm[d];
    for (int k = 0; k < N; ++k) q.strides[k][q.rank] = p.strides[k][d] * step;
    ++q.rank;
  };
  push(0, inner[0], 1);
  for (int i = 0; i < n_box; ++i) push(order[i], inner[order[i]], 1);
  for (int d = 0; d < p.rank; ++d) push(d, p.sizes[d] / inner[d], inner[d]);
  return q;
}

template <int N>
LoopPlan<N> band_loop(const LoopPlan<N>& p, int64_t band) {
  if (p.rank < 2 || p.rank >= kMaxRank) return p;
  const int64_t b = pow2_divisor(p.sizes[0], band);
  if (b < 2 || b >= p.sizes[0]) return p;
  LoopPlan<N> q = p;
  q.sizes[0] = b;
  q.sizes[p.rank] = p.sizes[0] / b;
  q.perm[p.rank] = p.perm[0];
  for (int k = 0; k < N; ++k) q.strides[k][p.rank] = p.strides[k][0] * b;
  q.rank = p.rank + 1;
  return q;
}

template <int N>
int64_t plan_offset(const LoopPlan<N>& p, int k, int64_t linear) {
  int64_t off = 0;
  for (int d = 0; d < p.rank; ++d) {
    off += (linear % p.sizes[d]) * p.strides[k][d];
    linear /= p.sizes[d];
  }
  return off;
}

int64_t logical_offset(int rank, const int64_t* shape, const int64_t* strides, int64_t linear) {
  int64_t off = 0;
  for (int d = rank - 1; d >= 0; --d) {
    off += (linear % shape[d]) * strides[d];
    linear /= shape[d];
  }
  return off;
}

#define SW_INSTANTIATE_PLAN(N)                                                                     \
  template LoopPlan<N> plan_loop<N>(int, const int64_t*, const int64_t* const*, const int64_t*);   \
  template int64_t plan_offset<N>(const LoopPlan<N>&, int, int64_t);                               \
  template LoopPlan<N> block_loop<N>(const LoopPlan<N>&, const int64_t*, const int64_t*, int64_t); \
  template LoopPlan<N> band_loop<N>(const LoopPlan<N>&, int64_t);
SW_INSTANTIATE_PLAN(1)
SW_INSTANTIATE_PLAN(2)
SW_INSTANTIATE_PLAN(3)
SW_INSTANTIATE_PLAN(4)
SW_INSTANTIATE_PLAN(6)
SW_INSTANTIATE_PLAN(7)
#undef SW_INSTANTIATE_PLAN

}  // namespace stridewise
