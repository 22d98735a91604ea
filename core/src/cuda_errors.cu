// Per-device error records and abort words for CUDA kernels and the deferred/sync check
// modes; the contract is in cuda_errors.h, the design in docs/gather_cuda.md.
//
// Record protocol (one record per device, in mapped pinned host memory):
//   device: claim 0->1 (atomicCAS), write op/dim/value/size/position, __threadfence_system(),
//           flag = 1.  The fence orders the fields before the flag at system scope.
//   host:   read flag; if 1: acquire fence, read the fields, flag = 0, then claim = 0.
// The host only ever reads a complete record, and never enqueues device work to clear it.
#include <atomic>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <string>

#include "common/cuda_status.cuh"
#include "stridewise/cuda_errors.h"

namespace stridewise {
namespace {

constexpr int kMaxDevices = 64;

struct DeviceSlot {
  std::mutex init_mu;                           // serializes the (retryable) first allocation
  std::mutex poll_mu;                           // one poller reads-and-clears a record at a time
  CudaErrorRecord* dev = nullptr;               // device view; valid once `host` is published
  std::atomic<CudaErrorRecord*> host{nullptr};  // host view; null until allocated
  std::atomic<int64_t*> ring{nullptr};          // abort words (device memory); null until allocated
  std::atomic<int64_t> generation{1};           // next call's generation
};

DeviceSlot& slot(int device) {
  static DeviceSlot slots[kMaxDevices];  // never destroyed: records live for the process
  return slots[device];
}

int mode_from_env() {
  const char* v = std::getenv("STRIDEWISE_CUDA_CHECK");
  return (v != nullptr && std::strcmp(v, "sync") == 0) ? 1 : 0;  // anything else: deferred
}

std::atomic<int>& mode_word() {
  static std::atomic<int> mode{mode_from_env()};
  return mode;
}

// Allocates `device`'s record. Called with s.init_mu held and s.host still null.
Status init_slot(int device, DeviceSlot& s, ErrorDetail* err) {
  int prev = 0;
  SW_CUDA_TRY(cudaGetDevice(&prev), err);
  if (prev != device) SW_CUDA_TRY(cudaSetDevice(device), err);
  void* h = nullptr;
  void* d = nullptr;
  // Portable: pinned for every context; Mapped: addressable from kernels (UVA: d == h).
  cudaError_t e =
      cudaHostAlloc(&h, sizeof(CudaErrorRecord), cudaHostAllocMapped | cudaHostAllocPortable);
  const char* what = "cudaHostAlloc(error record)";
  if (e == cudaSuccess) {
    std::memset(h, 0, sizeof(CudaErrorRecord));
    e = cudaHostGetDevicePointer(&d, h, 0);
    what = "cudaHostGetDevicePointer(error record)";
    if (e != cudaSuccess) cudaFreeHost(h);
  }
  const cudaError_t restore = prev != device ? cudaSetDevice(prev) : cudaSuccess;
  if (e != cudaSuccess) return detail::cuda_failure(err, what, e);
  if (restore != cudaSuccess) {
    cudaFreeHost(h);
    return detail::cuda_failure(err, "cudaSetDevice(restore)", restore);
  }
  s.dev = static_cast<CudaErrorRecord*>(d);
  s.host.store(static_cast<CudaErrorRecord*>(h), std::memory_order_release);
  return Status::kOk;
}

// Allocates and zeroes `device`'s abort ring. Called with s.init_mu held and s.ring null.
// The zeroing is waited for (once per device): a kernel on a non-blocking stream is not
// ordered after work on the legacy default stream.
Status init_ring(int device, DeviceSlot& s, ErrorDetail* err) {
  int prev = 0;
  SW_CUDA_TRY(cudaGetDevice(&prev), err);
  if (prev != device) SW_CUDA_TRY(cudaSetDevice(device), err);
  void* d = nullptr;
  const size_t bytes = sizeof(int64_t) * kAbortRingWords;
  cudaError_t e = cudaMalloc(&d, bytes);
  const char* what = "cudaMalloc(abort words)";
  if (e == cudaSuccess) {
    e = cudaMemset(d, 0, bytes);
    what = "cudaMemset(abort words)";
    if (e == cudaSuccess) {
      e = cudaDeviceSynchronize();
      what = "cudaDeviceSynchronize(abort words)";
    }
    if (e != cudaSuccess) cudaFree(d);
  }
  const cudaError_t restore = prev != device ? cudaSetDevice(prev) : cudaSuccess;
  if (e != cudaSuccess) return detail::cuda_failure(err, what, e);
  if (restore != cudaSuccess) {
    cudaFree(d);
    return detail::cuda_failure(err, "cudaSetDevice(restore)", restore);
  }
  s.ring.store(static_cast<int64_t*>(d), std::memory_order_release);
  return Status::kOk;
}

Status device_slot(int device, DeviceSlot** out, ErrorDetail* err) {
  if (device < 0 || device >= kMaxDevices)
    return detail::fail(err, Status::kUnsupported,
                        "stridewise supports CUDA device ordinals 0.." +
                            std::to_string(kMaxDevices - 1) + ", got " + std::to_string(device));
  *out = &slot(device);
  return Status::kOk;
}

}  // namespace

Status cuda_abort_word(int device, int64_t** word, int64_t* generation, ErrorDetail* err) {
  DeviceSlot* sp = nullptr;
  const Status st = device_slot(device, &sp, err);
  if (st != Status::kOk) return st;
  DeviceSlot& s = *sp;
  int64_t* ring = s.ring.load(std::memory_order_acquire);
  if (ring == nullptr) {  // slow path: first use
    std::lock_guard<std::mutex> lock(s.init_mu);
    if (s.ring.load(std::memory_order_acquire) == nullptr) {
      const Status is = init_ring(device, s, err);
      if (is != Status::kOk) return is;
    }
    ring = s.ring.load(std::memory_order_acquire);
  }
  const int64_t g = s.generation.fetch_add(1, std::memory_order_relaxed);
  if (word) *word = ring + g % kAbortRingWords;
  if (generation) *generation = g;
  return Status::kOk;
}

CudaCheckMode cuda_check_mode() {
  return static_cast<CudaCheckMode>(mode_word().load(std::memory_order_relaxed));
}

void set_cuda_check_mode(CudaCheckMode mode) {
  mode_word().store(static_cast<int>(mode), std::memory_order_relaxed);
}

Status cuda_error_slots(int device, CudaErrorRecord** record, int32_t** claim, ErrorDetail* err) {
  DeviceSlot* sp = nullptr;
  const Status ds = device_slot(device, &sp, err);
  if (ds != Status::kOk) return ds;
  DeviceSlot& s = *sp;
  if (s.host.load(std::memory_order_acquire) == nullptr) {  // slow path: first use
    std::lock_guard<std::mutex> lock(s.init_mu);
    if (s.host.load(std::memory_order_acquire) == nullptr) {
      const Status st = init_slot(device, s, err);
      if (st != Status::kOk) return st;
    }
  }
  if (record) *record = s.dev;
  if (claim) *claim = &s.dev->claim;
  return Status::kOk;
}

Status cuda_poll_errors(int device, void* stream, ErrorDetail* err) {
  if (device < 0) SW_CUDA_TRY(cudaGetDevice(&device), err);
  if (stream != nullptr) SW_CUDA_TRY(cudaStreamSynchronize(static_cast<cudaStream_t>(stream)), err);
  if (device >= kMaxDevices) return Status::kOk;  // cuda_error_slots never handed one out
  DeviceSlot& s = slot(device);
  CudaErrorRecord* h = s.host.load(std::memory_order_acquire);
  if (h == nullptr) return Status::kOk;  // no stridewise kernel ever ran on this device
  volatile CudaErrorRecord* r = h;
  if (r->flag == 0) return Status::kOk;  // hot path: one host memory read
  std::lock_guard<std::mutex> lock(s.poll_mu);
  if (r->flag == 0) return Status::kOk;  // another thread consumed it
  std::atomic_thread_fence(std::memory_order_acquire);
  ErrorDetail d;
  d.status = Status::kIndexOutOfRange;
  d.op = static_cast<OpCode>(r->op);
  d.dim = r->dim;
  d.value = r->value;
  d.lo = r->wraps ? -r->size : 0;
  d.hi = r->size;
  d.position = r->position;
  d.message = format_index_error(d);
  r->flag = 0;
  std::atomic_thread_fence(std::memory_order_release);  // flag cleared before the claim
  r->claim = 0;                                         // next offending thread may claim
  if (err) *err = d;
  return Status::kIndexOutOfRange;
}

}  // namespace stridewise
