// CUDA entry points for builds without CUDA: every call reports kNotCompiled, so callers
// (the adapter, tests) link and can tell a CPU-only build apart from a device failure.
// The check mode is still a process-wide setting, so code that configures it before
// knowing the build type behaves the same in both builds.
#include <atomic>
#include <cstdlib>
#include <cstring>

#include "stridewise/cuda_errors.h"
#include "stridewise/gather.h"
#include "stridewise/index_k.h"
#include "stridewise/scatter.h"

namespace stridewise {
namespace {

Status not_compiled(ErrorDetail* err, const char* what) {
  if (err) {
    *err = ErrorDetail{};
    err->status = Status::kNotCompiled;
    err->message = std::string(what) + ": stridewise was built without CUDA";
  }
  return Status::kNotCompiled;
}

CudaCheckMode mode_from_env() {
  const char* v = std::getenv("STRIDEWISE_CUDA_CHECK");
  return v && std::strcmp(v, "sync") == 0 ? CudaCheckMode::kSync : CudaCheckMode::kDeferred;
}

std::atomic<int32_t>& mode_slot() {
  static std::atomic<int32_t> mode{static_cast<int32_t>(mode_from_env())};
  return mode;
}

}  // namespace

CudaCheckMode cuda_check_mode() {
  return static_cast<CudaCheckMode>(mode_slot().load());
}

void set_cuda_check_mode(CudaCheckMode mode) {
  mode_slot().store(static_cast<int32_t>(mode));
}

Status cuda_error_slots(int, CudaErrorRecord** record, int32_t** claim, ErrorDetail* err) {
  if (record) *record = nullptr;
  if (claim) *claim = nullptr;
  return not_compiled(err, "cuda_error_slots");
}

Status cuda_poll_errors(int, void*, ErrorDetail* err) {
  return not_compiled(err, "cuda_poll_errors");
}

Status cuda_abort_word(int, int64_t** word, int64_t* generation, ErrorDetail* err) {
  if (word) *word = nullptr;
  if (generation) *generation = 0;
  return not_compiled(err, "cuda_abort_word");
}

size_t scatter_cuda_workspace_bytes(const ScatterArgs&, const ScatterPlan&) {
  return 0;
}

Status scatter_cuda(const ScatterArgs&, const ScatterPlan&, void*, size_t, void*,
                    ErrorDetail* err) {
  return not_compiled(err, "scatter_cuda");
}

size_t index_k_cuda_workspace_bytes(const IndexKArgs&, const IndexKPlan&) {
  return 0;
}

Status index_k_cuda(const IndexKArgs&, const IndexKPlan&, void*, size_t, void*, ErrorDetail* err) {
  return not_compiled(err, "index_k_cuda");
}

Status gather_cuda(const GatherArgs&, void*, ErrorDetail* err) {
  return not_compiled(err, "gather_cuda");
}

Status gather_cuda(const GatherArgs&, const GatherPlan&, void*, ErrorDetail* err) {
  return not_compiled(err, "gather_cuda");
}

}  // namespace stridewise
