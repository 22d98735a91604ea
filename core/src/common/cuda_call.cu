// CudaCall (cuda_call.h): the host entries' shared setup and teardown, and the one
// clear-abort kernel. The failure messages name the runtime call as written here
// (SW_CUDA_TRY), the same text in every family.
#include "common/cuda_call.h"
#include "common/cuda_status.cuh"

namespace stridewise {
namespace cuda_common {
namespace {

// Ends a write captured into a CUDA graph: each replay reuses the captured generation, so
// the word is cleared for the next replay (cuda_errors.h).
__global__ void clear_abort_kernel(int64_t* word) {
  *word = 0;
}

}  // namespace

Status CudaCall::open(void* stream_ptr, bool write, ErrorDetail* err) {
  write_ = write;
  stream = static_cast<cudaStream_t>(stream_ptr);
  SW_CUDA_TRY(cudaGetDevice(&device), err);
  Status st = cuda_error_slots(device, &rec, nullptr, err);
  if (st != Status::kOk || !write) return st;
  st = cuda_abort_word(device, &abort.word, &abort.gen, err);
  if (st != Status::kOk) return st;
  const cudaStream_t s = stream;
  cudaStreamCaptureStatus capture = cudaStreamCaptureStatusNone;
  SW_CUDA_TRY(cudaStreamIsCapturing(s, &capture), err);
  capture_ = capture;
  return Status::kOk;
}

Status CudaCall::close(ErrorDetail* err) {
  const cudaStream_t s = stream;
  if (write_ && capture_ != cudaStreamCaptureStatusNone)
    clear_abort_kernel<<<1, 1, 0, s>>>(abort.word);
  SW_CUDA_TRY(cudaGetLastError(), err);  // launch configuration, or an earlier sticky error
  if (cuda_check_mode() != CudaCheckMode::kSync) return Status::kOk;
  cudaStreamCaptureStatus capture = capture_;
  if (!write_) SW_CUDA_TRY(cudaStreamIsCapturing(s, &capture), err);
  if (capture != cudaStreamCaptureStatusNone) return Status::kOk;
  SW_CUDA_TRY(cudaStreamSynchronize(s), err);
  return cuda_poll_errors(device, nullptr, err);
}

}  // namespace cuda_common
}  // namespace stridewise
