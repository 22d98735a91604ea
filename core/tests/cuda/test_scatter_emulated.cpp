// The CUDA scatter's kernel bodies and launch sequence (scatter_cuda_impl.h,
// scatter_cuda_dispatch.h) run on the host by ScatterHostRunner: every thread of every block,
// plain read-modify-writes in place of atomics, the abort word checked per block. Compared
// with the host reference of scatter_test_util.h over random layouts (transposed, expanded,
// offset, step-sliced operands), ranks 0..6, int32/int64 index, duplicates, in place and out
// of place, src and value forms, every combine and include_self, deterministic or not, and bad
// index values (nothing written at all, the report filled). Needs no GPU, never skips.
//
// Inputs hold small integers (powers of two for multiply), so every floating combine is
// exact in any order and the comparison is bitwise (NaNs compare equal to NaNs).
// The sorted-segment path (scatter_cuda_sorted.h; the runner's sort is std::stable_sort):
// shared-index layouts against the reference, bitwise against the lines kernel with
// arbitrary values, and its selection rule and workspace layout.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
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

TEST(ScatterEmulated, RandomLayoutsEveryRank) {
  const uint64_t seed = swt::test_seed();
  swt::Rng rng(seed);
  int failures = 0;
  for (int rank = 0; rank <= 6; ++rank) {
    for (int i = 0; i < 300 && failures < 5; ++i) {
      ScatterCaseOpts o;
      o.rank = rank;
      ScatterCase c = random_scatter_case(rng, o);
      const unsigned cap = swt::coin(rng, 0.2) ? unsigned(swt::rand_int(rng, 1, 3)) : 0;
      const auto r = scatter_emulated_matches(c, seed, cap);
      EXPECT_TRUE(r) << "rank " << rank << " iteration " << i;
      failures += r ? 0 : 1;
    }
  }
}

// Every dtype x combine x include_self x in place x value form x deterministic.
TEST(ScatterEmulated, EveryDtypeCombineAndForm) {
  const uint64_t seed = swt::test_seed();
  swt::Rng rng(seed);
  int failures = 0;
  for (DType dt : kScatterTypes) {
    for (int comb = 0; comb <= 5; ++comb) {
      if (!stridewise::scatter_supports(dt, static_cast<Combine>(comb))) continue;
      for (int form = 0; form < 16 && failures < 5; ++form) {
        ScatterCaseOpts o;
        o.random_dtype = false;
        o.dtype = dt;
        o.combine = comb;
        o.include_self = form & 1;
        o.in_place = (form >> 1) & 1;
        o.has_value = (form >> 2) & 1;
        o.deterministic = (form >> 3) & 1;
        o.rank = static_cast<int>(swt::rand_int(rng, 1, 3));
        ScatterCase c = random_scatter_case(rng, o);
        const auto r = scatter_emulated_matches(c, seed);
        EXPECT_TRUE(r) << stridewise::dtype_name(dt) << " form " << form;
        failures += r ? 0 : 1;
      }
    }
  }
}

// NaN in self and src: amax/amin keep ATen's rule (a NaN from src wins, one in out stays).
TEST(ScatterEmulated, NanRuleOfMaxMin) {
  const uint64_t seed = swt::test_seed();
  swt::Rng rng(seed);
  const DType floats[] = {DType::kFloat16, DType::kBFloat16, DType::kFloat32, DType::kFloat64};
  for (int i = 0; i < 400; ++i) {
    ScatterCaseOpts o;
    o.random_dtype = false;
    o.dtype = floats[swt::rand_int(rng, 0, 3)];
    o.combine = static_cast<int>(swt::coin(rng, 0.5) ? Combine::kMax : Combine::kMin);
    o.nan = true;
    o.max_size = 6;
    ScatterCase c = random_scatter_case(rng, o);
    EXPECT_TRUE(scatter_emulated_matches(c, seed)) << "iteration " << i;
  }
}

// One bad index value: the call reports it (a bad value, at a plan position that holds it)
// and out keeps every byte -- the copy and every combine are skipped by the abort word.
TEST(ScatterEmulated, BadIndexWritesNothing) {
  const uint64_t seed = swt::test_seed();
  swt::Rng rng(seed);
  int planted = 0;
  for (int i = 0; i < 600; ++i) {
    ScatterCase c = random_scatter_case(rng, {});
    if (!plant_bad_index(rng, c)) continue;
    ++planted;
    EXPECT_TRUE(scatter_emulated_matches(c, seed, swt::coin(rng, 0.3) ? 2 : 0))
        << "iteration " << i;
  }
  EXPECT_GT(planted, 300);
}

// The abort word gates every block of every launch after validation.
TEST(ScatterEmulated, AbortWordSkipsEveryLaterBlock) {
  swt::Rng rng(swt::test_seed());
  ScatterCaseOpts o;
  o.random_dtype = false;
  o.dtype = DType::kFloat16;
  o.combine = static_cast<int>(Combine::kMean);
  o.in_place = 0;
  o.deterministic = 0;
  o.rank = 2;
  o.max_size = 40;
  ScatterCase c = random_scatter_case(rng, o);
  while (!plant_bad_index(rng, c)) c = random_scatter_case(rng, o);  // an empty index: again
  ScatterHostRunner r;
  ErrorDetail e;
  EXPECT_EQ(emulate_scatter(c.args(), r, &e), Status::kIndexOutOfRange);
  const std::vector<std::string> want = {"validate", "copy", "ws_init", "acc_elems", "ws_final"};
  EXPECT_EQ(r.launches, want);
  EXPECT_GE(r.blocks_skipped, 4);
  // Every block of the four gated launches: compare with a run on good data.
  ScatterCase g = random_scatter_case(rng, o);
  ScatterHostRunner rg;
  EXPECT_EQ(emulate_scatter(g.args(), rg, &e), Status::kOk);
  EXPECT_EQ(rg.blocks_skipped, 0);
}

// Deterministic mode with arbitrary floats: lines combine in index order, so the result is
// the reference's bit for bit (floating add is not associative). Lines of at most 8 steps:
// a shared index takes the segment path, whose segments then lie within one chunk, where it
// combines in the same order.
TEST(ScatterEmulated, DeterministicIsIndexOrder) {
  const uint64_t seed = swt::test_seed();
  swt::Rng rng(seed);
  for (int i = 0; i < 200; ++i) {
    ScatterCaseOpts o;
    o.random_dtype = false;
    o.dtype = swt::coin(rng, 0.5) ? DType::kFloat32 : DType::kFloat16;
    o.combine = static_cast<int>(swt::coin(rng, 0.5) ? Combine::kAdd : Combine::kMean);
    o.deterministic = 1;
    o.has_value = 0;
    o.max_size = 8;
    ScatterCase c = random_scatter_case(rng, o);
    float* p = reinterpret_cast<float*>(c.src.base());
    if (o.dtype == DType::kFloat32)
      for (size_t k = 0; k < c.src.storage_bytes() / 4; ++k)
        p[k] = std::uniform_real_distribution<float>(-1, 1)(rng);
    EXPECT_TRUE(scatter_emulated_matches(c, seed)) << "iteration " << i;
  }
}

TEST(ScatterEmulated, WorkspaceLayoutAndCheck) {
  ScatterArgs a;
  a.out = stridewise::make_view(reinterpret_cast<void*>(uintptr_t(1) << 40), DType::kFloat32,
                                {3, 100}, {100, 1});
  a.desc = stridewise::scatter_desc(stridewise::OpCode::kScatterAdd, Combine::kAdd);
  EXPECT_EQ(cs::ws_layout(a).total, 0);
  a.desc = stridewise::scatter_desc(stridewise::OpCode::kScatterReduce, Combine::kMean);
  EXPECT_EQ(cs::ws_layout(a).total, 1280 + 1280);  // 300 floats, 300 counts, 256-aligned
  a.desc = stridewise::scatter_desc(stridewise::OpCode::kScatterReduce, Combine::kMax, false);
  EXPECT_EQ(cs::ws_layout(a).total, 2560);
  a.out.dtype = DType::kBFloat16;
  a.desc = stridewise::scatter_desc(stridewise::OpCode::kScatterReduce, Combine::kMul);
  EXPECT_EQ(cs::ws_layout(a).total, 1280);  // float accumulator, no counts
  a.desc = stridewise::scatter_desc(stridewise::OpCode::kScatter, Combine::kCopy);
  EXPECT_EQ(cs::ws_layout(a).total, 0);

  // Too small a workspace: kInvalidArgument before anything is launched.
  swt::Rng rng(swt::test_seed());
  ScatterCaseOpts o;
  o.random_dtype = false;
  o.dtype = DType::kFloat16;
  o.combine = static_cast<int>(Combine::kAdd);
  o.rank = 2;
  ScatterCase c = random_scatter_case(rng, o);
  const ScatterArgs ca = c.args();
  ScatterPlan plan;
  ErrorDetail e;
  ASSERT_EQ(stridewise::plan_scatter(ca, &plan, &e), Status::kOk);
  ScatterHostRunner r;
  int64_t word = 0;
  std::string why;
  EXPECT_EQ(cs::run_scatter(ca, plan, nullptr, 0, cs::ScatterSite{}, cs::Abort{&word, 1}, r, &why),
            Status::kInvalidArgument);
  EXPECT_TRUE(r.launches.empty());
  EXPECT_NE(why.find("workspace"), std::string::npos) << why;
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
    const auto choice = swt::coin(rng, 0.5) ? cs::SortedChoice::kAlways : cs::SortedChoice::kAuto;
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
// by the keys alone (scatter_cuda_segments.h), so: two runs on different grids are bitwise
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
      if (!stridewise::scatter_supports(dt, Combine(comb))) continue;
      for (int form = 0; form < 4; ++form) {
        const Shape& sh = shapes[swt::rand_int(rng, 0, n_shapes - 1)];
        ScatterCase c = shared_index_case(rng, dt, Combine(comb), form & 1, (form >> 1) & 1,
                                          swt::coin(rng, 0.15), sh.out, sh.dim, sh.line_len, true);
        const std::vector<unsigned char> before(c.out.base(), c.out.base() + c.out.storage_bytes());
        std::vector<unsigned char> got[3];
        ScatterHostRunner runs[3];
        const cs::SortedChoice choice[3] = {cs::SortedChoice::kAlways, cs::SortedChoice::kAlways,
                                            cs::SortedChoice::kNever};
        const unsigned caps[3] = {0, 2, 0};
        for (int k = 0; k < 3; ++k) {
          std::memcpy(c.out.base(), before.data(), before.size());
          runs[k].sorted = choice[k];
          runs[k].grid_cap = caps[k];
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

// The selection rule, key widths, end_bit and the workspace layout, on views over fake
// addresses (nothing is touched).
TEST(ScatterEmulated, SortedRuleAndWorkspace) {
  const auto fake = [](int k) { return reinterpret_cast<void*>((uintptr_t(k) + 1) << 44); };
  const auto view = [](void* p, DType dt, const std::vector<int64_t>& sz,
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
  };
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
  auto shape = [](const ScatterArgs& a, cs::SortedChoice ch = cs::SortedChoice::kAuto) {
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
  EXPECT_FALSE(shape(moe, cs::SortedChoice::kNever).use);
  moe.deterministic = false;  // big enough to pay for the sort
  EXPECT_TRUE(shape(moe).use);
  // Not shared (index stride on another dim), and shared through a size-1 dim.
  EXPECT_FALSE(shape(args({64, 8}, {100, 8}, {8, 1}, 0), cs::SortedChoice::kAlways).use);
  EXPECT_TRUE(shape(args({64, 1}, {100, 1}, {1, 1}, 0)).use);
  // Not deterministic: only calls with kSegMinElems elements and kSegMinLines lines.
  ScatterArgs small = args({64, 32}, {32767, 32}, {1, 0}, 0);  // 2^20 - 32 elements
  small.deterministic = false;
  EXPECT_FALSE(shape(small).use);
  EXPECT_TRUE(shape(small, cs::SortedChoice::kAlways).use);
  small = args({64, 32}, {32768, 32}, {1, 0}, 0);
  small.deterministic = false;
  EXPECT_TRUE(shape(small).use);
  ScatterArgs narrow = args({64, 31}, {1 << 20, 31}, {1, 0}, 0);  // 31 lines
  narrow.deterministic = false;
  EXPECT_FALSE(shape(narrow).use);
  narrow.deterministic = true;
  EXPECT_TRUE(shape(narrow).use);
  // line_len 1: nothing to sort. end_bit and key widths.
  EXPECT_FALSE(shape(args({64, 8}, {1, 8}, {1, 0}, 0), cs::SortedChoice::kAlways).use);
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
  const int64_t need = cs::call_layout(mean, plan, cs::SortedChoice::kAuto, r).total;
  EXPECT_EQ(need, 16384 + cs::align256(r.sort_temp_bytes(s)) + 16 * 2 * 128 * 4);
  EXPECT_EQ(cs::run_scatter(mean, plan, fake(3), size_t(need - 1), cs::ScatterSite{},
                            cs::Abort{&word, 1}, r, &why),
            Status::kInvalidArgument);
  EXPECT_TRUE(r.launches.empty());
}

}  // namespace
}  // namespace swct

namespace swct {
namespace {

// 1- and 2-byte integers and bool accumulate in an int32 workspace (no atomics narrower than
// the element). Full-range values make sums and products wrap: the stored result must still
// be ATen's (wrapped in the narrow type; mean divides the wrapped sum), as the CPU path gives.
TEST(ScatterEmulated, NarrowTypesWrapLikeAten) {
  const uint64_t seed = swt::test_seed();
  swt::Rng rng(seed ^ 0x1234);
  int failures = 0;
  for (DType dt : {DType::kInt8, DType::kUInt8, DType::kInt16, DType::kBool}) {
    for (int comb = 1; comb <= 5; ++comb) {
      if (!stridewise::scatter_supports(dt, static_cast<Combine>(comb))) continue;
      for (int form = 0; form < 8 && failures < 5; ++form) {
        ScatterCaseOpts o;
        o.random_dtype = false;
        o.dtype = dt;
        o.combine = comb;
        o.include_self = form & 1;
        o.in_place = (form >> 1) & 1;
        o.deterministic = (form >> 2) & 1;
        o.has_value = 0;
        o.max_size = 6;
        o.rank = static_cast<int>(swt::rand_int(rng, 1, 3));
        ScatterCase c = random_scatter_case(rng, o);
        for (swt::TestTensor* t : {&c.self, &c.src, &c.out}) {
          if (t->storage_bytes() == 0 || (t == &c.out && !c.in_place)) continue;
          unsigned char* b = t->base();
          for (size_t i = 0; i < t->storage_bytes(); ++i)
            b[i] = dt == DType::kBool ? static_cast<unsigned char>(swt::rand_int(rng, 0, 1))
                                      : static_cast<unsigned char>(swt::rand_int(rng, 0, 255));
        }
        const auto r = scatter_emulated_matches(c, seed);
        EXPECT_TRUE(r) << stridewise::dtype_name(dt) << " combine " << comb << " form " << form;
        failures += r ? 0 : 1;
      }
    }
  }
}

}  // namespace
}  // namespace swct
