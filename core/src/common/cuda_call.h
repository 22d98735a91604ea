// The setup and teardown every CUDA host entry (gather_cuda, scatter_cuda, index_k_cuda)
// wraps its launches in, written once:
//
//   CudaCall call;
//   Status st = call.open(stream, write, err);  // device, error record, abort word, capture
//   if (st != Status::kOk) return st;
//   ... launches on call.stream, reporting into call.rec, writes checking call.abort ...
//   return call.close(err);
//
// open: cudaGetDevice, this device's error record; a write call (one that must write nothing
// once a bad index is seen) also takes the call's abort word (cuda_errors.h) and asks whether
// the stream is being captured. A read takes no abort word (call.abort.word stays null).
// close: a captured write ends with the clear-abort kernel (each replay of the graph reuses
// the captured generation, so the word is cleared for the next replay); cudaGetLastError
// (launch configuration, or an earlier sticky error); in CudaCheckMode::kSync, unless the
// stream is being captured (it cannot be synchronized then: errors surface through the
// deferred poll when the graph runs), cudaStreamSynchronize and the poll of the record.
// No allocation; a read's capture query is made only in kSync, where it is needed.
#pragma once

#include <cuda_runtime.h>

#include "common/kernel_common.h"
#include "stridewise/cuda_errors.h"
#include "stridewise/status.h"

namespace stridewise {
namespace cuda_common {

class CudaCall {
 public:
  Status open(void* stream, bool write, ErrorDetail* err);
  Status close(ErrorDetail* err);

  int device = 0;
  CudaErrorRecord* rec = nullptr;  // device view of this device's mapped error record
  Abort abort;                     // write calls; a read's word is null
  cudaStream_t stream = nullptr;

 private:
  bool write_ = false;
  cudaStreamCaptureStatus capture_ = cudaStreamCaptureStatusNone;  // queried by writes only
};

}  // namespace cuda_common
}  // namespace stridewise
