// gather_cuda against the obvious host reference: random layouts at every rank bucket of
// the CUDA dispatch (planned rank <= 4, 12, 25, 64), every element size, both index types,
// the rows (expanded-index) path with every unit width, misaligned data, 64-bit offsets.
// Outputs are poisoned and the whole out storage is compared, so a write outside the view
// fails as surely as a wrong value. STRIDEWISE_TEST_SEED=<n> replays a run.
#include <algorithm>
#include <cstring>
#include <vector>

#include "cuda_test_util.h"

namespace swct {
namespace {

using stridewise::DType;
using stridewise::ErrorDetail;
using stridewise::GatherPlan;
using stridewise::Status;
using swt::GatherCase;
using swt::TestTensor;

using GatherCuda = CudaTest;

// The seed: x (4,16,384) fp16, idx = full((4,1,1), 15).expand(4,1,384), dim 1. The index
// storage holds 4 values; a kernel reading it flat would read 1536.
TEST_F(GatherCuda, SeedCase) {
  swt::Rng rng(seed_);
  GatherCase c = make_case(rng, DType::kFloat16, DType::kInt64, 1, {4, 16, 384}, {6144, 384, 1}, 0,
                           {4, 1, 384}, {1, 1, 0}, {384, 384, 1}, 0);
  ASSERT_EQ(c.index.storage_bytes(), 4u * 8u);
  for (int64_t i = 0; i < 4; ++i) swt::write_index(c.index.view, i, 15);
  EXPECT_TRUE(gather_matches(c, stream_, seed_));
  EXPECT_TRUE(gather_matches(c, nullptr, seed_));  // legacy default stream
}

TEST_F(GatherCuda, RandomLayoutsEveryRankBucket) {
  swt::Rng rng(seed_);
  const int ranks[] = {0, 1, 2, 3, 4, 5, 6, 7, 8, 12, 25, 64};
  int failures = 0;
  for (int rank : ranks) {
    const int iters = rank <= 8 ? 40 : 12;
    for (int i = 0; i < iters && failures < 5; ++i) {
      const DType dt = kDataTypes[swt::rand_int(rng, 0, 4)];
      const DType it = swt::coin(rng, 0.5) ? DType::kInt64 : DType::kInt32;
      swt::GatherCaseOpts opts;
      opts.max_numel = 4000;
      opts.allow_empty = true;
      const GatherCase c = swt::random_gather_case(rng, dt, it, rank, opts);
      const auto r = gather_matches(c, stream_, seed_);
      EXPECT_TRUE(r) << "rank " << rank << " iteration " << i;
      failures += r ? 0 : 1;
    }
  }
}

// The expanded-index family (rows_path_cases, cuda_test_util.h) on the GPU. Its host twin,
// GatherEmulated.RowsPathShapesAndUnits, runs the same cases through the same bodies.
TEST_F(GatherCuda, RowsPathShapesAndUnits) {
  swt::Rng rng(seed_);
  rows_path_cases(rng, [&](swt::GatherCase& c, size_t shift, const std::string& what) {
    EXPECT_TRUE(gather_matches(c, stream_, seed_, shift, shift)) << what;
  });
}

// Data not aligned to its element size (possible through from_blob-like views): copies
// must fall back to smaller aligned units instead of faulting on a misaligned access.
TEST_F(GatherCuda, MisalignedDataRandomLayouts) {
  swt::Rng rng(seed_);
  for (int i = 0; i < 60; ++i) {
    const DType dt = kDataTypes[swt::rand_int(rng, 1, 4)];
    const int es = stridewise::elem_size(dt);
    swt::GatherCaseOpts opts;
    opts.max_numel = 3000;
    const GatherCase c = swt::random_gather_case(rng, dt, DType::kInt64,
                                                 static_cast<int>(swt::rand_int(rng, 1, 4)), opts);
    const size_t out_shift = static_cast<size_t>(swt::rand_int(rng, 0, es - 1));
    const size_t self_shift = static_cast<size_t>(swt::rand_int(rng, 0, es - 1));
    EXPECT_TRUE(gather_matches(c, stream_, seed_, out_shift, self_shift)) << "iteration " << i;
  }
}

// 27 dims of size 2 that the planner cannot merge (out walks them in one order, self in
// another), inside a rank-64 view whose other 37 dims have size 1 and junk strides. The
// elems kernel then needs the 64-dim calculator (planned rank 27 > 25), and so does the
// rows kernel (26 row dims). 2^27 one-byte elements.
TEST_F(GatherCuda, HighPlannedRankUsesWidestCalculator) {
  constexpr int kRank = 64, kLive = 27;
  std::vector<int> live;  // logical positions of the size-2 dims
  for (int k = 0; k < kLive; ++k) live.push_back(1 + 2 * k);
  const int64_t dim = live[13];
  std::vector<int64_t> isz(kRank, 1), ssz(kRank, 1), ost(kRank, 7777), sst(kRank, 31),
      ist_elems(kRank, 0), ist_rows(kRank, 0);
  for (int k = 0; k < kLive; ++k) isz[live[k]] = ssz[live[k]] = 2;
  ssz[dim] = 3;
  for (int k = 0; k < kLive; ++k) ost[live[k]] = int64_t(1) << k;  // live[0] fastest in out
  // self: live[0] innermost (so the rows kernel applies), then live[26] .. live[1].
  int64_t acc = 1;
  sst[live[0]] = acc;
  acc *= ssz[live[0]];
  for (int k = kLive - 1; k >= 1; --k) {
    sst[live[k]] = acc;
    acc *= ssz[live[k]];
  }
  ist_elems[live[0]] = 1;  // index varies along out's fastest dim: elems kernel
  swt::Rng rng(seed_);
  for (int variant = 0; variant < 2; ++variant) {
    GatherCase c = make_case(rng, DType::kUInt8, variant ? DType::kInt32 : DType::kInt64, dim, ssz,
                             sst, 0, isz, variant ? ist_rows : ist_elems, ost, 0);
    GatherPlan plan;
    ErrorDetail e;
    ASSERT_EQ(stridewise::plan_gather(c.args(), &plan, &e), Status::kOk) << e.message;
    EXPECT_EQ(plan.loop.rank, kLive) << "planner merged dims; the test no longer reaches D=64";
    EXPECT_TRUE(gather_matches(c, stream_, seed_)) << (variant ? "rows" : "elems");
  }
}

// Offsets past 2^31 (self rows 2^31 bytes apart): the int64_t offset instantiations of both
// kernels. Needs a 4 GiB device allocation; skipped if the device cannot provide it.
TEST_F(GatherCuda, SixtyFourBitOffsets) {
  // 63-byte rows: the rows kernel's unit is 1 byte, so its offsets (in units) pass 2^31.
  const int64_t kRowStride = int64_t(1) << 31, kLen = 63, kRows = 3;
  void* raw = nullptr;
  const cudaError_t ae = cudaMalloc(&raw, size_t(kRowStride) * (kRows - 1) + kLen);
  if (ae == cudaErrorMemoryAllocation) {
    cudaGetLastError();
    GTEST_SKIP() << "no 4 GiB of device memory";
  }
  ASSERT_EQ(ae, cudaSuccess);
  unsigned char* self = static_cast<unsigned char*>(raw);
  swt::Rng rng(seed_);
  std::vector<unsigned char> rows(size_t(kRows * kLen));
  for (auto& b : rows) b = static_cast<unsigned char>(rng() | 1);
  for (int64_t r = 0; r < kRows; ++r)
    SWCT_CUDA_OK(
        cudaMemcpy(self + r * kRowStride, rows.data() + r * kLen, kLen, cudaMemcpyHostToDevice));
  int64_t* index = nullptr;
  unsigned char* out = nullptr;
  SWCT_CUDA_OK(cudaMalloc(&index, 2 * kLen * sizeof(int64_t)));
  SWCT_CUDA_OK(cudaMalloc(&out, 2 * kLen));
  for (int variant = 0; variant < 2; ++variant) {  // 0: rows kernel, 1: elems kernel
    std::vector<int64_t> idx(size_t(2 * kLen));
    for (auto& v : idx) v = static_cast<int64_t>(rng() % kRows);
    SWCT_CUDA_OK(cudaMemcpy(index, idx.data(), idx.size() * 8, cudaMemcpyHostToDevice));
    SWCT_CUDA_OK(cudaMemset(out, 0xAB, 2 * kLen));
    // Set-up ran on the legacy stream, which does not order the non-blocking stream_.
    SWCT_CUDA_OK(cudaDeviceSynchronize());
    stridewise::GatherArgs a;
    a.dim = 0;
    a.self = stridewise::make_view(self, DType::kUInt8, {kRows, kLen}, {kRowStride, 1});
    a.index = variant == 0 ? stridewise::make_view(index, DType::kInt64, {2, kLen}, {1, 0})
                           : stridewise::make_view(index, DType::kInt64, {2, kLen}, {kLen, 1});
    a.out = stridewise::make_view(out, DType::kUInt8, {2, kLen}, {kLen, 1});
    GatherPlan plan;
    ErrorDetail e;
    ASSERT_EQ(stridewise::plan_gather(a, &plan, &e), Status::kOk);
    EXPECT_FALSE(plan.loop.fits_int32);
    ASSERT_EQ(stridewise::gather_cuda(a, stream_, &e), Status::kOk) << e.message;
    SWCT_CUDA_OK(cudaStreamSynchronize(stream_));
    std::vector<unsigned char> got(size_t(2 * kLen));
    SWCT_CUDA_OK(cudaMemcpy(got.data(), out, got.size(), cudaMemcpyDeviceToHost));
    for (int64_t i = 0; i < 2; ++i)
      for (int64_t j = 0; j < kLen; ++j) {
        const int64_t v = variant == 0 ? idx[size_t(i)] : idx[size_t(i * kLen + j)];
        ASSERT_EQ(got[size_t(i * kLen + j)], rows[size_t(v * kLen + j)])
            << "variant " << variant << " at (" << i << ", " << j << ")";
      }
  }
  cudaFree(out);
  cudaFree(index);
  cudaFree(raw);
}

TEST_F(GatherCuda, EmptyAndRankZero) {
  swt::Rng rng(seed_);
  // Empty index: nothing launched, out untouched, no error.
  GatherCase empty = make_case(rng, DType::kFloat32, DType::kInt64, 1, {3, 4}, {4, 1}, 0, {3, 0},
                               {1, 1}, {1, 1}, 0);
  EXPECT_TRUE(gather_matches(empty, stream_, seed_));
  // Rank 0: one element, the only valid index value is 0.
  for (DType dt : kDataTypes) {
    GatherCase c = make_case(rng, dt, DType::kInt32, 0, {}, {}, 1, {}, {}, {}, 2);
    EXPECT_TRUE(gather_matches(c, stream_, seed_)) << stridewise::dtype_name(dt);
  }
  // All-size-1 dims (planned rank 0) with junk strides.
  GatherCase ones = make_case(rng, DType::kFloat64, DType::kInt64, 2, {1, 1, 5}, {99, 3, 2}, 0,
                              {1, 1, 1}, {17, 5, 123}, {8, 9, 10}, 0);
  EXPECT_TRUE(gather_matches(ones, stream_, seed_));
}

}  // namespace
}  // namespace swct
