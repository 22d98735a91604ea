// Bad index values, bad arguments, and the vector-width choice.
#include <gtest/gtest.h>

#include <atomic>
#include <cstring>
#include <limits>
#include <thread>

#include "stridewise/gather.h"
#include "test_util.h"

namespace swt {
namespace {

using stridewise::ErrorDetail;
using stridewise::format_index_error;
using stridewise::gather_cpu;
using stridewise::GatherArgs;
using stridewise::GatherPlan;
using stridewise::kGatherIndex;
using stridewise::make_view;
using stridewise::OpCode;
using stridewise::pick_gather_vec;
using stridewise::plan_gather;
using stridewise::Status;

// Expects kIndexOutOfRange naming `value` at plan position `position` from every executor,
// and no byte of out's storage outside its elements touched.
void expect_index_error(GatherCase& c, int64_t position, int64_t value, uint64_t seed) {
  SCOPED_TRACE(c.describe());
  const ChunkyExec chunky1(seed, 5, 1), chunky4(seed + 1, 3, 4);
  const std::pair<const char*, stridewise::CpuExecutor> execs[] = {
      {"serial", stridewise::serial_cpu_executor()},
      {"default", stridewise::default_cpu_executor()},
      {"chunky1", chunky1.exec()},
      {"chunky4", chunky4.exec()}};
  // Bytes of out that belong to no element must stay poisoned even on the error path.
  std::vector<bool> is_elem(c.out.storage_bytes(), false);
  const int64_t es = c.out.esize;
  const size_t base = static_cast<size_t>(c.out.offset * es);
  for (int64_t i = 0; i < c.out.view.numel(); ++i)
    for (int64_t b = 0; b < es; ++b)
      is_elem[base + static_cast<size_t>(offset_of(c.out.view, i) * es + b)] = true;
  for (const auto& ex : execs) {
    SCOPED_TRACE(ex.first);
    poison(c.out);
    ErrorDetail e;
    ASSERT_EQ(gather_cpu(c.args(), ex.second, &e), Status::kIndexOutOfRange);
    EXPECT_EQ(e.status, Status::kIndexOutOfRange);
    EXPECT_EQ(e.op, OpCode::kGather);
    EXPECT_EQ(e.position, position);
    EXPECT_EQ(e.value, value);
    EXPECT_EQ(e.dim, c.dim);
    EXPECT_EQ(e.lo, 0);
    EXPECT_EQ(e.hi, c.self.view.rank ? c.self.view.sizes[c.dim] : 1);
    EXPECT_EQ(e.message, format_index_error(e));
    for (size_t i = 0; i < is_elem.size(); ++i)
      if (!is_elem[i]) {
        ASSERT_EQ(c.out.base()[i], 0xAB) << "gap byte " << i << " written";
      }
  }
}

TEST(GatherErrors, SeedCaseMessage) {
  GatherCase c = gather_case(DType::kFloat16, DType::kInt64, 1, {4, 16, 384}, {6144, 384, 1},
                             {4, 1, 384}, {1, 1, 0}, {384, 384, 1});
  // Index storage holds 4 values (one per batch row); batch 1 is planned dim 1, so the
  // first position that reads it is 384.
  write_index(c.index.view, 1, 16);
  expect_index_error(c, 384, 16, 1);
  ErrorDetail e;
  ASSERT_EQ(gather_cpu(c.args(), stridewise::serial_cpu_executor(), &e), Status::kIndexOutOfRange);
  EXPECT_EQ(format_index_error(e), "index 16 is out of bounds for dimension 1 with size 16");
  EXPECT_EQ(e.message, "index 16 is out of bounds for dimension 1 with size 16");

  write_index(c.index.view, 3, -1);
  expect_index_error(c, 384, 16, 2);
  write_index(c.index.view, 0, -1);
  expect_index_error(c, 0, -1, 3);
}

TEST(GatherErrors, RankZeroAndEmptySelfDim) {
  GatherCase c = gather_case(DType::kFloat32, DType::kInt32, 0, {}, {}, {}, {}, {});
  write_index(c.index.view, 0, 1);
  expect_index_error(c, 0, 1, 4);
  ErrorDetail e;
  gather_cpu(c.args(), stridewise::serial_cpu_executor(), &e);
  EXPECT_EQ(e.message, "index 1 is out of bounds for dimension 0 with size 1");

  // self has no valid index at all on dim 1: the first position is the error.
  GatherCase z =
      gather_case(DType::kFloat32, DType::kInt64, 1, {3, 0}, {1, 1}, {3, 2}, {2, 1}, {2, 1});
  expect_index_error(z, 0, 0, 5);
}

// Smallest offending position in plan order, computed by brute force over the plan.
int64_t first_bad_position(const GatherCase& c, const GatherPlan& plan, int64_t hi) {
  for (int64_t p = 0; p < plan.loop.numel; ++p) {
    const int64_t v = read_index(c.index.view, stridewise::plan_offset(plan.loop, kGatherIndex, p));
    if (v < 0 || v >= hi) return p;
  }
  return -1;
}

TEST(GatherErrors, RandomBadValuesReportFirstPosition) {
  Rng rng(test_seed() ^ 0xBAD);
  SCOPED_TRACE("seed " + std::to_string(test_seed()));
  const int ranks[] = {0, 1, 2, 3, 4, 5, 6, 8, 10, 25};
  for (DType idx : {DType::kInt32, DType::kInt64}) {
    for (int rank : ranks) {
      for (int rep = 0; rep < 30; ++rep) {
        GatherCase c = random_gather_case(rng, DType::kFloat32, idx, rank, GatherCaseOpts{});
        const int64_t n = c.index.view.numel();
        const int64_t hi = rank ? c.self.view.sizes[c.dim] : 1;
        const int64_t big = idx == DType::kInt32 ? std::numeric_limits<int32_t>::max()
                                                 : std::numeric_limits<int64_t>::max();
        const int64_t small = idx == DType::kInt32 ? std::numeric_limits<int32_t>::min()
                                                   : std::numeric_limits<int64_t>::min();
        const int64_t bad_values[] = {-1, hi, hi + 3, big, small, -hi};
        const int64_t nbad = rand_int(rng, 1, 3);
        for (int64_t k = 0; k < nbad; ++k)
          write_index(c.index.view, offset_of(c.index.view, rand_int(rng, 0, n - 1)),
                      bad_values[rand_int(rng, 0, 5)]);
        GatherPlan plan;
        ASSERT_EQ(plan_gather(c.args(), &plan, nullptr), Status::kOk);
        const int64_t p = first_bad_position(c, plan, hi);
        ASSERT_GE(p, 0);
        const int64_t v =
            read_index(c.index.view, stridewise::plan_offset(plan.loop, kGatherIndex, p));
        expect_index_error(c, p, v, rng());
        if (HasFatalFailure()) return;
      }
    }
  }
}

// A bad value late in a long run: chunks after it must not win, chunks before must not stop.
TEST(GatherErrors, LargeDeterministicAcrossThreadCounts) {
  GatherCase c = gather_case(DType::kUInt8, DType::kInt32, 0, {4, 200000}, {200000, 1}, {3, 200000},
                             {200000, 1}, {200000, 1});
  write_index(c.index.view, 2 * 200000 + 17, 9);
  write_index(c.index.view, 150001, -5);
  write_index(c.index.view, 150002, 4);
  expect_index_error(c, 150001, -5, 7);
}

// Two chunks that run truly concurrently: the first half finds its bad value early in wall
// time but late in its walk; the second half starts before that is published and finds a
// later position after it. Only an atomic min keeps the smaller position; "last store
// wins" or a non-atomic compare would report the second half's value.
void halves_parallel_for(void*, int64_t n, int64_t, stridewise::RangeFn fn, void* ctx) {
  std::atomic<int> ready{0};
  auto run = [&](int64_t b, int64_t e) {
    ready.fetch_add(1);
    while (ready.load() < 2) {
    }
    fn(ctx, b, e);
  };
  std::thread second(run, n / 2, n);
  run(0, n / 2);
  second.join();
}

TEST(GatherErrors, ConcurrentChunksKeepSmallestPosition) {
  const int64_t n = int64_t{1} << 22;
  GatherCase c = gather_case(DType::kUInt8, DType::kInt32, 0, {4}, {1}, {n}, {1}, {1});
  write_index(c.index.view, n / 4, 7);   // first half: found after n/4 elements
  write_index(c.index.view, n - 1, -3);  // second half: found after n/2 elements
  const stridewise::CpuExecutor halves{&halves_parallel_for, nullptr};
  for (int rep = 0; rep < 20; ++rep) {  // each rep is one chance to expose a wrong merge
    ErrorDetail e;
    ASSERT_EQ(gather_cpu(c.args(), halves, &e), Status::kIndexOutOfRange);
    ASSERT_EQ(e.position, n / 4);
    ASSERT_EQ(e.value, 7);
  }
}

// ---- argument errors ----

GatherArgs seed_args(void* self, void* index, void* out, DType dt = DType::kFloat16) {
  GatherArgs a;
  a.self = make_view(self, dt, {4, 16, 384}, {6144, 384, 1});
  a.index = make_view(index, DType::kInt64, {4, 1, 384}, {1, 1, 0});
  a.out = make_view(out, dt, {4, 1, 384}, {384, 384, 1});
  a.dim = 1;
  return a;
}

alignas(64) uint16_t g_self[4 * 16 * 384 + 8];
alignas(64) int64_t g_index[4];
alignas(64) uint16_t g_out[4 * 384 + 8];

void expect_invalid(const GatherArgs& a, Status want, const std::string& needle) {
  ErrorDetail e;
  GatherPlan p;
  EXPECT_EQ(plan_gather(a, &p, &e), want) << e.message;
  EXPECT_EQ(e.status, want);
  EXPECT_NE(e.message.find(needle), std::string::npos) << e.message;
  EXPECT_EQ(gather_cpu(a, stridewise::serial_cpu_executor(), &e), want);
}

TEST(GatherArgsCheck, ValidSeedPlans) {
  ErrorDetail e;
  GatherPlan p;
  ASSERT_EQ(plan_gather(seed_args(g_self, g_index, g_out), &p, &e), Status::kOk) << e.message;
  EXPECT_EQ(p.self_dim_size, 16);
  EXPECT_EQ(p.self_dim_stride, 384);
  EXPECT_EQ(p.dim, 1);
  EXPECT_EQ(p.loop.rank, 2);
  EXPECT_EQ(p.loop.strides[kGatherIndex][0], 0);
  EXPECT_TRUE(p.loop.fits_int32);
}

// Offsets reached through index values count toward the 32-bit decision (sizes only; the
// data is never touched by planning).
TEST(GatherArgsCheck, SelfDimExtentCountsTowardInt32) {
  GatherArgs a;
  a.self = make_view(g_self, DType::kFloat16, {3, 2}, {int64_t{1} << 30, 1});
  a.index = make_view(g_index, DType::kInt64, {1, 2}, {2, 1});
  a.out = make_view(g_out, DType::kFloat16, {1, 2}, {2, 1});
  a.dim = 0;
  GatherPlan p;
  ASSERT_EQ(plan_gather(a, &p, nullptr), Status::kOk);
  EXPECT_FALSE(p.loop.fits_int32);  // index value 2 reaches offset 2^31
  a.self.sizes[0] = 2;
  ASSERT_EQ(plan_gather(a, &p, nullptr), Status::kOk);
  EXPECT_TRUE(p.loop.fits_int32);
  a.self.sizes[0] = 0;  // no valid index value: nothing reachable through dim
  ASSERT_EQ(plan_gather(a, &p, nullptr), Status::kOk);
  EXPECT_TRUE(p.loop.fits_int32);
  EXPECT_EQ(p.self_dim_size, 0);
}

TEST(GatherArgsCheck, BadArgumentsNameSizes) {
  GatherArgs a = seed_args(g_self, g_index, g_out);
  a.index.sizes[0] = 5;
  a.out.sizes[0] = 5;
  expect_invalid(a, Status::kInvalidArgument,
                 "Size does not match at dimension 0 expected index [5, 1, 384] to be no larger "
                 "than self [4, 16, 384] apart from dimension 1");
  a = seed_args(g_self, g_index, g_out);
  a.out.sizes[2] = 383;
  expect_invalid(a, Status::kInvalidArgument, "[4, 1, 383]");
  a = seed_args(g_self, g_index, g_out);
  a.index.rank = 2;
  expect_invalid(a, Status::kInvalidArgument,
                 "Index tensor must have the same number of dimensions as input tensor");
  a = seed_args(g_self, g_index, g_out);
  a.out.rank = 2;
  expect_invalid(a, Status::kInvalidArgument, "[4, 1]");
  a = seed_args(g_self, g_index, g_out);
  a.index.dtype = DType::kInt16;
  expect_invalid(a, Status::kInvalidArgument, "Expected dtype int32/int64 for index");
  a = seed_args(g_self, g_index, g_out);
  a.out.dtype = DType::kFloat32;
  expect_invalid(a, Status::kInvalidArgument, "float32");
  a = seed_args(g_self, g_index, g_out);
  a.dim = 3;
  expect_invalid(a, Status::kInvalidArgument, "Dimension out of range");
  a.dim = -1;
  expect_invalid(a, Status::kInvalidArgument, "Dimension out of range");
  a = seed_args(g_self, g_index, g_out);
  a.self.strides[0] = -1;
  expect_invalid(a, Status::kInvalidArgument, "negative");
  a = seed_args(g_self, g_index, g_out);
  a.out.strides[2] = 0;
  expect_invalid(a, Status::kInvalidArgument, "more than one element of the written-to tensor");
  a = seed_args(g_self, g_index, g_out);
  a.self.rank = a.index.rank = a.out.rank = stridewise::kMaxRank + 1;
  expect_invalid(a, Status::kUnsupported, "at most 64");
}

// ---- vector width ----

int vec_of(const GatherArgs& a, int max_bytes = 16) {
  GatherPlan p;
  EXPECT_EQ(plan_gather(a, &p, nullptr), Status::kOk);
  EXPECT_EQ(p.vec, pick_gather_vec(a, p, 16));
  return pick_gather_vec(a, p, max_bytes);
}

TEST(GatherVec, SeedCaseVectorizesWhenAligned) {
  EXPECT_EQ(vec_of(seed_args(g_self, g_index, g_out)), 8);
  EXPECT_EQ(vec_of(seed_args(g_self, g_index, g_out), 8), 4);
  EXPECT_EQ(vec_of(seed_args(g_self, g_index, g_out, DType::kFloat32)), 4);
  EXPECT_EQ(vec_of(seed_args(g_self, g_index, g_out, DType::kUInt8)), 16);
  EXPECT_EQ(vec_of(seed_args(g_self, g_index, g_out, DType::kFloat64)), 2);
  EXPECT_EQ(vec_of(seed_args(g_self, g_index, g_out, DType::kComplex128)), 1);
}

TEST(GatherVec, ScalarWhenMisalignedOrIndexNotExpanded) {
  EXPECT_EQ(vec_of(seed_args(g_self + 1, g_index, g_out)), 1);
  EXPECT_EQ(vec_of(seed_args(g_self, g_index, g_out + 1)), 1);
  EXPECT_EQ(vec_of(seed_args(g_self + 2, g_index, g_out)), 2);  // 4-byte aligned
  GatherArgs a = seed_args(g_self, g_index, g_out);
  a.index.strides[0] = 384;
  a.index.strides[2] = 1;
  EXPECT_EQ(vec_of(a), 1);
  a = seed_args(g_self, g_index, g_out);
  a.index.sizes[2] = a.out.sizes[2] = 380;  // 380 % 8 != 0
  EXPECT_EQ(vec_of(a), 4);
  a = seed_args(g_self, g_index, g_out);
  a.self.strides[1] = 386;  // dim stride not a multiple of 8 (self then a strided view)
  a.self.strides[0] = 386 * 16;
  EXPECT_EQ(vec_of(a), 2);
  a = seed_args(g_self, g_index, g_out);
  a.out.strides[0] = 385;  // out rows not a multiple of vec apart
  a.out.strides[1] = 385;
  EXPECT_EQ(vec_of(a), 1);
}

}  // namespace
}  // namespace swt
