// Out-of-range index values on CUDA: the kernel skips the element and records the first
// one; the deferred poll (or the sync mode's own poll) reports op, dim, value, valid range
// and position; the CUDA context stays usable afterwards and the record can be claimed
// again by later launches.
#include <chrono>
#include <cstdio>
#include <vector>

#include "cuda_test_util.h"

namespace swct {
namespace {

using stridewise::CudaCheckMode;
using stridewise::DType;
using stridewise::ErrorDetail;
using stridewise::OpCode;
using stridewise::Status;
using swt::GatherCase;

// The seed layout, x (4,16,384) fp16 and index (4,1,1) expanded to (4,1,384), with the
// given four stored index values (rows kernel).
GatherCase seed_case(swt::Rng& rng, const int64_t (&values)[4]) {
  GatherCase c;
  c.dim = 1;
  c.self = swt::make_tensor(DType::kFloat16, {4, 16, 384}, {6144, 384, 1}, 0);
  c.index = swt::make_tensor(DType::kInt64, {4, 1, 384}, {1, 1, 0}, 0);
  c.out = swt::make_tensor(DType::kFloat16, {4, 1, 384}, {384, 384, 1}, 0);
  swt::fill_random_bytes(rng, c.self);
  for (int64_t i = 0; i < 4; ++i) swt::write_index(c.index.view, i, values[i]);
  swt::poison(c.out);
  return c;
}

// Copies out back and compares it with the reference, which leaves bad elements as they
// were (poisoned): the kernel must have skipped exactly those.
void expect_out_matches(const DeviceCase& d, const GatherCase& c, int64_t want_bad) {
  int64_t bad = 0;
  const std::vector<unsigned char> want = reference_out(c, &bad);
  EXPECT_EQ(bad, want_bad);
  const std::vector<unsigned char> got = d.out.download();
  EXPECT_EQ(swt::diff_bytes(got.data(), want.data(), want.size()), "");
}

void expect_detail(const ErrorDetail& e, int64_t dim, int64_t value, int64_t size,
                   int64_t position) {
  EXPECT_EQ(e.status, Status::kIndexOutOfRange);
  EXPECT_EQ(e.op, OpCode::kGather);
  EXPECT_EQ(e.dim, dim);
  EXPECT_EQ(e.value, value);
  EXPECT_EQ(e.lo, 0);
  EXPECT_EQ(e.hi, size);
  if (position >= 0) {
    EXPECT_EQ(e.position, position);
  }
  EXPECT_EQ(e.message, stridewise::format_index_error(e));
}

using CudaErrors = CudaTest;

TEST_F(CudaErrors, DeferredRowsPathReportsAndContextSurvives) {
  swt::Rng rng(seed_);
  GatherCase c = seed_case(rng, {15, 3, 16, 0});
  DeviceCase d(c);
  ASSERT_EQ(d.status(), cudaSuccess);
  ErrorDetail e;
  ASSERT_EQ(stridewise::gather_cuda(d.args(), stream_, &e), Status::kOk) << e.message;
  // Polling with the stream synchronizes it first.
  ASSERT_EQ(stridewise::cuda_poll_errors(device_, stream_, &e), Status::kIndexOutOfRange);
  expect_detail(e, 1, 16, 16, 2 * 384);
  EXPECT_EQ(e.message, "index 16 is out of bounds for dimension 1 with size 16");
  expect_out_matches(d, c, 384);
  EXPECT_EQ(stridewise::cuda_poll_errors(device_, stream_, &e), Status::kOk) << "not cleared";

  // The context is fine: copies and a corrected launch work.
  SWCT_CUDA_OK(cudaMemset(d.out.view().data, 0, 16));
  SWCT_CUDA_OK(cudaDeviceSynchronize());
  GatherCase ok = seed_case(rng, {15, 3, 7, 0});
  EXPECT_TRUE(gather_matches(ok, stream_, seed_));
}

TEST_F(CudaErrors, DeferredElemsPathNegativeValueAndPosition) {
  swt::Rng rng(seed_);
  GatherCase c;
  c.dim = 0;
  c.self = swt::make_tensor(DType::kFloat32, {10}, {1}, 0);
  c.index = swt::make_tensor(DType::kInt32, {1000}, {1}, 0);
  c.out = swt::make_tensor(DType::kFloat32, {1000}, {1}, 0);
  swt::fill_random_bytes(rng, c.self);
  swt::fill_index(rng, c.index, 0, 9);
  swt::write_index(c.index.view, 457, -3);
  swt::poison(c.out);
  DeviceCase d(c);
  ASSERT_EQ(d.status(), cudaSuccess);
  ErrorDetail e;
  ASSERT_EQ(stridewise::gather_cuda(d.args(), stream_, &e), Status::kOk);
  SWCT_CUDA_OK(cudaStreamSynchronize(stream_));
  ASSERT_EQ(stridewise::cuda_poll_errors(-1, nullptr, &e), Status::kIndexOutOfRange);
  expect_detail(e, 0, -3, 10, 457);  // 1-D contiguous: plan order == logical order
  expect_out_matches(d, c, 1);
}

TEST_F(CudaErrors, SyncModeRaisesFromTheCall) {
  ModeGuard sync(CudaCheckMode::kSync);
  ASSERT_EQ(stridewise::cuda_check_mode(), CudaCheckMode::kSync);
  swt::Rng rng(seed_);
  GatherCase bad = seed_case(rng, {15, 16, 3, 99});
  DeviceCase d(bad);
  ASSERT_EQ(d.status(), cudaSuccess);
  ErrorDetail e;
  ASSERT_EQ(stridewise::gather_cuda(d.args(), stream_, &e), Status::kIndexOutOfRange);
  EXPECT_TRUE(e.value == 16 || e.value == 99) << e.value;  // which bad row wins is a race
  expect_detail(e, 1, e.value, 16, e.value == 16 ? 384 : 3 * 384);
  expect_out_matches(d, bad, 2 * 384);
  // The call consumed the record; a good call in sync mode returns kOk.
  EXPECT_EQ(stridewise::cuda_poll_errors(device_, nullptr, &e), Status::kOk);
  GatherCase good = seed_case(rng, {15, 1, 2, 3});
  DeviceCase g(good);
  ASSERT_EQ(stridewise::gather_cuda(g.args(), stream_, &e), Status::kOk) << e.message;
  expect_out_matches(g, good, 0);
}

// Each launch can claim the record again once the previous report was polled: errors are
// not swallowed by a claim word left set.
TEST_F(CudaErrors, RecordIsReclaimedAfterEachPoll) {
  swt::Rng rng(seed_);
  for (int64_t v : {16, 17, -1, 1000}) {
    GatherCase c = seed_case(rng, {0, v, 1, 2});
    DeviceCase d(c);
    ASSERT_EQ(d.status(), cudaSuccess);
    ErrorDetail e;
    ASSERT_EQ(stridewise::gather_cuda(d.args(), stream_, &e), Status::kOk);
    ASSERT_EQ(stridewise::cuda_poll_errors(device_, stream_, &e), Status::kIndexOutOfRange);
    expect_detail(e, 1, v, 16, 384);
  }
}

// Every element bad (8M elements, 32K blocks; and 4M elements in 4K rows): one report, no
// write, and the block-level filter keeps the launch from serializing on the record.
TEST_F(CudaErrors, EveryIndexBad) {
  swt::Rng rng(seed_);
  for (int rows = 0; rows < 2; ++rows) {
    GatherCase c;
    c.dim = 0;
    c.self = swt::make_tensor(DType::kFloat16, {10, 1024}, {1024, 1}, 0);
    c.index = rows ? swt::make_tensor(DType::kInt64, {4096, 1024}, {1, 0}, 0)
                   : swt::make_tensor(DType::kInt64, {8192, 1024}, {1024, 1}, 0);
    c.out = swt::make_tensor(DType::kFloat16, {rows ? 4096 : 8192, 1024}, {1024, 1}, 0);
    swt::fill_random_bytes(rng, c.self);
    swt::fill_index(rng, c.index, 10, 1 << 20);
    swt::poison(c.out);
    DeviceCase d(c);
    ASSERT_EQ(d.status(), cudaSuccess);
    ErrorDetail e;
    const auto t0 = std::chrono::steady_clock::now();
    ASSERT_EQ(stridewise::gather_cuda(d.args(), stream_, &e), Status::kOk);
    ASSERT_EQ(stridewise::cuda_poll_errors(device_, stream_, &e), Status::kIndexOutOfRange);
    const double ms =
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    std::printf("[ info ] every index bad (%s kernel): %.2f ms\n", rows ? "rows" : "elems", ms);
    expect_detail(e, 0, e.value, 10, -1);
    EXPECT_GE(e.value, 10);
    const std::vector<unsigned char> got = d.out.download();
    for (size_t i = 0; i < got.size(); ++i)
      if (got[i] != 0xAB) FAIL() << "byte " << i << " of out was written";
  }
}

// self has size 0 on dim: every value is out of range, and self's data is never touched.
TEST_F(CudaErrors, EmptySelfDimAndRankZero) {
  swt::Rng rng(seed_);
  GatherCase c;
  c.dim = 1;
  c.self = swt::make_tensor(DType::kFloat32, {3, 0}, {1, 1}, 0);
  c.index = swt::make_tensor(DType::kInt64, {3, 2}, {2, 1}, 0);
  c.out = swt::make_tensor(DType::kFloat32, {3, 2}, {2, 1}, 0);
  swt::fill_index(rng, c.index, 0, 0);
  swt::poison(c.out);
  DeviceCase d(c);
  ASSERT_EQ(d.status(), cudaSuccess);
  stridewise::GatherArgs a = d.args();
  a.self.data = nullptr;  // no storage: any access would fault
  ErrorDetail e;
  ASSERT_EQ(stridewise::gather_cuda(a, stream_, &e), Status::kOk) << e.message;
  ASSERT_EQ(stridewise::cuda_poll_errors(device_, stream_, &e), Status::kIndexOutOfRange);
  expect_detail(e, 1, 0, 0, -1);
  expect_out_matches(d, c, 6);

  GatherCase r0;  // rank 0: valid values are [0, 1)
  r0.dim = 0;
  r0.self = swt::make_tensor(DType::kFloat64, {}, {}, 0);
  r0.index = swt::make_tensor(DType::kInt32, {}, {}, 0);
  r0.out = swt::make_tensor(DType::kFloat64, {}, {}, 0);
  swt::write_index(r0.index.view, 0, 1);
  swt::poison(r0.out);
  DeviceCase d0(r0);
  ASSERT_EQ(stridewise::gather_cuda(d0.args(), stream_, &e), Status::kOk);
  ASSERT_EQ(stridewise::cuda_poll_errors(device_, stream_, &e), Status::kIndexOutOfRange);
  expect_detail(e, 0, 1, 1, 0);
  expect_out_matches(d0, r0, 1);
}

TEST_F(CudaErrors, ModeAndSlotsApi) {
  {
    ModeGuard g(CudaCheckMode::kSync);
    EXPECT_EQ(stridewise::cuda_check_mode(), CudaCheckMode::kSync);
  }
  EXPECT_EQ(stridewise::cuda_check_mode(), CudaCheckMode::kDeferred);
  stridewise::CudaErrorRecord* rec = nullptr;
  int32_t* claim = nullptr;
  ErrorDetail e;
  ASSERT_EQ(stridewise::cuda_error_slots(device_, &rec, &claim, &e), Status::kOk) << e.message;
  ASSERT_NE(rec, nullptr);
  EXPECT_EQ(claim, &rec->claim);
  EXPECT_EQ(stridewise::cuda_error_slots(-1, &rec, &claim, &e), Status::kUnsupported);
  EXPECT_EQ(stridewise::cuda_poll_errors(-1, nullptr, &e), Status::kOk);
}

}  // namespace
}  // namespace swct
