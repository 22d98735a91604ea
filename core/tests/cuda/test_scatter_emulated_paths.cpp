// The CUDA scatter's segment path (scatter_cuda_sorted.h, common/segments.h; the host
// runner's sort is std::stable_sort) and tile path (scatter_cuda_tile.h; the runner runs each
// phase for every thread of a block before the next) on the host, as in
// test_scatter_emulated.cpp: shared-index layouts and per-element indices against the
// reference, the segment path against the lines kernel with arbitrary values (repeatable,
// bitwise where the arithmetic is exact), the selection rules, the workspace layout and
// STRIDEWISE_SCATTER_CUDA_PATH's values. Needs no GPU, never skips.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <string>
#include <utility>
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

// Views over fake addresses for the rule tests (nothing is ever touched): operand k's data at
// (k + 1) << 44.
void* fake(int k) {
  return reinterpret_cast<void*>((uintptr_t(k) + 1) << 44);
}

stridewise::StridedView view(void* p, DType dt, const std::vector<int64_t>& sz,
                             const std::vector<int64_t>& st) {
  stridewise::StridedView v;
  v.data = p;
  v.dtype = dt;
  v.rank = static_cast<int>(sz.size());
  for (size_t d = 0; d < sz.size(); ++d) {
    v.sizes[d] = sz[d];
    v.strides[d] = st[d];
  }
  return v;
}
// ---- the sorted-segment path --------------------------------------------------------------

bool ran_sorted(const std::vector<std::string>& l) {
  return std::find(l.begin(), l.end(), "sort") != l.end();
}

// Random layouts with the index expanded (stride 0) over every dim but dim: every dtype,
// combine and form, grid caps, a bad value now and then. Eligible calls take the sorted path
// (the rule's kAuto, or kAlways) and match the reference.
TEST(ScatterEmulated, SortedPathSharedIndex) {
  const uint64_t seed = swt::test_seed();
  swt::Rng rng(seed);
  int failures = 0, sorted = 0;
  for (int i = 0; i < 1500 && failures < 5; ++i) {
    ScatterCaseOpts o;
    o.deterministic = 1;
    o.max_size = 6;
    o.rank = static_cast<int>(swt::rand_int(rng, 1, 4));
    ScatterCase c = random_scatter_case(rng, o);
    for (int d = 0; d < c.index.view.rank; ++d)
      if (d != c.dim) c.index.view.strides[d] = 0;
    if (swt::coin(rng, 0.15)) plant_bad_index(rng, c);
    ScatterPlan plan;
    ErrorDetail e;
    ASSERT_EQ(stridewise::plan_scatter(c.args(), &plan, &e), Status::kOk) << e.message;
    const bool eligible = plan.elems.numel > 0 && plan.line_len >= 2;
    const auto choice = swt::coin(rng, 0.5) ? cs::PathChoice::kAlways : cs::PathChoice::kAuto;
    const unsigned cap = swt::coin(rng, 0.3) ? unsigned(swt::rand_int(rng, 1, 3)) : 0;
    std::vector<std::string> ran;
    const auto r = scatter_emulated_matches(c, seed, cap, choice, &ran);
    EXPECT_TRUE(r) << "iteration " << i;
    EXPECT_EQ(ran_sorted(ran), eligible) << "iteration " << i << "\n" << c.describe();
    failures += r ? 0 : 1;
    sorted += ran_sorted(ran) ? 1 : 0;
  }
  EXPECT_GT(sorted, 800);
}

// Arbitrary values (floating results depend on the order). The segment path's order is fixed
// by the keys alone (common/segments.h), so: two runs on different grids (the second
// with blocks and threads in reverse order) are bitwise
// equal; where the arithmetic is exact (integers, max/min, copy) the result is the lines
// kernel's bits; floating add/multiply/mean are within a rounding bound of it (bitwise too
// for segments within one chunk: DeterministicIsIndexOrder). The shapes
// give one line, several lines, lines in 16-byte vectors (64 and 128 columns), more lines
// than a block, dim inner or outer, and keys repeated across many chunks (out dim 1 and 2).
TEST(ScatterEmulated, SegmentsRepeatAndMatchLines) {
  const uint64_t seed = swt::test_seed();
  swt::Rng rng(seed);
  struct Shape {
    std::vector<int64_t> out;
    int64_t dim, line_len;
  };
  const Shape shapes[] = {{{13}, 0, 400},     {{9, 70}, 0, 300},   {{5, 600}, 0, 40},
                          {{300, 7}, 1, 50},  {{3, 4, 90}, 1, 60}, {{9, 64}, 0, 300},
                          {{4, 128}, 0, 150}, {{1, 16}, 0, 700},   {{2, 8}, 0, 500}};
  const int n_shapes = static_cast<int>(sizeof shapes / sizeof shapes[0]);
  const DType types[] = {DType::kFloat32, DType::kFloat16, DType::kBFloat16,
                         DType::kInt32,   DType::kFloat64, DType::kInt8};
  int failures = 0, vectors = 0;
  for (DType dt : types) {
    const bool fl = dt != DType::kInt32 && dt != DType::kInt8;
    // terms in [-1, 1] (products of terms in [0.99, 1.01]); up to 700 of them
    const double atol = dt == DType::kFloat32   ? 1e-4
                        : dt == DType::kFloat64 ? 1e-12
                        : dt == DType::kFloat16 ? 2e-3
                                                : 2e-2;
    const double rtol = dt == DType::kFloat16 ? 2e-3 : dt == DType::kBFloat16 ? 1.6e-2 : atol;
    for (int comb = 0; comb <= 5 && failures < 5; ++comb) {
      if (!cuda_runs(dt, Combine(comb))) continue;
      for (int form = 0; form < 4; ++form) {
        const Shape& sh = shapes[swt::rand_int(rng, 0, n_shapes - 1)];
        ScatterCase c = shared_index_case(rng, dt, Combine(comb), form & 1, (form >> 1) & 1,
                                          swt::coin(rng, 0.15), sh.out, sh.dim, sh.line_len, true);
        const std::vector<unsigned char> before(c.out.base(), c.out.base() + c.out.storage_bytes());
        std::vector<unsigned char> got[3];
        ScatterHostRunner runs[3];
        const cs::PathChoice choice[3] = {cs::PathChoice::kAlways, cs::PathChoice::kAlways,
                                          cs::PathChoice::kNever};
        const unsigned caps[3] = {0, 2, 0};
        for (int k = 0; k < 3; ++k) {
          std::memcpy(c.out.base(), before.data(), before.size());
          runs[k].path = choice[k];
          runs[k].grid_cap = caps[k];
          runs[k].reverse = k == 1;
          ErrorDetail e;
          EXPECT_EQ(emulate_scatter(c.args(), runs[k], &e), Status::kOk) << e.message;
          got[k].assign(c.out.base(), c.out.base() + c.out.storage_bytes());
        }
        EXPECT_TRUE(ran_sorted(runs[0].launches) && ran_sorted(runs[1].launches));
        EXPECT_FALSE(ran_sorted(runs[2].launches));
        const std::string rep = swt::diff_bytes(got[0].data(), got[1].data(), got[0].size());
        EXPECT_EQ(rep, "") << "two grids differ: " << c.describe();
        const bool exact = !fl || comb == int(Combine::kCopy) || comb == int(Combine::kMax) ||
                           comb == int(Combine::kMin);
        const std::string vs_lines =
            compare_out(c, got[0].data(), got[2], nullptr, exact ? 0 : rtol, exact ? 0 : atol);
        EXPECT_EQ(vs_lines, "") << (exact ? "not bitwise the lines kernel's: " : "too far: ")
                                << c.describe();
        failures += rep.empty() && vs_lines.empty() ? 0 : 1;
        vectors += sh.out.back() % 16 == 0 && sh.dim == 0 ? 1 : 0;
      }
    }
  }
  EXPECT_GT(vectors, 0);
}

// interleave_target (the atomics kernel's order): the same (target, index, src) tuples as
// the plan it re-orders, over every position, on random per-element layouts (dims permuted
// and sliced, any dim scattered); the dim1_add shape gets (32 columns, the scatter
// dim, the other columns, batch).
TEST(ScatterEmulated, InterleaveKeepsTuples) {
  auto tuples = [](const stridewise::LoopPlan<3>& l) {
    std::vector<std::vector<int64_t>> t;
    for (int64_t i = 0; i < l.numel; ++i)
      t.push_back({stridewise::plan_offset(l, 0, i), stridewise::plan_offset(l, 1, i),
                   stridewise::plan_offset(l, 2, i)});
    std::sort(t.begin(), t.end());
    return t;
  };
  const uint64_t seed = swt::test_seed();
  swt::Rng rng(seed);
  int changed = 0;
  for (int i = 0; i < 400; ++i) {
    ScatterCaseOpts o;
    o.max_size = 8;
    o.rank = static_cast<int>(swt::rand_int(rng, 1, 4));
    ScatterCase c = random_scatter_case(rng, o);
    ScatterPlan plan;
    ErrorDetail e;
    ASSERT_EQ(stridewise::plan_scatter(c.args(), &plan, &e), Status::kOk) << e.message;
    const int64_t line = int64_t(1) << swt::rand_int(rng, 1, 5);
    const auto w = cs::interleave_target(plan.elems, static_cast<int>(plan.dim), line);
    ASSERT_EQ(w.numel, plan.elems.numel);
    EXPECT_EQ(tuples(w), tuples(plan.elems)) << c.describe();
    changed += w.rank != plan.elems.rank ? 1 : 0;
  }
  // Shapes the split applies to: out (B, N, K) with K contiguous, the index (B, J, K) or a
  // slice of a larger one, any dim scattered.
  for (int i = 0; i < 200; ++i) {
    const int64_t B = swt::rand_int(rng, 1, 3), N = swt::rand_int(rng, 1, 9),
                  J = swt::rand_int(rng, 1, 7), K = 2 * swt::rand_int(rng, 1, 12);
    const int64_t dim = swt::rand_int(rng, 0, 2), pad = swt::rand_int(rng, 0, 3);
    std::vector<int64_t> osz = {B, N, K}, isz = {B, J, K};
    osz[size_t(dim)] = dim == 1 ? N : osz[size_t(dim)] + 1;
    isz[size_t(dim)] = J;
    if (dim != 1) isz[1] = std::min(J, N);
    const std::vector<int64_t> ist = {isz[1] * (K + pad), K + pad, 1};
    ScatterArgs a;
    a.out = view(fake(0), DType::kFloat32, osz, swt::contiguous_strides(osz));
    a.self = a.out;
    a.index = view(fake(1), DType::kInt64, isz, ist);
    a.src = view(fake(2), DType::kFloat32, isz, swt::contiguous_strides(isz));
    a.dim = dim;
    a.desc = stridewise::scatter_desc(stridewise::OpCode::kScatterAdd, Combine::kAdd);
    ScatterPlan plan;
    ErrorDetail e;
    ASSERT_EQ(stridewise::plan_scatter(a, &plan, &e), Status::kOk) << e.message;
    const auto w = cs::interleave_target(plan.elems, static_cast<int>(dim), 8);
    EXPECT_EQ(tuples(w), tuples(plan.elems)) << "out " << swt::shape_str(osz) << " dim " << dim;
    changed += w.rank != plan.elems.rank ? 1 : 0;
  }
  EXPECT_GT(changed, 60);
  ScatterArgs a;
  const std::vector<int64_t> out = {4, 64, 128}, idx = {4, 16, 128};
  a.out = view(fake(0), DType::kFloat32, out, swt::contiguous_strides(out));
  a.self = a.out;
  a.index = view(fake(1), DType::kInt64, idx, swt::contiguous_strides(idx));
  a.src = view(fake(2), DType::kFloat32, idx, swt::contiguous_strides(idx));
  a.dim = 1;
  a.desc = stridewise::scatter_desc(stridewise::OpCode::kScatterAdd, Combine::kAdd);
  ScatterPlan p;
  ErrorDetail e;
  ASSERT_EQ(stridewise::plan_scatter(a, &p, &e), Status::kOk);
  const auto w = cs::interleave_target(p.elems, 1, 32);
  ASSERT_EQ(w.rank, 4);
  EXPECT_EQ(std::vector<int64_t>(w.sizes, w.sizes + 4), (std::vector<int64_t>{32, 16, 4, 4}));
  EXPECT_EQ(w.strides[0][1], 0);    // the scatter dim: out's offset comes from the index
  EXPECT_EQ(w.strides[1][1], 128);  // ... the index walks it
  EXPECT_EQ(w.strides[2][2], 32);   // the column blocks
}

// Copies in fast mode through a shared index over aligned contiguous lines take rows_put (no
// sort), and every element ends as one of its candidates (duplicates race, as in ATen).
TEST(ScatterEmulated, RowsPutCopies) {
  const uint64_t seed = swt::test_seed();
  swt::Rng rng(seed);
  int rows = 0, failures = 0;
  for (int i = 0; i < 120 && failures < 5; ++i) {
    ScatterCase c = rows_copy_case(rng, 60);
    std::vector<std::string> ran;
    const unsigned cap = swt::coin(rng, 0.3) ? unsigned(swt::rand_int(rng, 1, 3)) : 0;
    const auto r = scatter_emulated_matches(c, seed, cap, cs::PathChoice::kAuto, &ran);
    EXPECT_TRUE(r) << "iteration " << i;
    failures += r ? 0 : 1;
    rows += std::find(ran.begin(), ran.end(), "rows_put") != ran.end() ? 1 : 0;
  }
  EXPECT_GT(rows, 40);
}

// Validation issues kValidateUnroll loads per thread, one grid step apart: a bad value at any
// of them is found and stops the call (one block: steps of kThreads positions).
TEST(ScatterEmulated, ValidationFindsBadValuesInEveryUnrolledSlot) {
  const uint64_t seed = swt::test_seed();
  swt::Rng rng(seed);
  for (int slot = 0; slot < cs::kValidateUnroll; ++slot) {
    ScatterCase c = shared_index_case(rng, DType::kFloat32, Combine::kAdd, true, true, false, {40},
                                      0, 5000, false);
    const int64_t pos = (slot + 4 * swt::rand_int(rng, 0, 3)) * cs::kThreads +
                        swt::rand_int(rng, 0, cs::kThreads - 1);
    ASSERT_LT(pos, 5000);
    const int64_t bad = swt::coin(rng, 0.5) ? -1 : 40;
    const int32_t bad32 = static_cast<int32_t>(bad);
    ASSERT_EQ(c.index.view.strides[0], 1);
    if (c.index.esize == 8)
      std::memcpy(c.index.base() + pos * 8, &bad, 8);
    else
      std::memcpy(c.index.base() + pos * 4, &bad32, 4);
    c.deterministic = false;
    std::vector<std::string> ran;
    const auto r = scatter_emulated_matches(c, seed, 1, cs::PathChoice::kNever, &ran);
    EXPECT_TRUE(r) << "slot " << slot << " position " << pos;
  }
}

// The tile path (scatter_cuda_tile.h) on random layouts: every dtype and accumulating
// combine, include_self both ways, in place or not, value form, grid caps (several tiles per
// block), a bad value now and then; against the reference (small integers: exact in any
// order). Forced (kTile) wherever it can run: tiny shapes miss kAuto's size threshold.
TEST(ScatterEmulated, TilePathRandomLayouts) {
  const uint64_t seed = swt::test_seed();
  swt::Rng rng(seed);
  int failures = 0, tiled = 0;
  for (int i = 0; i < 600 && failures < 5; ++i) {
    ScatterCaseOpts o;
    o.deterministic = 0;
    o.max_size = 6;
    o.rank = static_cast<int>(swt::rand_int(rng, 1, 4));
    ScatterCase c = random_scatter_case(rng, o);
    if (c.desc.combine == Combine::kCopy) continue;
    if (swt::coin(rng, 0.1)) plant_bad_index(rng, c);
    ScatterPlan plan;
    ErrorDetail e;
    ASSERT_EQ(stridewise::plan_scatter(c.args(), &plan, &e), Status::kOk) << e.message;
    const bool eligible = cs::call_tile(c.args(), plan, cs::PathChoice::kTile).use;
    const unsigned cap = swt::coin(rng, 0.3) ? unsigned(swt::rand_int(rng, 1, 3)) : 0;
    std::vector<std::string> ran;
    const auto r = scatter_emulated_matches(c, seed, cap, cs::PathChoice::kTile, &ran);
    EXPECT_TRUE(r) << "iteration " << i;
    const bool took = std::find(ran.begin(), ran.end(), "tile") != ran.end();
    EXPECT_EQ(took, eligible) << "iteration " << i << "\n" << c.describe();
    failures += r ? 0 : 1;
    tiled += took ? 1 : 0;
  }
  EXPECT_GT(tiled, 200);
}

// STRIDEWISE_SCATTER_CUDA_PATH's values.
TEST(ScatterEmulated, PathChoiceParse) {
  cs::PathChoice c = cs::PathChoice::kTile;
  EXPECT_TRUE(cs::parse_path_choice(nullptr, &c));
  EXPECT_EQ(c, cs::PathChoice::kAuto);
  const std::pair<const char*, cs::PathChoice> known[] = {{"auto", cs::PathChoice::kAuto},
                                                          {"plain", cs::PathChoice::kNever},
                                                          {"segments", cs::PathChoice::kAlways},
                                                          {"tile", cs::PathChoice::kTile}};
  for (const auto& [name, want] : known) {
    c = cs::PathChoice::kAuto;
    EXPECT_TRUE(cs::parse_path_choice(name, &c)) << name;
    EXPECT_EQ(c, want) << name;
  }
  c = cs::PathChoice::kTile;
  EXPECT_FALSE(cs::parse_path_choice("Tile", &c));
  EXPECT_EQ(c, cs::PathChoice::kTile);
}

// tile_shape's rule and sizes, on views over fake addresses (nothing is touched).
TEST(ScatterEmulated, TileRule) {
  auto args = [&](DType dt, const std::vector<int64_t>& osz, const std::vector<int64_t>& isz,
                  const std::vector<int64_t>& ist, Combine comb, bool incl) {
    ScatterArgs a;
    a.out = view(fake(0), dt, osz, swt::contiguous_strides(osz));
    a.self = a.out;
    a.index = view(fake(1), DType::kInt64, isz, ist);
    a.src = view(fake(2), dt, isz, swt::contiguous_strides(isz));
    a.dim = 1;
    a.desc = stridewise::scatter_desc(comb == Combine::kAdd ? stridewise::OpCode::kScatterAdd
                                                            : stridewise::OpCode::kScatterReduce,
                                      comb, incl);
    return a;
  };
  auto shape = [](const ScatterArgs& a, cs::PathChoice ch = cs::PathChoice::kAuto) {
    ScatterPlan p;
    ErrorDetail e;
    EXPECT_EQ(stridewise::plan_scatter(a, &p, &e), Status::kOk) << e.message;
    return cs::call_tile(a, p, ch);
  };
  const std::vector<int64_t> out = {64, 4096, 1024}, idx = {64, 1024, 1024};
  const std::vector<int64_t> ist = swt::contiguous_strides(idx);
  // The dim1_add: 4 lines of 4096 float32 accumulators (64 KB: two blocks per SM)
  // for float16 (float32 accumulators); float32 add goes straight into out with the atomics
  // kernel (no workspace) unless the tile is asked for.
  EXPECT_FALSE(shape(args(DType::kFloat32, out, idx, ist, Combine::kAdd, true)).use);
  EXPECT_FALSE(shape(args(DType::kInt64, out, idx, ist, Combine::kMax, true)).use);
  cs::TileShape t =
      shape(args(DType::kFloat32, out, idx, ist, Combine::kAdd, true), cs::PathChoice::kTile);
  EXPECT_TRUE(t.use);
  EXPECT_EQ(t.tile, 4);
  EXPECT_EQ(t.log2_tile, 2);
  EXPECT_FALSE(t.counts);
  EXPECT_EQ(t.smem_bytes, 4 * 3 * 8 + 4 * 4096 * 4);
  EXPECT_LE(t.smem_bytes, cs::kTileSmemBytes);
  EXPECT_EQ(shape(args(DType::kFloat16, out, idx, ist, Combine::kAdd, true)).tile, 4);
  EXPECT_EQ(shape(args(DType::kBFloat16, out, idx, ist, Combine::kAdd, true)).tile, 4);
  // Counts double the bytes per accumulator: mean over 4096 rows fits only 2 lines (no);
  // over 2048 rows, 4.
  EXPECT_FALSE(shape(args(DType::kFloat32, out, idx, ist, Combine::kMean, true)).use);
  const std::vector<int64_t> out2 = {64, 2048, 1024};
  t = shape(args(DType::kFloat32, out2, idx, ist, Combine::kMean, true));
  EXPECT_TRUE(t.use && t.counts && t.tile == 4);
  EXPECT_TRUE(shape(args(DType::kBFloat16, out2, idx, ist, Combine::kMax, false)).counts);
  // Deterministic, a shared index, short lines, a small call, complex128 multiply: no.
  ScatterArgs d = args(DType::kFloat32, out, idx, ist, Combine::kAdd, true);
  d.deterministic = true;
  EXPECT_FALSE(shape(d, cs::PathChoice::kTile).use);
  EXPECT_FALSE(shape(args(DType::kFloat16, out, idx, {0, 1, 0}, Combine::kAdd, true)).use);
  EXPECT_TRUE(
      shape(args(DType::kFloat32, out, idx, {0, 1, 0}, Combine::kAdd, true), cs::PathChoice::kTile)
          .use);
  const std::vector<int64_t> short_idx = {64, 1023, 1024};
  EXPECT_FALSE(shape(args(DType::kFloat16, out, short_idx, swt::contiguous_strides(short_idx),
                          Combine::kAdd, true))
                   .use);
  const std::vector<int64_t> small_out = {1, 64, 64}, small_idx = {1, 64, 15};
  EXPECT_FALSE(shape(args(DType::kFloat16, small_out, small_idx, swt::contiguous_strides(small_idx),
                          Combine::kAdd, true))
                   .use);
  EXPECT_FALSE(shape(args(DType::kComplex128, {64, 64, 8}, {64, 64, 8},
                          swt::contiguous_strides({64, 64, 8}), Combine::kMul, true),
                     cs::PathChoice::kTile)
                   .use);
  // Out's dim too long for 4 lines in kTileSmemBytes.
  const std::vector<int64_t> long_out = {2, 20000, 64}, long_idx = {2, 20000, 64};
  EXPECT_FALSE(shape(args(DType::kFloat16, long_out, long_idx, swt::contiguous_strides(long_idx),
                          Combine::kAdd, true))
                   .use);
  // The tile path needs no workspace (float16 would need the accumulator otherwise).
  const ScatterArgs h = args(DType::kFloat16, out, idx, ist, Combine::kAdd, true);
  ScatterPlan p;
  ErrorDetail e;
  ASSERT_EQ(stridewise::plan_scatter(h, &p, &e), Status::kOk);
  ScatterHostRunner r;
  EXPECT_EQ(cs::call_layout(h, p, cs::PathChoice::kAuto, r).total, 0);
  EXPECT_GT(cs::call_layout(h, p, cs::PathChoice::kNever, r).total, 0);
}

// The selection rule, key widths, end_bit and the workspace layout, on views over fake
// addresses (nothing is touched).
TEST(ScatterEmulated, SortedRuleAndWorkspace) {
  auto args = [&](const std::vector<int64_t>& osz, const std::vector<int64_t>& isz,
                  const std::vector<int64_t>& ist, int64_t dim) {
    ScatterArgs a;
    a.out = view(fake(0), DType::kFloat32, osz, swt::contiguous_strides(osz));
    a.self = a.out;
    a.index = view(fake(1), DType::kInt64, isz, ist);
    a.src = view(fake(2), DType::kFloat32, isz, swt::contiguous_strides(isz));
    a.dim = dim;
    a.desc = stridewise::scatter_desc(stridewise::OpCode::kScatterAdd, Combine::kAdd);
    a.deterministic = true;
    return a;
  };
  auto shape = [](const ScatterArgs& a, cs::PathChoice ch = cs::PathChoice::kAuto) {
    ScatterPlan p;
    ErrorDetail e;
    EXPECT_EQ(stridewise::plan_scatter(a, &p, &e), Status::kOk) << e.message;
    return cs::sort_shape(a, p, ch);
  };
  // The MoE combine: 4096 lines of 131072 steps.
  ScatterArgs moe = args({16384, 4096}, {131072, 4096}, {1, 0}, 0);
  cs::SortShape s = shape(moe);
  EXPECT_TRUE(s.use);
  EXPECT_EQ(s.n, 131072);
  EXPECT_EQ(s.end_bit, 14);
  EXPECT_FALSE(s.wide);
  EXPECT_EQ(s.lines, 4096);
  EXPECT_FALSE(shape(moe, cs::PathChoice::kNever).use);
  moe.deterministic = false;  // big enough to pay for the sort
  EXPECT_TRUE(shape(moe).use);
  // Not shared (index stride on another dim), and shared through a size-1 dim.
  EXPECT_FALSE(shape(args({64, 8}, {100, 8}, {8, 1}, 0), cs::PathChoice::kAlways).use);
  EXPECT_TRUE(shape(args({64, 1}, {100, 1}, {1, 1}, 0)).use);
  // Not deterministic: only calls with kSegMinElems elements and kSegMinLines lines.
  ScatterArgs small = args({64, 32}, {32767, 32}, {1, 0}, 0);  // 2^20 - 32 elements
  small.deterministic = false;
  EXPECT_FALSE(shape(small).use);
  EXPECT_TRUE(shape(small, cs::PathChoice::kAlways).use);
  small = args({64, 32}, {32768, 32}, {1, 0}, 0);
  small.deterministic = false;
  EXPECT_TRUE(shape(small).use);
  small.desc = stridewise::scatter_desc(stridewise::OpCode::kScatter, Combine::kCopy);
  EXPECT_FALSE(shape(small).use);  // copy: one write per element, any writer may win
  small.deterministic = true;
  EXPECT_TRUE(shape(small).use);
  ScatterArgs narrow = args({64, 31}, {1 << 20, 31}, {1, 0}, 0);  // 31 lines
  narrow.deterministic = false;
  EXPECT_FALSE(shape(narrow).use);
  narrow.deterministic = true;
  EXPECT_TRUE(shape(narrow).use);
  // line_len 1: nothing to sort. end_bit and key widths.
  EXPECT_FALSE(shape(args({64, 8}, {1, 8}, {1, 0}, 0), cs::PathChoice::kAlways).use);
  EXPECT_EQ(shape(args({1, 8}, {5, 8}, {1, 0}, 0)).end_bit, 1);
  EXPECT_EQ(shape(args({2, 8}, {5, 8}, {1, 0}, 0)).end_bit, 1);
  EXPECT_EQ(shape(args({3, 8}, {5, 8}, {0, 0}, 0)).end_bit, 2);
  s = shape(args({int64_t(1) << 32}, {7}, {1}, 0));
  EXPECT_EQ(s.end_bit, 32);
  EXPECT_FALSE(s.wide);
  s = shape(args({(int64_t(1) << 32) + 1}, {7}, {1}, 0));
  EXPECT_EQ(s.end_bit, 33);
  EXPECT_TRUE(s.wide);

  // Layout: four arrays, the temp storage and the carry (2 x 128 lines x float32 per chunk of
  // 64 positions: 16 chunks), 256-aligned, disjoint; replaces the accumulator.
  ScatterArgs mean = args({50, 128}, {1000, 128}, {1, 0}, 0);
  mean.desc = stridewise::scatter_desc(stridewise::OpCode::kScatterReduce, Combine::kMean);
  s = shape(mean);
  ASSERT_TRUE(s.use);
  const cs::WsLayout w = cs::ws_layout(mean, s, 999);
  EXPECT_TRUE(w.sorted);
  EXPECT_EQ(w.keys_at[0], 0);
  EXPECT_EQ(w.keys_at[1], 4096);  // 1000 * 4 bytes, 256-aligned
  EXPECT_EQ(w.vals_at[0], 8192);
  EXPECT_EQ(w.vals_at[1], 12288);
  EXPECT_EQ(w.temp_at, 16384);
  EXPECT_EQ(w.temp_bytes, 1024);
  EXPECT_EQ(w.carry_at, 16384 + 1024);
  EXPECT_EQ(w.total, 16384 + 1024 + 16 * 2 * 128 * 4);
  ScatterArgs copy = mean;
  copy.desc = stridewise::scatter_desc(stridewise::OpCode::kScatter, Combine::kCopy);
  EXPECT_EQ(cs::ws_layout(copy, s, 999).total, 16384 + 1024);  // copy: no carry

  // Too small a workspace: kInvalidArgument before anything is launched.
  ScatterPlan plan;
  ErrorDetail e;
  ASSERT_EQ(stridewise::plan_scatter(mean, &plan, &e), Status::kOk);
  ScatterHostRunner r;
  int64_t word = 0;
  std::string why;
  const int64_t need = cs::call_layout(mean, plan, cs::PathChoice::kAuto, r).total;
  EXPECT_EQ(need, 16384 + cs::align256(r.sort_temp_bytes(s)) + 16 * 2 * 128 * 4);
  EXPECT_EQ(cs::run_scatter(mean, plan, fake(3), size_t(need - 1), cs::ScatterSite{},
                            cs::Abort{&word, 1}, r, &why),
            Status::kInvalidArgument);
  EXPECT_TRUE(r.launches.empty());
}

}  // namespace
}  // namespace swct
