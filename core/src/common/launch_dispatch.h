// The one offset-width / rank dispatcher every CUDA family launches through (host side, no
// runtime calls): f(Tag<I>, std::integral_constant<int, D>) with I = uint32_t when every
// offset the launch forms fits 31 bits (the 32-bit fast path), else int64_t, and D the
// smallest OffsetCalculator capacity among the family's buckets that holds `rank` dims.
//
// Contract: the top bucket is kMaxRank (64) for every family, checked at compile time, so no
// launch refuses a rank <= kMaxRank (a rank limit below the layout algebra's was the bug class
// of the project's founding seed). A family picks its lower buckets for compile time: each
// bucket instantiates every kernel of the launch once per offset type.
#pragma once

#include <type_traits>

#include "common/kernel_common.h"
#include "stridewise/status.h"
#include "stridewise/view.h"  // kMaxRank

namespace stridewise {
namespace cuda_common {

// The dims buckets of one family, ascending, the last kMaxRank.
template <int... Dims>
struct DimBuckets {};

namespace detail_dispatch {

template <typename F, int First, int... Rest>
Status with_dims(int rank, F& f) {
  if constexpr (sizeof...(Rest) == 0) {
    static_assert(First == kMaxRank, "the top bucket must be kMaxRank: no rank <= 64 refused");
    return f(std::integral_constant<int, First>{});
  } else {
    static_assert(First < kMaxRank, "buckets ascend to kMaxRank");
    if (rank <= First) return f(std::integral_constant<int, First>{});
    return with_dims<F, Rest...>(rank, f);
  }
}

}  // namespace detail_dispatch

// f(std::integral_constant<int, D>) for the smallest bucket D >= rank (the top one above it).
template <int... Dims, typename F>
Status with_dims(DimBuckets<Dims...>, int rank, F&& f) {
  return detail_dispatch::with_dims<F, Dims...>(rank, f);
}

// f(Tag<I>, std::integral_constant<int, D>): the offset type, then the capacity.
template <int... Dims, typename F>
Status with_offsets(DimBuckets<Dims...> buckets, bool u32, int rank, F&& f) {
  auto dims = [&](auto it) { return with_dims(buckets, rank, [&](auto d) { return f(it, d); }); };
  return u32 ? dims(Tag<uint32_t>{}) : dims(Tag<int64_t>{});
}

}  // namespace cuda_common
}  // namespace stridewise
