// C++ API of the stridewise torch adapter (libstridewise_torch.so). Linking the library
// registers the stridewise:: operators (torch::ops / torch.ops.stridewise.gather); enable()
// additionally routes aten:: ops (torch.gather, at::gather, Tensor.gather, their out= forms)
// on CPU and CUDA to stridewise kernels until disable(). ATen's autograd formulas stay in
// place, so gradients are unchanged.
//
// For the torch-free core API (plan_gather, gather_cpu, gather_cuda, ...) see
// core/include/stridewise/*.h.
#pragma once

#include <string>
#include <vector>

namespace stridewise {

// Routes the aten:: overloads of the selected ops to stridewise. `include` empty means every
// supported op; names in `exclude` are left native. Replaces any previous selection. Unknown
// names raise c10::ValueError. Thread-safe; cheap to call repeatedly.
void enable(const std::vector<std::string>& include = {},
            const std::vector<std::string>& exclude = {});

// Restores ATen's native kernels for every op enable() routed.
void disable();

// Ops currently routed to stridewise, and every op stridewise implements.
std::vector<std::string> enabled_ops();
std::vector<std::string> supported_ops();

// Per-op counters as JSON: {"gather": {"calls": 3, "cpu": 3, "cuda": 0, "noncontig_index": 1,
// "noncontig_self": 0, "noncontig_out": 0, "expanded_index": 1, "copies": 0, "vectorized": 0,
// "int64_offsets": 0, "errors": 0}}. Counts calls through stridewise:: ops and through enabled
// aten:: overrides alike.
std::string stats_json();
void reset_stats();

// CUDA index-error checking: "deferred" (default; no host sync, errors raised by the next
// stridewise CUDA call or check_errors()) or "sync" (each launch synchronizes and raises its own
// error). The environment variable STRIDEWISE_CUDA_CHECK sets the initial mode.
void set_cuda_check_mode(const std::string& mode);
std::string get_cuda_check_mode();

// Raises a pending CUDA index error now; with sync, waits for each device first. No-op without
// CUDA.
void check_errors(bool sync = true);

}  // namespace stridewise
