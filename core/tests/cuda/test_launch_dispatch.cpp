// The one offset-width / rank dispatcher (common/launch_dispatch.h) with each family's bucket
// list: every rank up to kMaxRank gets a capacity that holds it (no family refuses a rank
// <= 64), the smallest of the family's buckets, and the offset type the 32-bit rule asked for.
// Host only; needs no GPU.
#include <gtest/gtest.h>

#include <cstdint>
#include <type_traits>

#include "gather/gather_cuda_types.h"
#include "index_k/index_k_cuda_impl.h"
#include "scatter/scatter_cuda_impl.h"

namespace swt {
namespace {

using stridewise::kMaxRank;
using stridewise::Status;
namespace cc = stridewise::cuda_common;

template <int... Dims>
void check_buckets(cc::DimBuckets<Dims...> buckets, const char* family) {
  const int list[] = {Dims...};
  for (int rank = 0; rank <= kMaxRank; ++rank)
    for (bool u32 : {true, false}) {
      int got = -1;
      bool got_u32 = false;
      const Status s = cc::with_offsets(buckets, u32, rank, [&](auto it, auto dims) {
        got = decltype(dims)::value;
        got_u32 = std::is_same<typename decltype(it)::type, uint32_t>::value;
        return Status::kOk;
      });
      EXPECT_EQ(s, Status::kOk) << family << " rank " << rank;
      EXPECT_GE(got, rank) << family << " rank " << rank;
      EXPECT_EQ(got_u32, u32) << family << " rank " << rank;
      int want = kMaxRank;  // the smallest bucket holding rank
      for (int d : list)
        if (d >= rank && d < want) want = d;
      EXPECT_EQ(got, want) << family << " rank " << rank;
    }
}

TEST(LaunchDispatch, EveryFamilyTakesEveryRankUpTo64) {
  check_buckets(stridewise::cuda_gather::Buckets{}, "gather");
  check_buckets(stridewise::cuda_scatter::Buckets{}, "scatter");
  check_buckets(stridewise::cuda_index_k::Buckets{}, "index_k");
}

}  // namespace
}  // namespace swt
