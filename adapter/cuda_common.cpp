#include "cuda_common.h"

#include <c10/cuda/CUDAFunctions.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#include <c10/util/Exception.h>

#include "common.h"
#include "stridewise/cuda_errors.h"

namespace stridewise::adapter {

const char* const kFoundDeferred = "raised by a kernel launched earlier (deferred check mode)";
const char* const kFoundSync = "raised by this call (sync check mode)";

void* current_cuda_stream(c10::DeviceIndex device) {
  return static_cast<void*>(c10::cuda::getCurrentCUDAStream(device).stream());
}

void throw_cuda_index_error(const ErrorDetail& e, const char* where) {
  // take/put: a flat position, no dim (ErrorDetail::dim -1)
  TORCH_CHECK(e.dim >= 0, "stridewise.", op_name(e.op), " (cuda): index ", e.value,
              " is out of range for a tensor of ", e.hi, " elements (valid range [", e.lo, ", ",
              e.hi, ")); ", where);
  TORCH_CHECK(false, "stridewise.", op_name(e.op), " (cuda): ", format_index_error(e),
              " (valid range [", e.lo, ", ", e.hi, ")); ", where);
}

void check_cuda_launch(const char* op, Status st, const ErrorDetail& e) {
  if (st == Status::kOk) return;
  if (st == Status::kIndexOutOfRange)
    throw_cuda_index_error(e,
                           cuda_check_mode() == CudaCheckMode::kSync ? kFoundSync : kFoundDeferred);
  throw_status(op, "cuda", st, e);
}

void raise_pending_cuda_error(c10::DeviceIndex device) {
  ErrorDetail e;
  const Status st = cuda_poll_errors(device, nullptr, &e);
  if (st == Status::kIndexOutOfRange) throw_cuda_index_error(e, kFoundDeferred);
  if (st != Status::kOk) throw_status(op_name(e.op), "cuda", st, e);
}

namespace {

// stridewise.check_errors(sync): polls every device torch has a context on. With sync, waits for
// the device first (all streams), so errors of every kernel launched so far are seen. Devices
// without a context are skipped: nothing ran there, and polling must not create a context.
void check_cuda_errors(bool sync) {
  const c10::DeviceIndex n = c10::cuda::device_count();
  for (c10::DeviceIndex d = 0; d < n; ++d) {
    if (!c10::cuda::hasPrimaryContext(d)) continue;
    if (sync) {
      c10::cuda::CUDAGuard guard(d);
      c10::cuda::device_synchronize();
    }
    raise_pending_cuda_error(d);
  }
}

[[maybe_unused]] const int kHooks = set_cuda_hooks(CudaHooks{&check_cuda_errors});

}  // namespace
}  // namespace stridewise::adapter
