// Out-of-range index values on CUDA.
//
// Kernels never address memory through a bad index. Each device has one error record in
// mapped (zero-copy) pinned host memory; the first offending thread wins an atomic flag in
// device memory and writes {op, dim, value, size} there. Reading the record is a host
// memory read: no synchronization, no stream work.
//
// Two modes (process-wide; STRIDEWISE_CUDA_CHECK=deferred|sync, or set_cuda_check_mode):
//  - kDeferred (default): no host synchronization on the hot path. The adapter polls the
//    record at the start of every stridewise CUDA call and in check_errors(); an error
//    recorded by an earlier launch is raised then. check_cuda_errors(sync=true) waits for
//    the device first, so a caller can force the check at a point of its choosing.
//  - kSync: every launch is followed by a stream synchronization and a poll, so the error
//    is raised by the call that caused it. Costs one host sync per call (see bench/).
// In both modes the CUDA context stays usable: nothing traps.
#pragma once

#include <cstdint>

#include "stridewise/status.h"

namespace stridewise {

enum class CudaCheckMode : int32_t { kDeferred = 0, kSync = 1 };

CudaCheckMode cuda_check_mode();
void set_cuda_check_mode(CudaCheckMode mode);

// Device-visible record (lives in mapped pinned host memory).
struct CudaErrorRecord {
  int32_t flag;  // 0 = clear, 1 = written and complete
  int32_t op;    // OpCode
  int64_t dim;
  int64_t value;
  int64_t size;
  int64_t position;
};

// Device pointers for `device`'s record and winner flag, allocated on first use.
Status cuda_error_slots(int device, CudaErrorRecord** record, int32_t** claim, ErrorDetail* err);

// If a kernel on `device` recorded an error, fills *err, clears the record and returns
// kIndexOutOfRange; otherwise kOk. With `stream` non-null, synchronizes it first.
Status cuda_poll_errors(int device, void* stream, ErrorDetail* err);

}  // namespace stridewise
