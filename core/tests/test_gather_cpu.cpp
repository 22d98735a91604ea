// gather_cpu against an obvious reference over random layouts of all three operands.
//
// Every storage ends at a guard page, out is poisoned (0xAB) before each run and self never
// holds a 0xAB byte, so comparing the whole out storage with the reference proves that
// every out element was written and that no byte between out elements was touched.
#include <gtest/gtest.h>

#include <cstring>
#include <tuple>

#include "stridewise/gather.h"
#include "test_util.h"

namespace swt {
namespace {

using stridewise::CpuExecutor;
using stridewise::ErrorDetail;
using stridewise::gather_cpu;
using stridewise::Status;

std::vector<unsigned char> bytes_of(const TestTensor& t) {
  return std::vector<unsigned char>(t.base(), t.base() + t.storage_bytes());
}

// Runs gather_cpu with `ex` and compares every byte of out's storage with the reference.
// `planned`: through the plan-taking entry point, with the plan made here first.
void run_and_check(GatherCase& c, const CpuExecutor& ex, const char* ex_name,
                   bool planned = false) {
  SCOPED_TRACE(std::string(ex_name) + ":" + c.describe());
  poison(c.out);
  const std::vector<unsigned char> self_before = bytes_of(c.self), index_before = bytes_of(c.index);
  const std::vector<unsigned char> out_before = bytes_of(c.out);
  const std::vector<unsigned char> want =
      reference_gather(c.out.view, c.self.view, c.index.view, c.dim, c.out.base(),
                       c.out.storage_bytes(), out_before.data());
  ErrorDetail err;
  stridewise::GatherPlan plan;
  if (planned) {
    ASSERT_EQ(stridewise::plan_gather(c.args(), &plan, &err), Status::kOk) << err.message;
  }
  const Status s = planned ? gather_cpu(c.args(), plan, ex, &err) : gather_cpu(c.args(), ex, &err);
  ASSERT_EQ(s, Status::kOk) << err.message;
  ASSERT_EQ(diff_bytes(c.out.base(), want.data(), want.size()), "");
  ASSERT_EQ(diff_bytes(c.self.base(), self_before.data(), self_before.size()), "")
      << "self written";
  ASSERT_EQ(diff_bytes(c.index.base(), index_before.data(), index_before.size()), "")
      << "index written";
}

void run_all_executors(GatherCase& c, uint64_t seed) {
  run_and_check(c, stridewise::serial_cpu_executor(), "serial");
  run_and_check(c, stridewise::default_cpu_executor(), "default");
  const ChunkyExec chunky(seed, 7, 3);
  run_and_check(c, chunky.exec(), "chunky");
  run_and_check(c, chunky.exec(), "chunky, planned", /*planned=*/true);
}

class GatherCpuRandom : public ::testing::TestWithParam<std::tuple<DType, DType>> {};

TEST_P(GatherCpuRandom, MatchesReferenceOnRandomLayouts) {
  const DType dtype = std::get<0>(GetParam());
  const DType idx = std::get<1>(GetParam());
  Rng rng(test_seed() ^ (static_cast<uint64_t>(dtype) << 8) ^ static_cast<uint64_t>(idx));
  SCOPED_TRACE("seed " + std::to_string(test_seed()));
  const int ranks[] = {0, 1, 2, 3, 4, 5, 6, 7, 8, 10, 25, 64};
  for (int rank : ranks) {
    for (int rep = 0; rep < 40; ++rep) {
      GatherCaseOpts o;
      o.allow_empty = rep % 5 == 4;
      GatherCase c = random_gather_case(rng, dtype, idx, rank, o);
      run_all_executors(c, rng());
      if (HasFatalFailure()) return;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(ElemSizes, GatherCpuRandom,
                         ::testing::Combine(::testing::Values(DType::kUInt8, DType::kFloat16,
                                                              DType::kFloat32, DType::kFloat64,
                                                              DType::kComplex128),
                                            ::testing::Values(DType::kInt32, DType::kInt64)),
                         [](const auto& info) {
                           return std::string(stridewise::dtype_name(std::get<0>(info.param))) +
                                  "_" + stridewise::dtype_name(std::get<1>(info.param));
                         });

// The seed's layout: an expanded index read along the fast dim.
TEST(GatherCpu, SeedCaseExpandedIndex) {
  for (DType dt : {DType::kFloat16, DType::kFloat32, DType::kComplex128}) {
    GatherCase c = gather_case(dt, DType::kInt64, 1, {4, 16, 384}, {6144, 384, 1}, {4, 1, 384},
                               {1, 1, 0}, {384, 384, 1});
    run_all_executors(c, 1);
  }
}

TEST(GatherCpu, IndexSmallerThanSelfOnOtherDims) {
  GatherCase c = gather_case(DType::kFloat32, DType::kInt64, 0, {5, 7, 3}, {21, 3, 1}, {2, 4, 2},
                             {8, 2, 1}, {1, 2, 8});
  run_all_executors(c, 2);
  GatherCase t = gather_case(DType::kFloat64, DType::kInt32, 2, {5, 7, 3}, {1, 5, 35}, {3, 2, 6},
                             {0, 6, 1}, {12, 6, 1});
  run_all_executors(t, 3);
}

TEST(GatherCpu, RankZero) {
  for (DType idx : {DType::kInt32, DType::kInt64}) {
    GatherCase c = gather_case(DType::kFloat32, idx, 0, {}, {}, {}, {}, {});
    run_all_executors(c, 4);
  }
}

TEST(GatherCpu, EmptyTouchesNothing) {
  // Empty index with a non-empty self; empty self dim with an empty index; offsets so the
  // (poisoned) out storage is not empty and an errant write would show.
  struct Shape {
    std::vector<int64_t> self, index;
    int64_t dim;
  };
  const Shape shapes[] = {
      {{2, 3}, {0, 3}, 0}, {{3, 0}, {3, 0}, 1}, {{0, 4}, {0, 2}, 1}, {{4, 5, 6}, {4, 0, 6}, 2}};
  for (const auto& sh : shapes) {
    std::vector<int64_t> st(sh.self.size(), 1), ist(sh.index.size(), 1);
    GatherCase c;
    c.dim = sh.dim;
    c.self = make_tensor(DType::kFloat32, sh.self, st, 3);
    c.index = make_tensor(DType::kInt64, sh.index, ist, 3);
    c.out = make_tensor(DType::kFloat32, sh.index, ist, 3);
    Rng rng(5);
    fill_random_bytes(rng, c.self);
    fill_index(rng, c.index, 0, 0);
    run_all_executors(c, 5);
  }
}

// Large enough for the default executor to split the work across threads.
TEST(GatherCpu, LargeCasesAcrossThreads) {
  Rng rng(test_seed() ^ 0x1A5);
  GatherCase seed = gather_case(DType::kFloat16, DType::kInt64, 1, {256, 16, 384}, {6144, 384, 1},
                                {256, 1, 384}, {1, 1, 0}, {384, 384, 1});
  run_all_executors(seed, rng());
  GatherCase transposed =
      gather_case(DType::kFloat32, DType::kInt32, 0, {9, 300, 200}, {1, 9, 2700}, {7, 300, 100},
                  {30000, 100, 1}, {1, 7 * 100, 7});
  run_all_executors(transposed, rng());
  LayoutOpts in, out;
  out.allow_expand = out.allow_overlap = false;
  GatherCase r;
  r.dim = 2;
  r.self = make_random_tensor(rng, DType::kFloat64, {60, 40, 50}, in);
  r.index = make_random_tensor(rng, DType::kInt64, {60, 40, 45}, in);
  r.out = make_random_tensor(rng, DType::kFloat64, {60, 40, 45}, out);
  fill_random_bytes(rng, r.self);
  fill_index(rng, r.index, 0, 49);
  run_all_executors(r, rng());
}

}  // namespace
}  // namespace swt
