// The dim-indexed ops (index_dim.h) on CUDA: ATen's CUDA kernels for the calls the core does not
// take, and the CUDA registrations over the CUDA backend (cuda_backend.h).
#include <ATen/ops/embedding_dense_backward_native.h>
#include <ATen/ops/index_add_native.h>
#include <ATen/ops/index_reduce_native.h>
#include <ATen/ops/index_select_native.h>

#include "cuda_backend.h"
#include "index_dim.h"

namespace stridewise::adapter {
namespace {

struct CudaKernels {
  using IndexAdd = at::native::structured_index_add_cuda_out;
  using IndexReduce = at::native::structured_index_reduce_cuda_out;
  static at::Tensor& index_select_out(const at::Tensor& self, int64_t dim, const at::Tensor& index,
                                      at::Tensor& out) {
    return at::native::index_select_out_cuda(self, dim, index, out);
  }
  static at::Tensor embedding_backward(const at::Tensor& grad, const at::Tensor& indices,
                                       int64_t num_weights, int64_t padding_idx, bool scale) {
    return at::native::embedding_dense_backward_cuda(grad, indices, num_weights, padding_idx,
                                                     scale);
  }
};

using CudaIndexDim = IndexDimOverloads<CudaBackend, CudaKernels>;

[[maybe_unused]] const int kCudaIndexDim =
    CudaIndexDim::register_all(c10::DispatchKey::CUDA, __FILE__);

}  // namespace
}  // namespace stridewise::adapter
