// OffsetCalculator (32- and 64-bit) against plan_offset at every position, and the fast
// 32-bit divider against / and %.
#include <gtest/gtest.h>

#include <limits>

#include "stridewise/layout.h"
#include "stridewise/offset_calc.h"
#include "test_util.h"

namespace swt {
namespace {

using stridewise::IntDivider;
using stridewise::kMaxRank;
using stridewise::LoopPlan;
using stridewise::OffsetCalculator;
using stridewise::plan_loop;
using stridewise::plan_offset;

template <typename I, int D>
void expect_calc_matches(const LoopPlan<3>& p) {
  ASSERT_LE(p.rank, D);
  const OffsetCalculator<3, I, D> calc(p);
  const int ops[2] = {2, 0};  // operand remapping: calculator slot k reads plan operand ops[k]
  const OffsetCalculator<2, I, D> remap(p, ops);
  for (int64_t i = 0; i < p.numel; ++i) {
    const auto o = calc.get(static_cast<I>(i));
    const auto r = remap.get(static_cast<I>(i));
    for (int k = 0; k < 3; ++k)
      ASSERT_EQ(static_cast<int64_t>(o.v[k]), plan_offset(p, k, i))
          << "operand " << k << " at " << i;
    ASSERT_EQ(static_cast<int64_t>(r.v[0]), plan_offset(p, 2, i)) << "remapped at " << i;
    ASSERT_EQ(static_cast<int64_t>(r.v[1]), plan_offset(p, 0, i)) << "remapped at " << i;
  }
}

LoopPlan<3> random_plan(Rng& rng, int rank) {
  std::vector<int64_t> shape(static_cast<size_t>(rank), 1);
  int64_t n = 1;
  for (int d = 0; d < rank; ++d) {
    if (rank > 8 && !coin(rng, 5.0 / rank)) continue;
    shape[d] = rand_int(rng, 1, 4);
    if (n * shape[d] > 2000) shape[d] = 1;
    n *= shape[d];
  }
  std::vector<std::vector<int64_t>> st;
  LayoutOpts o;
  for (int k = 0; k < 3; ++k) st.push_back(random_strides(rng, shape, o));
  const int64_t* sp[3] = {st[0].data(), st[1].data(), st[2].data()};
  return plan_loop<3>(rank, shape.data(), sp, nullptr);
}

TEST(OffsetCalc, MatchesPlanOffsetEverywhere) {
  Rng rng(test_seed() ^ 0x51);
  SCOPED_TRACE("seed " + std::to_string(test_seed()));
  const int ranks[] = {0, 1, 2, 3, 4, 5, 6, 7, 8, 12, 25, 64};
  for (int rank : ranks) {
    for (int rep = 0; rep < 40; ++rep) {
      const LoopPlan<3> p = random_plan(rng, rank);
      ASSERT_TRUE(p.fits_int32);
      expect_calc_matches<uint32_t, kMaxRank>(p);
      expect_calc_matches<int64_t, kMaxRank>(p);
      if (p.rank <= 4) {
        expect_calc_matches<uint32_t, 4>(p);
        expect_calc_matches<int64_t, 4>(p);
      }
      if (p.rank <= 8) expect_calc_matches<uint32_t, 8>(p);
      // both sides of get()'s unroll bound: the largest unrolled capacity and a looped one
      expect_calc_matches<int64_t, stridewise::kUnrolledDims>(p);
      expect_calc_matches<uint32_t, stridewise::kUnrolledDims + 1>(p);
      if (HasFatalFailure()) return;
    }
  }
}

TEST(OffsetCalc, SixtyFourBitOffsetsBeyondTwoToThe31) {
  const int64_t shape[3] = {3, 5, 7};
  const int64_t a[3] = {int64_t{1} << 40, int64_t{1} << 33, 1};
  const int64_t b[3] = {0, int64_t{1} << 31, 3};
  const int64_t c[3] = {35, 7, 1};
  const int64_t* sp[3] = {c, a, b};
  const LoopPlan<3> p = plan_loop<3>(3, shape, sp, nullptr);
  EXPECT_FALSE(p.fits_int32);
  expect_calc_matches<int64_t, 4>(p);
}

void expect_divides(const IntDivider<uint32_t>& div, uint32_t d, uint32_t n) {
  const auto qr = div.divmod(n);
  ASSERT_EQ(qr.div, n / d) << n << " / " << d;
  ASSERT_EQ(qr.mod, n % d) << n << " % " << d;
  ASSERT_EQ(div.div(n), n / d) << n << " / " << d;
}

TEST(OffsetCalc, IntDividerMatchesDivision) {
  constexpr uint32_t kMax = std::numeric_limits<int32_t>::max();  // numerators and divisors < 2^31
  std::vector<uint32_t> divisors = {1,  2,  3,   5,   6,   7,    9,       10,   11,
                                    13, 25, 100, 384, 641, 1000, 6700417, kMax, kMax - 1};
  for (int k = 1; k < 31; ++k) {
    const uint32_t p = 1u << k;
    divisors.insert(divisors.end(), {p, p - 1, p + 1});
  }
  Rng rng(test_seed() ^ 0xD1);
  for (int i = 0; i < 200; ++i) divisors.push_back(static_cast<uint32_t>(rand_int(rng, 1, kMax)));

  for (uint32_t d : divisors) {
    const IntDivider<uint32_t> div(d);
    std::vector<uint32_t> nums = {0, 1, 2, 3, kMax, kMax - 1, kMax - 2, 1u << 30, (1u << 30) - 1};
    for (uint64_t m : {uint64_t{1}, uint64_t{2}, uint64_t{3}, uint64_t{kMax} / d,
                       uint64_t{kMax} / d - 1, uint64_t{kMax} / 2 / d}) {
      for (int64_t delta = -2; delta <= 2; ++delta) {
        const int64_t n = static_cast<int64_t>(m * d) + delta;
        if (n >= 0 && n <= kMax) nums.push_back(static_cast<uint32_t>(n));
      }
    }
    for (int i = 0; i < 300; ++i) nums.push_back(static_cast<uint32_t>(rand_int(rng, 0, kMax)));
    for (uint32_t n : nums) expect_divides(div, d, n);
    if (HasFatalFailure()) return;
  }
  // Dense sweep for small divisors, where most real sizes live.
  for (uint32_t d = 1; d <= 300; ++d) {
    const IntDivider<uint32_t> div(d);
    for (uint32_t n = 0; n < 20000; ++n) expect_divides(div, d, n);
    if (HasFatalFailure()) return;
  }
}

TEST(OffsetCalc, Int64DividerIsPlainDivision) {
  const IntDivider<int64_t> div(int64_t{1} << 33);
  const auto qr = div.divmod((int64_t{5} << 33) + 17);
  EXPECT_EQ(qr.div, 5);
  EXPECT_EQ(qr.mod, 17);
}

}  // namespace
}  // namespace swt
