// The scatter family on CUDA: the CUDA registrations of the switchable aten:: overrides over
// the CUDA backend (cuda_backend.h).
#include "cuda_backend.h"
#include "scatter.h"

namespace stridewise::adapter {
namespace {

[[maybe_unused]] const int kCudaRegistered =
    ScatterOverloads<CudaBackend>::register_all(c10::DispatchKey::CUDA, __FILE__);

}  // namespace
}  // namespace stridewise::adapter
