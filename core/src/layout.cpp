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

#define SW_INSTANTIATE_PLAN(N)                                                                   \
  template LoopPlan<N> plan_loop<N>(int, const int64_t*, const int64_t* const*, const int64_t*); \
  template int64_t plan_offset<N>(const LoopPlan<N>&, int, int64_t);
SW_INSTANTIATE_PLAN(1)
SW_INSTANTIATE_PLAN(2)
SW_INSTANTIATE_PLAN(3)
SW_INSTANTIATE_PLAN(4)
#undef SW_INSTANTIATE_PLAN

}  // namespace stridewise
