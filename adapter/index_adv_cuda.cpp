// Advanced indexing (index_adv.h) on CUDA: ATen's CUDA kernels for the calls the core does not
// take (a deterministic write that may collide, which the core leaves to ATen's sorted path,
// among them), and the CUDA registrations over the CUDA backend (cuda_backend.h).
#include <ATen/ops/_index_put_impl_cuda_dispatch.h>
#include <ATen/ops/index_cuda_dispatch.h>
#include <ATen/ops/index_fill_cuda_dispatch.h>
#include <ATen/ops/put_cuda_dispatch.h>
#include <ATen/ops/take_cuda_dispatch.h>

#include "cuda_backend.h"
#include "index_adv.h"

namespace stridewise::adapter {
namespace {

struct CudaKernels {
  using T = at::Tensor;
  static T index(const T& self, const OptTensors& indices) {
    return at::cuda::index(self, indices);
  }
  static T& index_out(T& out, const T& self, const OptTensors& indices) {
    return at::cuda::index_out(out, self, indices);
  }
  static T& index_put_(T& self, const OptTensors& indices, const T& values, bool accumulate,
                       bool unsafe) {
    return at::cuda::_index_put_impl_(self, indices, values, accumulate, unsafe);
  }
  static T take(const T& self, const T& index) { return at::cuda::take(self, index); }
  static T& take_out(T& out, const T& self, const T& index) {
    return at::cuda::take_out(out, self, index);
  }
  static T& put_(T& self, const T& index, const T& source, bool accumulate) {
    return at::cuda::put_(self, index, source, accumulate);
  }
  static T& index_fill_(T& self, int64_t dim, const T& index, const c10::Scalar& value) {
    return at::cuda::index_fill_(self, dim, index, value);
  }
  static T& index_fill_(T& self, int64_t dim, const T& index, const T& value) {
    return at::cuda::index_fill_(self, dim, index, value);
  }
};

using CudaAdvIndex = AdvIndexOverloads<CudaBackend, CudaKernels>;

[[maybe_unused]] const int kCudaAdvIndex =
    CudaAdvIndex::register_all(c10::DispatchKey::CUDA, __FILE__);

}  // namespace
}  // namespace stridewise::adapter
