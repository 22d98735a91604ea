// Layout algebra: plan_loop<N> must visit exactly the offset tuples of the logical view.
//
// The property is checked over every position (not samples): the multiset of
// (offset_0, ..., offset_{N-1}) over all planned positions equals the multiset over all
// logical positions. Any wrong merge, dropped dim or mixed-up stride changes some tuple.
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <limits>

#include "stridewise/layout.h"
#include "test_util.h"

namespace swt {
namespace {

using stridewise::kMaxRank;
using stridewise::logical_offset;
using stridewise::LoopPlan;
using stridewise::plan_loop;
using stridewise::plan_offset;

constexpr int64_t kI32Max = std::numeric_limits<int32_t>::max();

template <int N>
LoopPlan<N> plan(const std::vector<int64_t>& shape, const std::vector<std::vector<int64_t>>& st,
                 const int64_t* extra = nullptr) {
  const int64_t* sp[N];
  for (int k = 0; k < N; ++k) sp[k] = st[k].data();
  return plan_loop<N>(static_cast<int>(shape.size()), shape.data(), sp, extra);
}

template <int N>
void expect_keeps_offsets(const std::vector<int64_t>& shape,
                          const std::vector<std::vector<int64_t>>& st, const int64_t* extra) {
  SCOPED_TRACE("shape " + shape_str(shape) + " strides0 " + shape_str(st[0]));
  const LoopPlan<N> p = plan<N>(shape, st, extra);
  const int64_t n = numel(shape);
  ASSERT_EQ(p.numel, n);
  ASSERT_GE(p.rank, 0);
  ASSERT_LE(p.rank, kMaxRank);
  if (n == 0) {
    EXPECT_EQ(p.rank, 0);
    return;
  }
  int non1 = 0;
  for (int64_t s : shape) non1 += s != 1;
  EXPECT_LE(p.rank, non1);
  int64_t prod = 1;
  for (int d = 0; d < p.rank; ++d) {
    EXPECT_GT(p.sizes[d], 1) << "planned dim " << d << " should have been dropped";
    ASSERT_GE(p.perm[d], 0);
    ASSERT_LT(p.perm[d], static_cast<int>(shape.size()));
    prod *= p.sizes[d];
  }
  EXPECT_EQ(prod, n);

  std::vector<std::array<int64_t, N>> logical(static_cast<size_t>(n)), planned(logical.size());
  const int r = static_cast<int>(shape.size());
  for (int64_t i = 0; i < n; ++i) {
    for (int k = 0; k < N; ++k) {
      logical[i][k] = logical_offset(r, shape.data(), st[k].data(), i);
      planned[i][k] = plan_offset(p, k, i);
    }
  }
  std::sort(logical.begin(), logical.end());
  std::sort(planned.begin(), planned.end());
  ASSERT_TRUE(logical == planned) << "planned rank " << p.rank;

  // Operand 0 (the written one) is walked in memory order when it has no stride-0 dim.
  bool op0_dense = true;
  for (int d = 0; d < r; ++d) op0_dense &= shape[d] == 1 || st[0][d] != 0;
  if (op0_dense) {
    for (int d = 1; d < p.rank; ++d) EXPECT_LE(p.strides[0][d - 1], p.strides[0][d]);
  }

  bool fits = n <= kI32Max;
  for (int k = 0; k < N; ++k) {
    int64_t ext = extra ? extra[k] : 0;
    for (int d = 0; d < r; ++d) ext += (shape[d] - 1) * st[k][d];
    fits &= ext <= kI32Max;
  }
  EXPECT_EQ(p.fits_int32, fits);
}

// Mostly small sizes; high ranks are mostly size-1 dims so the whole space stays small.
std::vector<int64_t> random_shape(Rng& rng, int rank, int64_t max_numel) {
  for (;;) {
    std::vector<int64_t> s(static_cast<size_t>(rank), 1);
    const bool high = rank > 8;
    for (int d = 0; d < rank; ++d) {
      if (high && !coin(rng, 4.0 / rank)) continue;
      s[d] = coin(rng, 0.03) ? 0 : coin(rng, 0.25) ? 1 : rand_int(rng, 2, high ? 3 : 5);
    }
    if (numel(s) <= max_numel) return s;
  }
}

std::vector<int64_t> any_strides(Rng& rng, const std::vector<int64_t>& shape, bool dense) {
  if (coin(rng, 0.15)) {  // arbitrary strides, including non-mergeable odd ones
    std::vector<int64_t> s(shape.size());
    for (auto& x : s) x = dense ? rand_int(rng, 1, 1000) : rand_int(rng, 0, 1000);
    return s;
  }
  LayoutOpts o;
  o.allow_expand = !dense;
  o.allow_overlap = !dense;
  return random_strides(rng, shape, o);
}

template <int N>
void random_plans(int reps) {
  Rng rng(test_seed() + N);
  SCOPED_TRACE("seed " + std::to_string(test_seed()));
  const int ranks[] = {0, 1, 2, 3, 4, 5, 6, 7, 8, 12, 25, 64};
  for (int rank : ranks) {
    for (int rep = 0; rep < reps; ++rep) {
      const std::vector<int64_t> shape = random_shape(rng, rank, 3000);
      std::vector<std::vector<int64_t>> st;
      for (int k = 0; k < N; ++k) st.push_back(any_strides(rng, shape, k == 0 && coin(rng, 0.7)));
      // Operands that share strides exercise the tie-breaking in the ordering step.
      if (N > 1 && coin(rng, 0.2)) st[N - 1] = st[0];
      int64_t extra[N];
      for (int k = 0; k < N; ++k) extra[k] = coin(rng, 0.3) ? rand_int(rng, 0, 5000) : 0;
      expect_keeps_offsets<N>(shape, st, coin(rng, 0.5) ? extra : nullptr);
      if (::testing::Test::HasFatalFailure()) return;
    }
  }
}

TEST(Layout, RandomPlansKeepEveryOffset1) {
  random_plans<1>(80);
}
TEST(Layout, RandomPlansKeepEveryOffset2) {
  random_plans<2>(80);
}
TEST(Layout, RandomPlansKeepEveryOffset3) {
  random_plans<3>(120);
}
TEST(Layout, RandomPlansKeepEveryOffset4) {
  random_plans<4>(60);
}

// A plan of three operands over `shape`: operand 0 dense (70%) or any strides, the others any.
LoopPlan<3> random_plan3(Rng& rng, const std::vector<int64_t>& shape) {
  std::vector<std::vector<int64_t>> st;
  for (int k = 0; k < 3; ++k) st.push_back(any_strides(rng, shape, k == 0 && coin(rng, 0.7)));
  return plan<3>(shape, st);
}

// q (a reordered walk of p with p's plan positions as operand 3) visits every plan position of
// p once, each with p's offsets for the three operands.
::testing::AssertionResult same_tuples(const LoopPlan<4>& q, const LoopPlan<3>& p) {
  std::vector<char> seen(static_cast<size_t>(p.numel), 0);
  for (int64_t i = 0; i < q.numel; ++i) {
    const int64_t pos = plan_offset(q, 3, i);
    if (pos < 0 || pos >= p.numel || seen[static_cast<size_t>(pos)])
      return ::testing::AssertionFailure()
             << "walk position " << i << ": plan position " << pos << " out of range or seen twice";
    seen[static_cast<size_t>(pos)] = 1;
    for (int k = 0; k < 3; ++k)
      if (plan_offset(q, k, i) != plan_offset(p, k, pos))
        return ::testing::AssertionFailure() << "walk position " << i << " operand " << k;
  }
  return ::testing::AssertionSuccess();
}

// block_loop reorders a plan without changing what any position means: with a passive
// operand holding each dim's plan-position stride, every blocked position maps to a distinct
// plan position, and its other offsets are that plan position's offsets. Checked over every
// position of random plans, with small runs so that sizes 2..5 get split.
TEST(Layout, BlockLoopKeepsEveryPosition) {
  Rng rng(test_seed() + 11);
  SCOPED_TRACE("seed " + std::to_string(test_seed()));
  int blocked = 0;
  for (int rank : {2, 3, 4, 5, 6, 8, 12, 25, 64}) {
    for (int rep = 0; rep < 400; ++rep) {
      const std::vector<int64_t> shape = random_shape(rng, rank, 3000);
      const LoopPlan<3> p = random_plan3(rng, shape);
      const LoopPlan<4> w = stridewise::with_positions(p);
      for (int64_t i = 0; i < w.numel; ++i) ASSERT_EQ(plan_offset(w, 3, i), i);
      const int64_t want[4] = {rand_int(rng, 1, 16), rand_int(rng, 1, 8), rand_int(rng, 1, 8), 0};
      const int64_t bytes[4] = {1, 1, 1, 1};
      const LoopPlan<4> q = stridewise::block_loop<4>(w, want, bytes, rand_int(rng, 1, 64));
      SCOPED_TRACE("shape " + shape_str(shape));
      ASSERT_EQ(q.numel, p.numel);
      ASSERT_LE(q.rank, kMaxRank);
      int64_t prod = 1;
      for (int d = 0; d < q.rank; ++d) prod *= q.sizes[d];
      ASSERT_EQ(prod, p.rank ? p.numel : 1);
      blocked += q.rank != p.rank;
      ASSERT_TRUE(same_tuples(q, p));
    }
  }
  EXPECT_GT(blocked, 60);  // the property was exercised on reordered plans, not just copies
}

// band_loop (then block_loop, as the gather's elems walk does) keeps every position's
// offsets, and finishes one band of dim 0 before the next starts. Every position of random
// plans.
TEST(Layout, BandLoopKeepsEveryPositionAndFinishesBandsInOrder) {
  Rng rng(test_seed() + 12);
  SCOPED_TRACE("seed " + std::to_string(test_seed()));
  int banded = 0;
  for (int rank : {1, 2, 3, 4, 6, 12, 63, 64}) {
    for (int rep = 0; rep < 1000; ++rep) {
      const std::vector<int64_t> shape = random_shape(rng, rank, 3000);
      const LoopPlan<3> p = random_plan3(rng, shape);
      const LoopPlan<4> w = stridewise::with_positions(p);
      const LoopPlan<4> b = stridewise::band_loop<4>(w, rand_int(rng, 1, 16));
      SCOPED_TRACE("shape " + shape_str(shape));
      ASSERT_EQ(b.numel, p.numel);
      ASSERT_LE(b.rank, kMaxRank);
      const bool did = b.rank != w.rank;
      banded += did;
      if (did) {  // positions [0, band * rest) are dim 0's first band, and so on
        const int64_t band = b.sizes[0], per_band = b.numel / b.sizes[b.rank - 1];
        for (int64_t i = 0; i < b.numel; ++i)
          ASSERT_EQ(plan_offset(b, 3, i) % p.sizes[0] / band, i / per_band) << i;
      }
      const int64_t want[4] = {rand_int(rng, 1, 16), rand_int(rng, 1, 8), rand_int(rng, 1, 8), 0};
      const int64_t bytes[4] = {1, 1, 1, 1};
      for (const LoopPlan<4>& q : {b, stridewise::block_loop<4>(b, want, bytes, 64)}) {
        ASSERT_TRUE(same_tuples(q, p));
      }
    }
  }
  EXPECT_GT(banded, 60);  // exercised on banded plans (about 2% of the draws), not just copies
}

// The transposed index of bench_gather.py: out (64,1024,1024) contiguous, index strides
// (2^20, 1, 1024), self (64,4096,1024) on dim 1. The walk takes 32 out elements along D, then
// 4 index values along K (one 32-byte sector of int64), then the rest in plan order.
TEST(Layout, BlockLoopTransposedIndex) {
  const auto p =
      plan<3>({64, 1024, 1024}, {{1 << 20, 1024, 1}, {1 << 20, 1, 1024}, {1 << 22, 0, 1}});
  ASSERT_EQ(p.rank, 3);
  LoopPlan<3> w = p;
  const int64_t want[3] = {128, 32, 32}, bytes[3] = {4, 8, 4};
  const LoopPlan<3> q = stridewise::block_loop<3>(w, want, bytes, 1024);
  ASSERT_EQ(q.rank, 5);
  const int64_t sizes[5] = {32, 4, 32, 256, 64};
  const int64_t index_strides[5] = {1024, 1, 32 * 1024, 4, 1 << 20};
  for (int d = 0; d < 5; ++d) {
    EXPECT_EQ(q.sizes[d], sizes[d]) << d;
    EXPECT_EQ(q.strides[1][d], index_strides[d]) << d;
  }
  // Every operand walked along dim 0 already: nothing to gain, the plan comes back as is.
  const auto c =
      plan<3>({64, 1024, 1024}, {{1 << 20, 1024, 1}, {1 << 20, 1024, 1}, {1 << 22, 0, 1}});
  EXPECT_EQ(stridewise::block_loop<3>(c, want, bytes, 1024).rank, c.rank);
}

TEST(Layout, ContiguousCoalescesToRankOne) {
  const auto p = plan<1>({2, 3, 4}, {{12, 4, 1}});
  ASSERT_EQ(p.rank, 1);
  EXPECT_EQ(p.sizes[0], 24);
  EXPECT_EQ(p.strides[0][0], 1);
  EXPECT_TRUE(p.fits_int32);
}

TEST(Layout, TransposeIsWalkedInMemoryOrder) {
  const auto p = plan<1>({3, 4}, {{1, 3}});
  ASSERT_EQ(p.rank, 1);
  EXPECT_EQ(p.sizes[0], 12);
  EXPECT_EQ(p.strides[0][0], 1);
  // Contiguous out, transposed input: no merge possible, out decides the order.
  const auto q = plan<2>({3, 4}, {{4, 1}, {1, 3}});
  ASSERT_EQ(q.rank, 2);
  EXPECT_EQ(q.sizes[0], 4);
  EXPECT_EQ(q.strides[0][0], 1);
  EXPECT_EQ(q.strides[1][0], 3);
  EXPECT_EQ(q.perm[0], 1);
}

TEST(Layout, StrideZeroDimsMerge) {
  const auto p = plan<2>({3, 4, 5}, {{20, 5, 1}, {0, 0, 1}});
  ASSERT_EQ(p.rank, 2);
  EXPECT_EQ(p.sizes[0], 5);
  EXPECT_EQ(p.sizes[1], 12);
  EXPECT_EQ(p.strides[1][1], 0);
}

TEST(Layout, SizeOneDimsAreDropped) {
  std::vector<int64_t> shape(64, 1), st(64, 7);
  auto p = plan<1>(shape, {st});
  EXPECT_EQ(p.rank, 0);
  EXPECT_EQ(p.numel, 1);
  shape[40] = 9;
  p = plan<1>(shape, {st});
  ASSERT_EQ(p.rank, 1);
  EXPECT_EQ(p.sizes[0], 9);
  EXPECT_EQ(p.perm[0], 40);
  EXPECT_EQ(plan<1>({}, {{}}).rank, 0);
  EXPECT_EQ(plan<1>({}, {{}}).numel, 1);
}

TEST(Layout, EmptyShapeHasNothingToIterate) {
  const auto p = plan<2>({3, 0, 5}, {{0, 5, 1}, {1, 3, 0}});
  EXPECT_EQ(p.numel, 0);
  EXPECT_EQ(p.rank, 0);
}

// The seed: out (4,1,384) contiguous, index (4,1,384) with strides (1,1,0) (an expand of
// 4 values), self (4,16,384) gathered on dim 1 (stride replaced by 0).
TEST(Layout, SeedCaseKeepsIndexStrideZeroOnFastDim) {
  const auto p = plan<3>({4, 1, 384}, {{384, 384, 1}, {1, 1, 0}, {6144, 0, 1}});
  ASSERT_EQ(p.rank, 2);
  EXPECT_EQ(p.sizes[0], 384);
  EXPECT_EQ(p.sizes[1], 4);
  EXPECT_EQ(p.strides[0][0], 1);
  EXPECT_EQ(p.strides[1][0], 0);
  EXPECT_EQ(p.strides[2][0], 1);
  EXPECT_EQ(p.strides[0][1], 384);
  EXPECT_EQ(p.strides[1][1], 1);
  EXPECT_EQ(p.strides[2][1], 6144);
}

TEST(Layout, Fits32BitOnlyWhenEveryExtentFits) {
  // numel crosses 2^31 (sizes only; nothing is allocated).
  EXPECT_FALSE(plan<1>({65536, 32769}, {{32769, 1}}).fits_int32);
  EXPECT_TRUE(plan<1>({65536, 32767}, {{32767, 1}}).fits_int32);
  // One operand's extent crosses 2^31 while numel is tiny.
  EXPECT_FALSE(plan<2>({2, 2}, {{2, 1}, {int64_t{1} << 31, 1}}).fits_int32);
  EXPECT_TRUE(plan<2>({2, 2}, {{2, 1}, {int64_t{1} << 30, 1}}).fits_int32);
  // The extra extent counts (gather's self reached through index values).
  const int64_t ok[1] = {kI32Max - 1}, over[1] = {kI32Max};
  EXPECT_TRUE(plan<1>({2}, {{1}}, ok).fits_int32);
  EXPECT_FALSE(plan<1>({2}, {{1}}, over).fits_int32);
}

}  // namespace
}  // namespace swt
