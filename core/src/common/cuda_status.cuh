// Internal to core/src/*.cu: turning CUDA runtime failures into Status (no exceptions).
#pragma once

#include <cuda_runtime.h>

#include <string>

#include "stridewise/status.h"

namespace stridewise {
namespace detail {

// Fills *err (when non-null) with "<what>: <cudaErrorName>: <cudaGetErrorString>" and
// returns kDeviceError. Does not touch the runtime's sticky/last error state.
inline Status cuda_failure(ErrorDetail* err, const char* what, cudaError_t e) {
  if (err) {
    err->status = Status::kDeviceError;
    err->message = std::string(what) + ": " + cudaGetErrorName(e) + ": " + cudaGetErrorString(e);
  }
  return Status::kDeviceError;
}

inline Status fail(ErrorDetail* err, Status s, std::string message) {
  if (err) {
    err->status = s;
    err->message = std::move(message);
  }
  return s;
}

}  // namespace detail
}  // namespace stridewise

// Evaluates a cudaError_t expression once; on failure returns kDeviceError from the caller.
#define SW_CUDA_TRY(expr, err)                                             \
  do {                                                                     \
    const cudaError_t sw_cuda_e_ = (expr);                                 \
    if (sw_cuda_e_ != cudaSuccess)                                         \
      return ::stridewise::detail::cuda_failure((err), #expr, sw_cuda_e_); \
  } while (0)
