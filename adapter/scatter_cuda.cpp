// The scatter family on CUDA: the CUDA registrations of the switchable aten:: overrides over
// the CUDA backend (cuda_backend.h).
#include "cuda_backend.h"
#include "scatter.h"

namespace stridewise::adapter {
namespace {

using CudaScatter = ScatterOverloads<CudaBackend>;

[[maybe_unused]] const int kCudaScatter = add_override(
    {"scatter", c10::DispatchKey::CUDA, &CudaScatter::install_scatter, __FILE__, __LINE__});
[[maybe_unused]] const int kCudaScatterAdd = add_override(
    {"scatter_add", c10::DispatchKey::CUDA, &CudaScatter::install_scatter_add, __FILE__, __LINE__});
[[maybe_unused]] const int kCudaScatterReduce =
    add_override({"scatter_reduce", c10::DispatchKey::CUDA, &CudaScatter::install_scatter_reduce,
                  __FILE__, __LINE__});

}  // namespace
}  // namespace stridewise::adapter
