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
// The segment and tile paths: test_scatter_emulated_paths.cpp.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
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
      if (!cuda_runs(dt, static_cast<Combine>(comb))) continue;
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
      if (!cuda_runs(dt, static_cast<Combine>(comb))) continue;
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

namespace swct {
namespace {

// The complex product of the kernel bodies is scatter.h's kPlain, the CPU core's bit for bit on
// full-mantissa values (the _rn intrinsics on the device keep nvcc from contracting it; on the
// host the same formula); kFma is the CPU's only and the CUDA path refuses it, as it refuses
// complex mean.
TEST(ScatterEmulated, ComplexProductIsThePlainFormula) {
  using C = stridewise::elem::Cx<double>;
  const uint64_t seed = swt::test_seed();
  swt::Rng rng(seed);
  std::normal_distribution<double> val(0.0, 2.0);
  const int64_t R = 5, Cn = 17, K = 30;
  std::vector<C> out(R * Cn), src(K * Cn);
  std::vector<int64_t> index(K * Cn);
  for (auto& x : out) x = {val(rng), val(rng)};
  for (auto& x : src) x = {val(rng), val(rng)};
  for (auto& i : index) i = swt::rand_int(rng, 0, R - 1);
  for (const bool include_self : {true, false}) {
    for (const bool det : {true, false}) {
      std::vector<C> a = out, b = out;
      ScatterArgs args;
      const auto view = [](void* p, DType dt, int64_t r, int64_t c) {
        stridewise::StridedView v;
        v.data = p;
        v.dtype = dt;
        v.rank = 2;
        v.sizes[0] = r;
        v.sizes[1] = c;
        v.strides[0] = c;
        v.strides[1] = 1;
        return v;
      };
      args.out = args.self = view(a.data(), DType::kComplex128, R, Cn);
      args.index = view(index.data(), DType::kInt64, K, Cn);
      args.src = view(src.data(), DType::kComplex128, K, Cn);
      args.desc =
          stridewise::scatter_desc(stridewise::OpCode::kScatterReduce, Combine::kMul, include_self);
      args.deterministic = det;
      ScatterHostRunner r;
      ErrorDetail e;
      ASSERT_EQ(emulate_scatter(args, r, &e), Status::kOk) << e.message;
      ScatterArgs cpu = args;
      cpu.out.data = cpu.self.data = b.data();
      ASSERT_EQ(stridewise::scatter_cpu(cpu, stridewise::serial_cpu_executor(), &e), Status::kOk);
      EXPECT_EQ(std::memcmp(a.data(), b.data(), a.size() * sizeof(C)), 0)
          << "seed " << seed << " include_self " << include_self << " deterministic " << det;
      args.cx_product = stridewise::ComplexProduct::kFma;
      ScatterHostRunner r2;
      EXPECT_EQ(emulate_scatter(args, r2, &e), Status::kUnsupported);
      // complex mean is CPU only too (positions no index reaches are not visited here)
      args.cx_product = stridewise::ComplexProduct::kPlain;
      args.desc = stridewise::scatter_desc(stridewise::OpCode::kScatterReduce, Combine::kMean,
                                           include_self);
      ScatterHostRunner r3;
      EXPECT_EQ(emulate_scatter(args, r3, &e), Status::kUnsupported);
    }
  }
}

}  // namespace
}  // namespace swct
