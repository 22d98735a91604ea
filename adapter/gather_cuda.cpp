// gather on CUDA: the CUDA registrations (stridewise:: and the switchable aten:: override) of
// the entry template over the CUDA backend (cuda_backend.h: ATen's device checks and guard, the
// deferred error poll, the launch on the current stream). No host synchronization on the
// default (deferred) path.
#include <torch/library.h>

#include "cuda_backend.h"
#include "gather.h"

namespace stridewise::adapter {
namespace {

using CudaGather = GatherOverloads<CudaBackend>;

[[maybe_unused]] const int kCudaRegistered =
    CudaGather::register_all(c10::DispatchKey::CUDA, __FILE__);

}  // namespace
}  // namespace stridewise::adapter

TORCH_LIBRARY_IMPL(stridewise, CUDA, m) {
  m.impl("gather", TORCH_FN(stridewise::adapter::CudaGather::gather));
  m.impl("gather.out", TORCH_FN(stridewise::adapter::CudaGather::gather_out));
}
