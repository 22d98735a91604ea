// index_k_cpu against an obvious reference: random layouts of every operand (expanded,
// transposed, sliced, offset storages), k = 1..kMaxIndexTerms index tensors broadcast over one
// shape with negative values, take/put's flat positions over a non-contiguous self, copy, add
// and mean, reads and writes. The reference walks logical coordinates only (no planner).
//
// Storages are guarded (a write past the end faults) and compared whole: out's poisoned bytes
// must stay where the view does not reach, a write must touch exactly the reference's bytes,
// and a bad index must leave every byte of a written self as it was.
#include <gtest/gtest.h>

#include <cstring>
#include <vector>

#include "index_k_case.h"
#include "stridewise/index_k.h"

namespace swt {
namespace {

using stridewise::Combine;
using stridewise::ErrorDetail;
using stridewise::IndexKArgs;
using stridewise::IndexKPlan;
using stridewise::IndexMode;
using stridewise::IndexRole;
using stridewise::OpCode;
using stridewise::Status;

void run_and_check(IndexKCase& c, uint64_t seed, int trial) {
  const bool write = c.args.desc.role == IndexRole::kWrite;
  const std::vector<unsigned char> want = index_k_reference(c);
  IndexKPlan plan;
  ErrorDetail err;
  ASSERT_EQ(stridewise::plan_index_k(c.args, &plan, &err), Status::kOk) << err.message;
  ChunkyExec ex(seed + trial, 7, 3);
  ASSERT_EQ(stridewise::index_k_cpu(c.args, plan, ex.exec(), &err), Status::kOk) << err.message;
  const TestTensor& t = write ? c.self : c.dense;
  EXPECT_EQ(diff_bytes(t.base(), want.data(), want.size()), "")
      << "seed " << seed << " trial " << trial << " " << c.describe();
}

TEST(IndexKCpu, MatchesReferenceOverRandomLayouts) {
  const uint64_t seed = test_seed();
  Rng rng(seed);
  const DType dts[] = {DType::kFloat32, DType::kInt8, DType::kFloat16, DType::kFloat64,
                       DType::kComplex128};
  for (int trial = 0; trial < 600; ++trial) {
    const IndexMode mode = trial % 3 == 2 ? IndexMode::kUnravel : IndexMode::kSum;
    const IndexRole role = trial % 2 ? IndexRole::kWrite : IndexRole::kRead;
    const Combine comb = role != IndexRole::kWrite ? Combine::kCopy
                         : trial % 4 == 1          ? Combine::kAdd
                         : trial % 8 == 3          ? Combine::kMean
                                                   : Combine::kCopy;
    const DType dt = comb == Combine::kAdd                        ? DType::kFloat32
                     : comb == Combine::kMean && trial % 16 == 11 ? DType::kInt32
                     : comb == Combine::kMean                     ? DType::kFloat32
                                                                  : dts[trial % 5];
    IndexKCase c = make_index_k_case(rng, dt, mode, role, comb);
    run_and_check(c, seed, trial);
    if (HasFailure()) return;
  }
}

TEST(IndexKCpu, BadValueIsReportedAndWritesNothing) {
  const uint64_t seed = test_seed();
  Rng rng(seed);
  int seen = 0;
  for (int trial = 0; trial < 300 && seen < 100; ++trial) {
    const IndexMode mode = trial % 2 ? IndexMode::kUnravel : IndexMode::kSum;
    const IndexRole role = trial % 3 ? IndexRole::kWrite : IndexRole::kRead;
    const Combine comb =
        role == IndexRole::kWrite && trial % 4 == 1 ? Combine::kMean : Combine::kCopy;
    IndexKCase c = make_index_k_case(rng, DType::kFloat32, mode, role, comb);
    if (numel(c.shape) == 0) continue;
    // One element of one index tensor gets a value one past either end.
    const int j = static_cast<int>(rand_int(rng, 0, c.args.k - 1));
    const int64_t bad_val = plant_bad_index(rng, c, j, rand_int(rng, 0, 1) == 1);
    const int64_t lim = mode == IndexMode::kUnravel ? c.self.view.numel() : c.args.term_size[j];
    const std::vector<unsigned char> before(c.self.base(), c.self.base() + c.self.storage_bytes());
    IndexKPlan plan;
    ErrorDetail err;
    ASSERT_EQ(stridewise::plan_index_k(c.args, &plan, &err), Status::kOk) << err.message;
    ChunkyExec ex(seed + trial, 5, 2);
    ASSERT_EQ(stridewise::index_k_cpu(c.args, plan, ex.exec(), &err), Status::kIndexOutOfRange)
        << c.describe();
    EXPECT_EQ(err.value, bad_val);
    EXPECT_EQ(err.hi, lim);
    EXPECT_EQ(err.lo, c.args.desc.wraps ? -lim : 0);
    EXPECT_EQ(err.dim, mode == IndexMode::kUnravel ? -1 : c.args.term_dim[j]);
    if (role == IndexRole::kWrite) {
      EXPECT_EQ(diff_bytes(c.self.base(), before.data(), before.size()), "") << c.describe();
    }
    ++seen;
    if (HasFailure()) return;
  }
  EXPECT_GE(seen, 50);
}

// A read through one index tensor is the gather index_k_as_gather names (the CUDA read runs
// it): gather_cpu over those views gives the reference bytes, negative values wrapped, and a
// bad value (one past either end) is reported as index reports it: its value, self's dim, the
// range ([-n, n) where the descriptor wraps). Every other call is not handed over.
TEST(IndexKCpu, OneIndexReadIsTheGatherItNames) {
  const uint64_t seed = test_seed();
  Rng rng(seed);
  const DType dts[] = {DType::kFloat32, DType::kInt8, DType::kFloat16, DType::kComplex128};
  int handed = 0, bad_seen = 0, negative = 0;
  for (int trial = 0; trial < 1500 && handed < 200; ++trial) {
    const IndexMode mode = trial % 5 == 4 ? IndexMode::kUnravel : IndexMode::kSum;
    const IndexRole role = trial % 7 == 3 ? IndexRole::kWrite : IndexRole::kRead;
    IndexKCase c = make_index_k_case(rng, dts[trial % 4], mode, role, Combine::kCopy);
    stridewise::GatherArgs g;
    const bool one = role == IndexRole::kRead && mode == IndexMode::kSum && c.args.k == 1;
    ASSERT_EQ(stridewise::index_k_as_gather(c.args, &g), one) << c.describe();
    if (!one) continue;
    ++handed;
    SCOPED_TRACE("seed " + std::to_string(seed) + " trial " + std::to_string(trial) + " " +
                 c.describe());
    ASSERT_EQ(g.wraps, c.args.desc.wraps);
    ASSERT_EQ(g.report_dim, c.args.term_dim[0]);
    const bool plant = numel(c.shape) > 0 && trial % 3 == 0;
    int64_t bad_val = 0;
    if (plant) bad_val = plant_bad_index(rng, c, 0, trial % 2 == 0);
    for (int64_t i = 0; i < c.idx[0].view.numel(); ++i)
      negative += read_index(c.idx[0].view, offset_of(c.idx[0].view, i)) < 0;
    ErrorDetail err;
    ChunkyExec ex(seed + trial, 5, 2);
    const Status st = stridewise::gather_cpu(g, ex.exec(), &err);
    if (plant) {
      ASSERT_EQ(st, Status::kIndexOutOfRange);
      EXPECT_EQ(err.op, c.args.desc.op);
      EXPECT_EQ(err.value, bad_val);
      EXPECT_EQ(err.dim, c.args.term_dim[0]);
      EXPECT_EQ(err.lo, c.args.desc.lowest_index(c.args.term_size[0]));
      EXPECT_EQ(err.hi, c.args.term_size[0]);
      ++bad_seen;
      continue;
    }
    ASSERT_EQ(st, Status::kOk) << err.message;
    const std::vector<unsigned char> want = index_k_reference(c);
    EXPECT_EQ(diff_bytes(c.dense.base(), want.data(), want.size()), "");
    if (HasFailure()) return;
  }
  EXPECT_GE(handed, 100);
  EXPECT_GE(bad_seen, 20);
  EXPECT_GT(negative, 50);  // wrapping was exercised (values drawn negative where it wraps)
}

// index_fill's writes: one value, so an expanded self (positions sharing memory) is planned, the
// plan says order-free, and chunks written in parallel in any order give the reference bytes.
// A write of values (not one value) into the same expanded self stays refused.
TEST(IndexKCpu, OrderFreeFillTakesExpandedSelfAndAnyChunking) {
  const uint64_t seed = test_seed();
  Rng rng(seed);
  const DType dts[] = {DType::kFloat32, DType::kBool, DType::kFloat16, DType::kFloat64,
                       DType::kComplex128};
  int expanded = 0;
  for (int trial = 0; trial < 400; ++trial) {
    IndexKCase c = make_fill_case(rng, dts[trial % 5]);
    IndexKPlan plan;
    ErrorDetail err;
    ASSERT_EQ(stridewise::plan_index_k(c.args, &plan, &err), Status::kOk) << err.message;
    EXPECT_TRUE(plan.order_free);
    if (stridewise::detail::has_internal_overlap(c.args.target) && numel(c.shape) > 1) {
      ++expanded;
      IndexKArgs values = c.args;  // a value per position: no longer order-free
      values.has_value = false;
      values.src.data = c.self.view.data;  // any data: the plan must refuse before reading it
      const std::vector<int64_t> dense = contiguous_strides(c.shape);
      for (int d = 0; d < values.src.rank; ++d) values.src.strides[d] = dense[d];
      EXPECT_EQ(stridewise::plan_index_k(values, &plan, &err), Status::kInvalidArgument);
    }
    run_and_check(c, seed, trial);
    if (HasFailure()) return;
  }
  EXPECT_GT(expanded, 20);
}

TEST(IndexKCpu, DuplicatesResolveInIndexOrder) {
  // x[i] = v with i = [1, 1, 1]: the last value wins; x[i] += v adds all three.
  std::vector<float> x = {10, 20, 30}, v = {1, 2, 4};
  std::vector<int64_t> i = {1, 1, -2};
  for (Combine comb : {Combine::kCopy, Combine::kAdd}) {
    std::vector<float> y = x;
    IndexKArgs a;
    a.desc = {OpCode::kIndexPut, IndexRole::kWrite, comb, true, /*wraps=*/true};
    a.self = stridewise::make_view(y.data(), DType::kFloat32, {3}, {0});
    a.target = stridewise::make_view(y.data(), DType::kFloat32, {3}, {1});
    a.src = stridewise::make_view(v.data(), DType::kFloat32, {3}, {1});
    a.index[0] = stridewise::make_view(i.data(), DType::kInt64, {3}, {1});
    a.term_size[0] = 3;
    a.term_stride[0] = 1;
    IndexKPlan plan;
    ErrorDetail err;
    ASSERT_EQ(stridewise::plan_index_k(a, &plan, &err), Status::kOk) << err.message;
    EXPECT_TRUE(plan.may_collide);
    ASSERT_EQ(stridewise::index_k_cpu(a, plan, stridewise::default_cpu_executor(), &err),
              Status::kOk);
    EXPECT_EQ(y[1], comb == Combine::kCopy ? 4.0f : 27.0f);
    EXPECT_EQ(y[0], 10.0f);
    EXPECT_EQ(y[2], 30.0f);
  }
}

// A mean sums in the accumulation type from +0 in index order, divides once and rounds once;
// self takes no part (the cases: directed_means in index_k_case.h).
TEST(IndexKCpu, MeanSumsInIndexOrderInTheAccumulationTypeAndDividesOnce) {
  for (const DirectedMean& w : directed_means()) {
    IndexKCase c = mean_case(w.dt, static_cast<int64_t>(w.out.size()), w.src, w.idx);
    IndexKPlan plan;
    ErrorDetail err;
    ASSERT_EQ(stridewise::plan_index_k(c.args, &plan, &err), Status::kOk) << err.message;
    ASSERT_EQ(stridewise::index_k_cpu(c.args, plan, stridewise::default_cpu_executor(), &err),
              Status::kOk);
    for (size_t e = 0; e < w.out.size(); ++e)
      EXPECT_EQ(mean_case_at(c, static_cast<int64_t>(e)), w.out[e]) << c.describe() << " " << e;
  }
}

// embedding_dense_backward with num_weights 0: an empty target whose data is null (an empty
// tensor's). Every value is out of range; it is reported, nothing is addressed.
TEST(IndexKCpu, EmptyTargetWithoutDataReportsTheFirstValue) {
  for (Combine comb : {Combine::kAdd, Combine::kMean}) {
    IndexKCase c = mean_case(DType::kFloat32, 0, {1, 2}, {3, 0});
    c.args.desc.combine = comb;
    c.args.desc.include_self = comb != Combine::kMean;
    c.args.self.data = c.args.target.data = nullptr;
    IndexKPlan plan;
    ErrorDetail err;
    ASSERT_EQ(stridewise::plan_index_k(c.args, &plan, &err), Status::kOk) << err.message;
    EXPECT_EQ(stridewise::index_k_cpu(c.args, plan, stridewise::default_cpu_executor(), &err),
              Status::kIndexOutOfRange);
    EXPECT_EQ(err.value, 3);
    EXPECT_EQ(err.hi, 0);
  }
}

TEST(IndexKCpu, RejectsWhatTheContractExcludes) {
  std::vector<float> x(6), v(2);
  std::vector<int64_t> i = {0, 1};
  IndexKArgs a;
  a.desc = {OpCode::kIndexPut, IndexRole::kWrite, Combine::kCopy, true};
  a.self = stridewise::make_view(x.data(), DType::kFloat32, {2}, {0});
  a.target = stridewise::make_view(x.data(), DType::kFloat32, {2, 3}, {0, 1});  // overlapping
  a.src = stridewise::make_view(v.data(), DType::kFloat32, {2}, {1});  // two values: order shows
  a.index[0] = stridewise::make_view(i.data(), DType::kInt64, {2}, {1});
  a.term_size[0] = 2;
  IndexKPlan plan;
  ErrorDetail err;
  EXPECT_EQ(stridewise::plan_index_k(a, &plan, &err), Status::kInvalidArgument);
  a.target.strides[0] = 3;
  EXPECT_EQ(stridewise::plan_index_k(a, &plan, &err), Status::kOk) << err.message;
  a.k = stridewise::kMaxIndexTerms + 1;
  EXPECT_EQ(stridewise::plan_index_k(a, &plan, &err), Status::kUnsupported);
  a.k = 1;
  a.desc.combine = Combine::kMul;
  EXPECT_EQ(stridewise::plan_index_k(a, &plan, &err), Status::kUnsupported);
  // a mean: without self, from src, written
  a.desc.combine = Combine::kMean;
  EXPECT_EQ(stridewise::plan_index_k(a, &plan, &err), Status::kUnsupported);  // include_self
  a.desc.include_self = false;
  EXPECT_EQ(stridewise::plan_index_k(a, &plan, &err), Status::kOk) << err.message;
  a.has_value = true;
  EXPECT_EQ(stridewise::plan_index_k(a, &plan, &err), Status::kInvalidArgument);
  a.has_value = false;
  a.desc.role = IndexRole::kRead;
  a.out = a.src;
  EXPECT_EQ(stridewise::plan_index_k(a, &plan, &err), Status::kInvalidArgument);
  // an index that moves along a dim where self's view moves: its count would miss writers
  std::vector<float> src2(4);
  std::vector<int64_t> i2 = {0, 1};
  a.desc.role = IndexRole::kWrite;
  a.self = stridewise::make_view(x.data(), DType::kFloat32, {2, 2}, {0, 1});
  a.src = stridewise::make_view(src2.data(), DType::kFloat32, {2, 2}, {2, 1});
  a.index[0] = stridewise::make_view(i2.data(), DType::kInt64, {2, 2}, {0, 1});
  EXPECT_EQ(stridewise::plan_index_k(a, &plan, &err), Status::kInvalidArgument);
  a.index[0].strides[0] = 1;
  a.index[0].strides[1] = 0;
  EXPECT_EQ(stridewise::plan_index_k(a, &plan, &err), Status::kOk) << err.message;
}

}  // namespace
}  // namespace swt
