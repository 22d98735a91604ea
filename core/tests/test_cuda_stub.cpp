// CUDA entry points as seen from a host-only test: the check mode is a process-wide
// setting in every build; without CUDA every device entry point reports kNotCompiled.
#include <gtest/gtest.h>

#include "stridewise/cuda_errors.h"
#include "stridewise/gather.h"

namespace swt {
namespace {

using stridewise::CudaCheckMode;
using stridewise::ErrorDetail;
using stridewise::Status;

TEST(CudaEntryPoints, CheckModeIsProcessWide) {
  const CudaCheckMode before = stridewise::cuda_check_mode();
  stridewise::set_cuda_check_mode(CudaCheckMode::kSync);
  EXPECT_EQ(stridewise::cuda_check_mode(), CudaCheckMode::kSync);
  stridewise::set_cuda_check_mode(CudaCheckMode::kDeferred);
  EXPECT_EQ(stridewise::cuda_check_mode(), CudaCheckMode::kDeferred);
  stridewise::set_cuda_check_mode(before);
}

#if !defined(SW_HAVE_CUDA)
TEST(CudaEntryPoints, NotCompiledWithoutCuda) {
  ErrorDetail e;
  stridewise::GatherArgs a;
  EXPECT_EQ(stridewise::gather_cuda(a, nullptr, &e), Status::kNotCompiled);
  EXPECT_EQ(e.status, Status::kNotCompiled);
  EXPECT_FALSE(e.message.empty());
  e = ErrorDetail{};
  EXPECT_EQ(stridewise::gather_cuda(a, stridewise::GatherPlan{}, nullptr, &e),
            Status::kNotCompiled);
  EXPECT_EQ(e.status, Status::kNotCompiled);
  EXPECT_EQ(stridewise::cuda_poll_errors(0, nullptr, &e), Status::kNotCompiled);
  stridewise::CudaErrorRecord dummy_rec{};
  int32_t dummy_claim = 0;
  stridewise::CudaErrorRecord* rec = &dummy_rec;
  int32_t* claim = &dummy_claim;
  EXPECT_EQ(stridewise::cuda_error_slots(0, &rec, &claim, nullptr), Status::kNotCompiled);
  EXPECT_EQ(rec, nullptr);
  EXPECT_EQ(claim, nullptr);
}
#endif

}  // namespace
}  // namespace swt
