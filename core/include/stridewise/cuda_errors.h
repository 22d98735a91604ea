// Out-of-range index values on CUDA.
//
// Kernels never address memory through a bad index. Each device has one error record in
// mapped (zero-copy) pinned host memory. The first offending thread wins the record's
// `claim` word (a device-scope atomicCAS 0 -> 1; only one device's threads ever touch a
// given record, so device-scope atomicity is all that is needed), writes {op, wraps, dim,
// value, size, position}, fences system-wide and then sets `flag`. Reading the record is a host
// memory read: no synchronization, no stream work. Clearing it is two host stores
// (flag = 0, then claim = 0), so polling never enqueues device work either.
//
// Two modes (process-wide; STRIDEWISE_CUDA_CHECK=deferred|sync, or set_cuda_check_mode):
//  - kDeferred (default): no host synchronization on the hot path. The adapter polls the
//    record at the start of every stridewise CUDA call and in check_errors(); an error
//    recorded by an earlier launch is raised then. check_cuda_errors(sync=true) waits for
//    the device first, so a caller can force the check at a point of its choosing.
//  - kSync: every launch is followed by a stream synchronization and a poll, so the error
//    is raised by the call that caused it. Costs one host sync per call (see bench/).
// In both modes the CUDA context stays usable: nothing traps.
// "First" error: while a record is pending (claimed, not yet polled), further offending
// elements are skipped without being recorded; the poll reports the pending one.
#pragma once

#include <cstdint>

#include "stridewise/status.h"

namespace stridewise {

enum class CudaCheckMode : int32_t { kDeferred = 0, kSync = 1 };

CudaCheckMode cuda_check_mode();
void set_cuda_check_mode(CudaCheckMode mode);

// Device-visible record (lives in mapped pinned host memory; one per device).
struct CudaErrorRecord {
  int32_t claim;  // 0 = free; 1 = an offending thread owns the record until it is polled
  int32_t flag;   // 0 = clear, 1 = fields below written and complete
  int32_t op;     // OpCode
  int32_t wraps;  // 1: valid values are [-size, size) (IndexedOpDesc::wraps); 0: [0, size)
  int64_t dim;
  int64_t value;
  int64_t size;
  int64_t position;  // linear position of the element in the launch's planned iteration order
};

// Device pointers for `device`'s record and its claim word (*claim == &(*record)->claim),
// allocated on first use (thread-safe, once per device). Either output may be null.
Status cuda_error_slots(int device, CudaErrorRecord** record, int32_t** claim, ErrorDetail* err);

// Per-call abort words (the scatter family: a call that meets a bad index writes nothing).
// Each device has a ring of kAbortRingWords int64 words in device memory (cudaMalloc'd and
// zeroed once, on first use, next to the error record) and a host generation counter that
// starts at 1. Every call takes the next generation g and the word ring[g % kAbortRingWords]:
// its validation kernel stores g there when it meets a bad index value, and every later
// kernel of the call reads the word once per block and writes nothing when it holds g. A
// word is never reset: a stale value (an earlier generation) never equals a later call's g,
// so there is no memset, no host synchronization and no allocation per call. Limits: two
// calls share a word only when kAbortRingWords generations are in flight at once; a call
// captured into a CUDA graph replays its generation, so the captured sequence ends with a
// kernel that clears the word again (see scatter_cuda.cu). Kernels still never use a bad
// value as an address, whatever the word holds.
constexpr int kAbortRingWords = 4096;

// Hands out the next generation of `device` and its word (a device pointer). Allocates the
// ring on first use (thread-safe, once per device).
Status cuda_abort_word(int device, int64_t** word, int64_t* generation, ErrorDetail* err);

// If a kernel on `device` recorded an error, fills *err, clears the record and returns
// kIndexOutOfRange; otherwise kOk. With `stream` non-null, synchronizes it first (a failed
// synchronization returns kDeviceError). device < 0 means the calling thread's current
// device. Never allocates: a device that never launched a stridewise kernel returns kOk.
Status cuda_poll_errors(int device, void* stream, ErrorDetail* err);

}  // namespace stridewise
