// CUDA pieces shared by the adapter's CUDA op files: the current stream as the core's void*,
// raising out-of-range errors recorded by kernels (deferred or sync check mode), and the
// check_errors() hook. Compiled only where the CUDA headers are available; linked only when
// torch has CUDA.
#pragma once

#include <c10/core/Device.h>

#include "stridewise/status.h"

namespace stridewise::adapter {

// The current CUDA stream of `device` as a cudaStream_t, for the core's launch functions.
void* current_cuda_stream(c10::DeviceIndex device);

// Deferred-mode check at the start of every stridewise CUDA call: if a kernel launched earlier
// on `device` recorded a bad index, raises it now (reading the record is a host memory read:
// no synchronization, no stream work).
void raise_pending_cuda_error(c10::DeviceIndex device);

// "stridewise.gather (cuda): index 17 is out of bounds for dimension 1 with size 16 (valid
// range [0, 16)); <where>", where <where> says which check mode found it. take/put (a flat
// position, ErrorDetail::dim -1): "stridewise.take (cuda): index 10 is out of range for a tensor
// of 6 elements (valid range [-6, 6)); <where>".
[[noreturn]] void throw_cuda_index_error(const ErrorDetail& e, const char* where);

// Where-texts for throw_cuda_index_error.
extern const char* const
    kFoundDeferred;                   // "raised by a kernel launched earlier (deferred check mode)"
extern const char* const kFoundSync;  // "raised by this call (sync check mode)"

// Raises the status of a core CUDA launch: index errors with the check-mode text, anything else
// through throw_status.
void check_cuda_launch(const char* op, Status st, const ErrorDetail& e);

}  // namespace stridewise::adapter
