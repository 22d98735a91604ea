// Helpers for the CUDA tests: device copies of the host test tensors (test_util.h builds
// the layouts and the obvious reference; these tests only move them to the GPU), a fast
// odometer reference for large cases, and the check-mode / stream fixtures.
//
// Every test skips (GTEST_SKIP) when no CUDA device is visible, so the binary passes on
// build machines without a GPU.
#pragma once

#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <cstddef>
#include <functional>
#include <string>
#include <vector>

#include "stridewise/cuda_errors.h"
#include "stridewise/gather.h"
#include "test_util.h"

namespace swct {

bool have_device();

#define SWCT_REQUIRE_DEVICE()                                             \
  do {                                                                    \
    if (!::swct::have_device()) GTEST_SKIP() << "no CUDA device visible"; \
  } while (0)

#define SWCT_CUDA_OK(expr)                                                           \
  do {                                                                               \
    const cudaError_t swct_e_ = (expr);                                              \
    ASSERT_EQ(swct_e_, cudaSuccess) << #expr << ": " << cudaGetErrorString(swct_e_); \
  } while (0)

// A device copy of a host TestTensor's whole storage. `byte_shift` moves the copy that many
// bytes past a 256-byte aligned allocation (misaligned-data tests); view() points into it
// at the same relative position as the host view.
class DeviceTensor {
 public:
  explicit DeviceTensor(const swt::TestTensor& t, size_t byte_shift = 0);
  ~DeviceTensor();
  DeviceTensor(const DeviceTensor&) = delete;
  DeviceTensor& operator=(const DeviceTensor&) = delete;

  cudaError_t status() const { return status_; }
  const stridewise::StridedView& view() const { return view_; }
  std::vector<unsigned char> download() const;  // the whole storage, host order

 private:
  unsigned char* alloc_ = nullptr;
  unsigned char* base_ = nullptr;
  size_t bytes_ = 0;
  stridewise::StridedView view_;
  cudaError_t status_ = cudaSuccess;
};

struct DeviceCase {
  explicit DeviceCase(const swt::GatherCase& c, size_t out_shift = 0, size_t self_shift = 0);
  cudaError_t status() const;
  stridewise::GatherArgs args() const;
  DeviceTensor self, index, out;
  int64_t dim;
};

// One dtype per element size: 1, 2, 4, 8, 16 bytes.
constexpr stridewise::DType kDataTypes[] = {
    stridewise::DType::kUInt8, stridewise::DType::kFloat16, stridewise::DType::kFloat32,
    stridewise::DType::kFloat64, stridewise::DType::kComplex128};

// A gather case over explicit layouts (sizes, strides in elements, storage offsets): self
// random bytes, index values uniform in [0, size on dim), out poisoned.
swt::GatherCase make_case(swt::Rng& rng, stridewise::DType dt, stridewise::DType it, int64_t dim,
                          std::vector<int64_t> ssz, std::vector<int64_t> sst, int64_t soff,
                          std::vector<int64_t> isz, std::vector<int64_t> ist,
                          std::vector<int64_t> ost, int64_t ooff);

// The expanded-index family (B,K,1) -> (B,K,D), dim 1: rows of D elements, one index value
// each. Row lengths cover unit widths 1..16 bytes, tails (D not a multiple of the vector
// width), long rows (several tiles per row), padded out rows, and base shifts that lower
// (or break) the alignment the unit width depends on. visit(case, byte shift of out and
// self, description) is called once per variant; the GPU test and its host twin share it.
void rows_path_cases(
    swt::Rng& rng, const std::function<void(swt::GatherCase&, size_t, const std::string&)>& visit);

// The tile family: ranks 2..4, an index whose memory runs along another dim ("k") than
// out's ("a"); a and k sized 32..90 (whole and partial 32-wide tiles), the other dims 1..3;
// self in a random dim order, out contiguous in a's order or padded; every element size,
// both index types, any gathered dim. All of them make gather_cuda pick the tile kernel.
// visit(case, description) once per case; the GPU test and its host twin share it.
void tile_path_cases(swt::Rng& rng, int count,
                     const std::function<void(swt::GatherCase&, const std::string&)>& visit);

// Plants one bad value (below 0, or at or past self's size on dim) at a random element of
// the index storage; returns how many out elements read it (0 for an empty index).
int64_t plant_bad_value(swt::Rng& rng, swt::GatherCase& c);

// Expected out storage after the gather: the poisoned storage with every out element
// written, walking logical coordinates with an odometer (no division per element, so it
// is usable for the 10^8-element high-rank cases). Elements whose index value is out of
// range are left as they were (the CUDA contract), and counted in *bad when non-null.
std::vector<unsigned char> reference_out(const swt::GatherCase& c, int64_t* bad = nullptr);

// Copies c to the device (with the given byte shifts), plans and runs the plan-taking
// gather_cuda on `stream` (the convenience form is covered by test_cuda_errors.cpp),
// synchronizes, polls, and compares the whole out storage (so writes outside the view are
// caught too) with reference_out. The failure message carries c.describe() and the seed.
::testing::AssertionResult gather_matches(const swt::GatherCase& c, cudaStream_t stream,
                                          uint64_t seed, size_t out_shift = 0,
                                          size_t self_shift = 0);

// Sets the process-wide check mode for one scope.
class ModeGuard {
 public:
  explicit ModeGuard(stridewise::CudaCheckMode m) : prev_(stridewise::cuda_check_mode()) {
    stridewise::set_cuda_check_mode(m);
  }
  ~ModeGuard() { stridewise::set_cuda_check_mode(prev_); }

 private:
  stridewise::CudaCheckMode prev_;
};

// Skips without a device; otherwise gives each test its own non-blocking stream, in
// deferred mode, and fails the test if an error record is left pending at its end.
class CudaTest : public ::testing::Test {
 protected:
  void SetUp() override;
  void TearDown() override;
  cudaStream_t stream_ = nullptr;
  int device_ = 0;
  uint64_t seed_ = 0;

 private:
  ModeGuard mode_{stridewise::CudaCheckMode::kDeferred};
};

std::string status_str(stridewise::Status s, const stridewise::ErrorDetail& e);

}  // namespace swct
