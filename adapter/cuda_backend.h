// The CUDA backend of the op templates (see backends.h for what a backend provides): device
// checks and guard like ATen's generated CUDA wrappers, the deferred error poll, the scatter
// workspace from torch's caching allocator, and the launches on the current stream. No host
// synchronization on the default (deferred) path.
#pragma once

#include <ATen/core/Tensor.h>
#include <ATen/core/op_registration/adaption.h>
#include <ATen/ops/empty.h>
#include <c10/cuda/CUDAGuard.h>

#include <optional>
#include <string>

#include "common.h"
#include "cuda_common.h"
#include "gather.h"
#include "index_adv.h"
#include "scatter.h"

namespace stridewise::adapter {

struct CudaBackend {
  static constexpr Counter kDevice = kCuda;

  // What ATen's wrapper_CUDA_<overload>_<name> does first: every tensor argument (out first)
  // on one device, with c10's wording; then a guard on that device.
  // `src_name`: the argument's name in ATen's schema ("src"; "source" for the index_* ops).
  CudaBackend(const char* wrapper, const at::Tensor* out, const at::Tensor& self,
              const at::Tensor& index, const at::Tensor* src, const char* src_name = "src")
      : device_(check_devices(wrapper, out, self, index, src, src_name)), guard_(device_) {}

  // Advanced indexing (index_adv.h): the op checks devices itself, with ATen's own wording
  // (ATen's wrappers for these ops check none); only the guard.
  explicit CudaBackend(const at::Tensor& self) : device_(self.device()), guard_(device_) {}

  // After the call is counted, as for gather: a bad index recorded by an earlier kernel on
  // this device is raised now (deferred check mode).
  void begin() { raise_pending_cuda_error(device_.index()); }

  Status run(const GatherCall& call, ErrorDetail* err) {
    return gather_cuda(call.args, call.plan, current_cuda_stream(device_.index()), err);
  }

  Status run(const ScatterCall& call, ErrorDetail* err) {
    const size_t bytes = scatter_cuda_workspace_bytes(call.args, call.plan);
    const at::Tensor ws = workspace(bytes);
    return scatter_cuda(call.args, call.plan, bytes > 0 ? ws.mutable_data_ptr() : nullptr, bytes,
                        current_cuda_stream(device_.index()), err);
  }

  Status run(const IndexKCall& call, ErrorDetail* err) {
    const size_t bytes = index_k_cuda_workspace_bytes(call.args, call.plan);
    const at::Tensor ws = workspace(bytes);
    return index_k_cuda(call.args, call.plan, bytes > 0 ? ws.mutable_data_ptr() : nullptr, bytes,
                        current_cuda_stream(device_.index()), err);
  }

  [[noreturn]] void raise(OpCode op, Status st, const ErrorDetail& err) {
    check_cuda_launch(op_name(op), st, err);
    TORCH_CHECK(false, "stridewise.", op_name(op), " (cuda): unexpected status ", status_name(st));
  }

 private:
  // `bytes` of device workspace from the caching allocator on the current stream (reuse is
  // stream-ordered); undefined when 0.
  at::Tensor workspace(size_t bytes) const {
    if (bytes == 0) return at::Tensor();
    return at::empty({static_cast<int64_t>(bytes)},
                     at::TensorOptions().dtype(at::kByte).device(device_));
  }

  static c10::Device check_devices(const char* wrapper, const at::Tensor* out,
                                   const at::Tensor& self, const at::Tensor& index,
                                   const at::Tensor* src, const char* src_name) {
    const c10::Device d = out != nullptr ? out->device() : self.device();
    const bool same =
        self.device() == d && index.device() == d && (src == nullptr || src->device() == d);
    if (!same) {  // let c10 raise, with ATen's method name
      const std::string method = std::string("wrapper_CUDA_") + wrapper;
      std::optional<c10::Device> common;
      if (out != nullptr)
        c10::impl::check_and_update_common_device(common, *out, method.c_str(), "out");
      c10::impl::check_and_update_common_device(common, self, method.c_str(), "self");
      c10::impl::check_and_update_common_device(common, index, method.c_str(), "index");
      if (src != nullptr)
        c10::impl::check_and_update_common_device(common, *src, method.c_str(), src_name);
    }
    return d;
  }

  c10::Device device_;
  c10::cuda::CUDAGuard guard_;
};

}  // namespace stridewise::adapter
