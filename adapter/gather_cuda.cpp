// gather on CUDA: device checks and guard like ATen's CUDA wrapper, the deferred error poll,
// the launch on the current stream, and the CUDA registrations (stridewise:: and the switchable
// aten:: override). No host synchronization on the default (deferred) path.
#include <ATen/core/Tensor.h>
#include <ATen/core/op_registration/adaption.h>
#include <c10/cuda/CUDAGuard.h>
#include <torch/library.h>

#include <optional>

#include "cuda_common.h"
#include "gather.h"

namespace stridewise::adapter {
namespace {

void run_cuda(const GatherCall& call, c10::DeviceIndex device) {
  ErrorDetail err;
  const Status st = gather_cuda(call.args, call.plan, current_cuda_stream(device), &err);
  check_cuda_launch("gather", st, err);
}

// Method names as in ATen's generated CUDA wrappers, so device-mismatch messages match.
at::Tensor& cuda_gather_out(const at::Tensor& self, int64_t dim, const at::Tensor& index,
                            bool /*sparse_grad*/, at::Tensor& out) {
  std::optional<c10::Device> common;
  c10::impl::check_and_update_common_device(common, out, "wrapper_CUDA_out_gather_out", "out");
  c10::impl::check_and_update_common_device(common, self, "wrapper_CUDA_out_gather_out", "self");
  c10::impl::check_and_update_common_device(common, index, "wrapper_CUDA_out_gather_out", "index");
  const c10::cuda::CUDAGuard guard(out.device());
  CallScope scope(gather_stats(), kCuda);
  raise_pending_cuda_error(out.device().index());
  GatherCall call;
  if (gather_prepare(self, dim, index, out, /*out_given=*/true, &call))
    run_cuda(call, out.device().index());
  return out;
}

at::Tensor cuda_gather(const at::Tensor& self, int64_t dim, const at::Tensor& index,
                       bool /*sparse_grad*/) {
  std::optional<c10::Device> common;
  c10::impl::check_and_update_common_device(common, self, "wrapper_CUDA__gather", "self");
  c10::impl::check_and_update_common_device(common, index, "wrapper_CUDA__gather", "index");
  const c10::cuda::CUDAGuard guard(self.device());
  CallScope scope(gather_stats(), kCuda);
  raise_pending_cuda_error(self.device().index());
  at::Tensor out;
  GatherCall call;
  if (gather_prepare(self, dim, index, out, /*out_given=*/false, &call))
    run_cuda(call, self.device().index());
  return out;
}

void install_cuda_override(torch::Library& m) {
  m.impl("gather", TORCH_FN(cuda_gather));
  m.impl("gather.out", TORCH_FN(cuda_gather_out));
}

[[maybe_unused]] const int kCudaOverride =
    add_override({"gather", c10::DispatchKey::CUDA, &install_cuda_override, __FILE__, __LINE__});

}  // namespace
}  // namespace stridewise::adapter

TORCH_LIBRARY_IMPL(stridewise, CUDA, m) {
  m.impl("gather", TORCH_FN(stridewise::adapter::cuda_gather));
  m.impl("gather.out", TORCH_FN(stridewise::adapter::cuda_gather_out));
}
