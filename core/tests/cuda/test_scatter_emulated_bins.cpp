// The CUDA scatter's bins path (scatter_cuda_bins.h) on the host, as in
// test_scatter_emulated.cpp: the host runner runs each phase of an item for every thread of
// its group before the next (the group's barrier). Random layouts against the reference, whole
// lines and lines cut into chunks (flushed by atomics into out or the workspace), the ordered
// (deterministic) mode against the index order bit for bit under another schedule, and the
// selection rule on the shapes. Needs no GPU, never skips.
#include <gtest/gtest.h>

#include <algorithm>
#include <random>
#include <string>
#include <vector>

#include "scatter_test_util.h"

namespace swct {
namespace {

using stridewise::Combine;
using stridewise::DType;
using stridewise::ErrorDetail;
using stridewise::ScatterArgs;
using stridewise::ScatterPlan;
using stridewise::Status;

// Every dtype and accumulating combine, include_self both ways, in place or not, value form,
// deterministic or not, grid caps (several items per group), a bad value now and then; forced
// whole (kBins) and cut into 3-step chunks (kBinsSplit). Eligible calls take the path.
TEST(ScatterEmulated, BinsPathRandomLayouts) {
  const uint64_t seed = swt::test_seed();
  swt::Rng rng(seed);
  int failures = 0, whole = 0, packed = 0, split = 0, ordered = 0, shadowed = 0;
  for (int i = 0; i < 1200 && failures < 5; ++i) {
    ScatterCaseOpts o;
    o.max_size = 7;
    o.rank = static_cast<int>(swt::rand_int(rng, 1, 4));
    ScatterCase c = random_scatter_case(rng, o);
    if (c.desc.combine == Combine::kCopy) continue;
    if (swt::coin(rng, 0.1)) plant_bad_index(rng, c);
    const cs::PathChoice ch =
        swt::coin(rng, 0.5) ? cs::PathChoice::kBins : cs::PathChoice::kBinsSplit;
    ScatterPlan plan;
    ErrorDetail e;
    ASSERT_EQ(stridewise::plan_scatter(c.args(), &plan, &e), Status::kOk) << e.message;
    const cs::BinsShape bs = cs::call_bins(c.args(), plan, ch);
    const unsigned cap = swt::coin(rng, 0.3) ? unsigned(swt::rand_int(rng, 1, 3)) : 0;
    std::vector<std::string> ran;
    const auto r = scatter_emulated_matches(c, seed, cap, ch, &ran);
    EXPECT_TRUE(r) << "iteration " << i;
    const bool took = ran_any_bins(ran);
    EXPECT_EQ(took, bs.use && plan.elems.numel > 0) << "iteration " << i << "\n" << c.describe();
    failures += r ? 0 : 1;
    whole += launched(ran, "bins");
    packed += launched(ran, "bins_packed");
    shadowed += launched(ran, "validate_shadow");
    // Every bins call here has n <= 7: validation writes the shadow the bins read.
    EXPECT_TRUE(!took || launched(ran, "validate_shadow")) << "iteration " << i;
    split += launched(ran, "bins_split");
    ordered += launched(ran, "bins_ordered") || launched(ran, "bins_ordered_packed");
  }
  EXPECT_GT(shadowed, 300);
  EXPECT_GT(whole, 50);
  EXPECT_GT(packed, 100);
  EXPECT_GT(split, 100);
  EXPECT_GT(ordered, 50);
}

// Out's dim past the shadow's 256 values: the bins read the index itself (and a histogram's
// chunks with a shadow or without), against the reference.
TEST(ScatterEmulated, BinsPathWideLines) {
  const uint64_t seed = swt::test_seed();
  swt::Rng rng(seed);
  int with = 0, without = 0;
  for (int i = 0; i < 120; ++i) {
    ScatterCaseOpts o;
    o.random_dtype = false;
    o.dtype = swt::coin(rng, 0.5) ? DType::kFloat32 : DType::kInt32;
    o.combine = static_cast<int>(swt::coin(rng, 0.7) ? Combine::kAdd : Combine::kMean);
    o.rank = 1;
    o.max_size = 600;
    ScatterCase c = random_scatter_case(rng, o);
    if (swt::coin(rng, 0.1)) plant_bad_index(rng, c);
    std::vector<std::string> ran;
    const cs::PathChoice ch =
        swt::coin(rng, 0.5) ? cs::PathChoice::kBins : cs::PathChoice::kBinsSplit;
    EXPECT_TRUE(scatter_emulated_matches(c, seed, 0, ch, &ran)) << "iteration " << i;
    const bool took = ran_any_bins(ran);
    if (!took) continue;
    const bool shadow = launched(ran, "validate_shadow");
    EXPECT_EQ(shadow, c.args().out.sizes[0] <= 256) << "iteration " << i;
    with += shadow;
    without += !shadow;
  }
  EXPECT_GT(with, 15);
  EXPECT_GT(without, 15);
}

// Deterministic mode with arbitrary floats: each bin combines its values in index order
// whatever the schedule (the runner runs threads and blocks last first), so the result is the
// reference's bit for bit (floating add is not associative).
TEST(ScatterEmulated, BinsOrderedIsIndexOrder) {
  const uint64_t seed = swt::test_seed();
  swt::Rng rng(seed);
  int checked = 0, packed = 0;
  for (int i = 0; i < 300; ++i) {
    ScatterCaseOpts o;
    o.random_dtype = false;
    o.dtype = swt::coin(rng, 0.5) ? DType::kFloat32 : DType::kFloat16;
    o.combine = static_cast<int>(swt::coin(rng, 0.5) ? Combine::kAdd : Combine::kMean);
    o.deterministic = 1;
    o.has_value = 0;
    o.rank = static_cast<int>(swt::rand_int(rng, 1, 2));
    // Lines longer than a warp's stage (kBinsStageSteps), and packed lines over several stages.
    o.max_size = o.rank == 1 ? 300 : 40;
    ScatterCase c = random_scatter_case(rng, o);
    if (o.dtype == DType::kFloat32) {
      float* p = reinterpret_cast<float*>(c.src.base());
      for (size_t k = 0; k < c.src.storage_bytes() / 4; ++k)
        p[k] = std::uniform_real_distribution<float>(-1, 1)(rng);
    }
    int64_t bad = 0;
    const std::vector<unsigned char> want = reference_scatter(c, &bad, nullptr);
    ScatterHostRunner r;
    r.path = cs::PathChoice::kBins;
    r.reverse = true;
    ErrorDetail e;
    ASSERT_EQ(emulate_scatter(c.args(), r, &e), Status::kOk) << c.describe();
    const bool packed_run = launched(r.launches, "bins_ordered_packed");
    if (!launched(r.launches, "bins_ordered") && !packed_run) continue;
    ++checked;
    packed += packed_run;
    EXPECT_EQ(compare_out(c, c.out.base(), want, nullptr), "") << "iteration " << i << "\n"
                                                               << c.describe();
  }
  EXPECT_GT(checked, 100);
  EXPECT_GT(packed, 50);
}

// BinsWalk, every position: for every grid of lines x steps and group size, the walk from each
// thread's first position visits (p / len, p % len) at p, p + g, p + 2g, ...
TEST(ScatterEmulated, BinsWalkVisitsEveryPosition) {
  for (int64_t len = 1; len <= 40; ++len)
    for (int64_t g : {1, 3, 7, 32, 256})
      for (int64_t t = 0; t < g; ++t) {
        cs::BinsWalk w(t, g, len);
        for (int64_t p = t; p < 50 * len; p += g, w.next())
          ASSERT_TRUE(w.j == p / len && w.s == p % len)
              << "len " << len << " g " << g << " p " << p << ": (" << w.j << ", " << w.s << ")";
      }
  // Past 31 bits: the 64-bit start.
  const int64_t big = (int64_t(1) << 33) + 7, len = 3000000019;
  cs::BinsWalk w(big, 256, len);
  for (int64_t p = big; p < big + 100 * 256; p += 256, w.next())
    ASSERT_TRUE(w.j == p / len && w.s == p % len) << p;
}

// bins_shape's rule on the shapes, over views at fake addresses (nothing touched).
TEST(ScatterEmulated, BinsRule) {
  auto args = [](DType dt, const std::vector<int64_t>& osz, const std::vector<int64_t>& isz,
                 std::vector<int64_t> ist, int64_t dim, Combine comb, bool incl) {
    if (ist.empty()) ist = swt::contiguous_strides(isz);
    ScatterArgs a;
    a.out.data = reinterpret_cast<void*>(uintptr_t(1) << 44);
    a.out.dtype = dt;
    a.out.rank = static_cast<int>(osz.size());
    const std::vector<int64_t> ost = swt::contiguous_strides(osz);
    for (size_t d = 0; d < osz.size(); ++d) a.out.sizes[d] = osz[d], a.out.strides[d] = ost[d];
    a.self = a.out;
    a.index = a.out;
    a.index.data = reinterpret_cast<void*>(uintptr_t(2) << 44);
    a.index.dtype = DType::kInt64;
    for (size_t d = 0; d < isz.size(); ++d) a.index.sizes[d] = isz[d], a.index.strides[d] = ist[d];
    a.src = a.index;
    a.src.data = reinterpret_cast<void*>(uintptr_t(3) << 44);
    a.src.dtype = dt;
    const std::vector<int64_t> sst = swt::contiguous_strides(isz);
    for (size_t d = 0; d < isz.size(); ++d) a.src.strides[d] = sst[d];
    a.dim = dim;
    a.desc = stridewise::scatter_desc(comb == Combine::kAdd ? stridewise::OpCode::kScatterAdd
                                                            : stridewise::OpCode::kScatterReduce,
                                      comb, incl);
    return a;
  };
  auto shape = [](const ScatterArgs& a) {
    ScatterPlan p;
    ErrorDetail e;
    EXPECT_EQ(stridewise::plan_scatter(a, &p, &e), Status::kOk) << e.message;
    return cs::call_bins(a, p, cs::PathChoice::kAuto);
  };
  const int64_t M = int64_t(1) << 20;
  // A million rows of 128 values into 64 bins: whole lines, 16 to a block's item (2048 steps),
  // their bins and line table in one slab.
  cs::BinsShape s = shape(args(DType::kFloat32, {M, 64}, {M, 128}, {}, 1, Combine::kAdd, true));
  EXPECT_TRUE(s.use && !s.split && !s.ordered && !s.counts);
  EXPECT_EQ(s.pack, 16);
  EXPECT_EQ(s.group, 256);
  EXPECT_EQ(s.threads, 256);
  EXPECT_EQ(s.slab_bytes, 16 * 64 * 4 + 16 * 24);
  // 1024 bins per 1024-step row: two lines an item (2048 steps, 8 KB of bins).
  s = shape(args(DType::kFloat32, {65536, 1024}, {65536, 1024}, {}, 1, Combine::kAdd, true));
  EXPECT_TRUE(s.use && s.pack == 2 && s.group == 256);
  s = shape(args(DType::kFloat32, {4096, 16}, {4096, 16}, {}, 1, Combine::kAdd, true));
  EXPECT_TRUE(s.use && s.pack == 2);  // 4096 lines: two to an item keeps 2048 items
  // amax: float32 in out by atomics (their CAS skips most writes); bfloat16 (a float32
  // workspace otherwise) in bins.
  EXPECT_FALSE(shape(args(DType::kFloat32, {M, 64}, {M, 128}, {}, 1, Combine::kMax, true)).use);
  EXPECT_TRUE(shape(args(DType::kBFloat16, {M, 64}, {M, 128}, {}, 1, Combine::kMax, true)).use);
  // mean: counts; deterministic: ordered, packed too, with each warp's stage.
  s = shape(args(DType::kBFloat16, {M, 64}, {M, 128}, {}, 1, Combine::kMean, false));
  EXPECT_TRUE(s.use && s.counts && s.pack == 16);
  EXPECT_EQ(s.slab_bytes, 16 * 64 * 4 * 2 + 16 * 24);
  ScatterArgs d = args(DType::kFloat32, {M, 64}, {M, 128}, {}, 1, Combine::kAdd, true);
  d.deterministic = true;
  s = shape(d);
  EXPECT_TRUE(s.use && s.ordered && !s.split && s.group == 256 && s.pack == 16);
  EXPECT_EQ(s.slab_bytes, 16 * 64 * 4 + 8 * 128 * 4 + 8 * 128 * 4 + 16 * 24);
  // A histogram: 16M values into 4096 bins, one line cut into chunks of 4 x 4096 steps (not
  // the kBinsItems chunks that fill the GPU: the flush would be as many atomics as the
  // values'), a block per chunk.
  const int64_t E = int64_t(1) << 24;
  s = shape(args(DType::kFloat32, {4096}, {E}, {}, 0, Combine::kAdd, true));
  EXPECT_TRUE(s.use && s.split);
  EXPECT_EQ(s.chunk, 4 * 4096);
  EXPECT_EQ(s.chunks, E / (4 * 4096));
  EXPECT_EQ(s.group, 256);
  EXPECT_EQ(s.pack, 1);
  EXPECT_EQ(s.smem_bytes, 4096 * 4 + 32);
  // ... into a million bins: the bins do not fit (the atomics kernel).
  EXPECT_FALSE(shape(args(DType::kFloat32, {M}, {E}, {}, 0, Combine::kAdd, true)).use);
  // Deterministic histogram: not here (the segment path sorts it, in index order).
  d = args(DType::kFloat32, {4096}, {E}, {}, 0, Combine::kAdd, true);
  d.deterministic = true;
  ScatterPlan p;
  ErrorDetail e;
  ASSERT_EQ(stridewise::plan_scatter(d, &p, &e), Status::kOk);
  EXPECT_TRUE(cs::sort_shape(d, p, cs::PathChoice::kAuto).use);
  // dim 1 of (64, 4096, 1024): steps 1024 elements apart (the tile path's).
  EXPECT_FALSE(
      shape(args(DType::kFloat16, {64, 4096, 1024}, {64, 1024, 1024}, {}, 1, Combine::kAdd, true))
          .use);
  // A shared index over many lines (the segment path's), short lines against the bins, a copy.
  EXPECT_FALSE(shape(args(DType::kFloat32, {M, 64}, {M, 128}, {0, 1}, 1, Combine::kAdd, true)).use);
  EXPECT_FALSE(shape(args(DType::kFloat32, {M, 1024}, {M, 128}, {}, 1, Combine::kAdd, true)).use);
  EXPECT_FALSE(shape(args(DType::kFloat32, {M, 64}, {M, 128}, {}, 1, Combine::kCopy, true)).use);
  // Bins that overflow a block's shared memory even one group at a time: no.
  EXPECT_FALSE(
      shape(args(DType::kFloat64, {256, 8192}, {256, 32768}, {}, 1, Combine::kAdd, true)).use);
  // The whole-line path needs no accumulator even for float16 (rounded once, in the bins): its
  // workspace is the index shadow, a byte per index element (64 bins < 256).
  const ScatterArgs h = args(DType::kFloat16, {M, 64}, {M, 128}, {}, 1, Combine::kAdd, true);
  ASSERT_EQ(stridewise::plan_scatter(h, &p, &e), Status::kOk);
  ScatterHostRunner r;
  cs::WsLayout w = cs::call_layout(h, p, cs::PathChoice::kAuto, r);
  EXPECT_EQ(w.shadow_at, 0);
  EXPECT_EQ(w.shadow_bytes, M * 128);
  EXPECT_EQ(w.total, cs::align256(M * 128));
  EXPECT_GT(cs::call_layout(h, p, cs::PathChoice::kNever, r).total, 0);
  EXPECT_EQ(cs::call_layout(h, p, cs::PathChoice::kNever, r).shadow_bytes, 0);
  // 1024 bins: no shadow (values past a byte), no workspace.
  const ScatterArgs k =
      args(DType::kFloat32, {65536, 1024}, {65536, 1024}, {}, 1, Combine::kAdd, true);
  ASSERT_EQ(stridewise::plan_scatter(k, &p, &e), Status::kOk);
  EXPECT_EQ(cs::call_layout(k, p, cs::PathChoice::kAuto, r).total, 0);
  // A histogram's chunks: the float32 accumulator is out itself; the shadow of an expanded
  // index covers its storage (one element per 16M steps here), after the rest.
  const ScatterArgs x = args(DType::kFloat16, {4096}, {E}, {}, 0, Combine::kAdd, true);
  ASSERT_EQ(stridewise::plan_scatter(x, &p, &e), Status::kOk);
  w = cs::call_layout(x, p, cs::PathChoice::kAuto, r);
  EXPECT_EQ(w.shadow_bytes, 0);  // 4096 bins
  const ScatterArgs y = args(DType::kFloat16, {200}, {E}, {}, 0, Combine::kAdd, true);
  ASSERT_EQ(stridewise::plan_scatter(y, &p, &e), Status::kOk);
  w = cs::call_layout(y, p, cs::PathChoice::kAuto, r);
  EXPECT_EQ(w.shadow_bytes, E);
  EXPECT_EQ(w.shadow_at, cs::align256(200 * 4));  // after float16's float32 accumulator
  EXPECT_EQ(w.total, w.shadow_at + cs::align256(E));
}

}  // namespace
}  // namespace swct
