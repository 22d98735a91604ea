// gather: out[i_0, ..., i_{r-1}] = self[i_0, ..., index[i_0, ..., i_{r-1}], ..., i_{r-1}]
// where the index value replaces coordinate `dim`.
//
// Contract for every entry point (the adapter checks these with ATen's wording first):
//  - self, index and out have the same rank r (0 <= r <= kMaxRank); index and out have
//    the same sizes; index.sizes[d] <= self.sizes[d] for d != dim; 0 <= dim < max(r, 1).
//  - self.dtype == out.dtype; index.dtype is kInt32 or kInt64.
//  - out does not overlap self or index, and no two out positions share memory.
//  - Any strides (including 0) on any operand; no operand is ever copied.
// Bad index values (v < 0, or v < -n with wraps, or v >= n = self.sizes[dim]) are never used to
// address memory:
//  - CPU: returns kIndexOutOfRange with the first offending element in iteration order;
//    out may be partially written (as with ATen).
//  - CUDA: the kernel skips the element (out keeps its prior value there) and records the
//    first offending value in a per-device error record; see cuda_errors.h.
#pragma once

#include <cstdint>

#include "stridewise/cpu_exec.h"
#include "stridewise/layout.h"
#include "stridewise/status.h"
#include "stridewise/view.h"

namespace stridewise {

struct GatherArgs {
  StridedView out;
  StridedView self;
  StridedView index;
  int64_t dim = 0;  // already wrapped into [0, rank) (0 for rank 0)
  // The op its errors and CUDA error records name: gather, or an op that is a gather over views
  // (index_select, embedding, index through one index tensor).
  OpCode op = OpCode::kGather;
  // index's rules, for a read the k-index core hands over (index_k_as_gather): values in
  // [-n, n) count from the end (IndexedOpDesc::wraps), and errors name self's dim
  // `report_dim` (>= 0) instead of `dim`, which is a dim of the views.
  bool wraps = false;
  int64_t report_dim = -1;
};

// Operand order in a gather plan.
enum GatherOperand : int { kGatherOut = 0, kGatherIndex = 1, kGatherSelf = 2 };

struct GatherPlan {
  LoopPlan<3> loop;             // over index's shape; self's stride on `dim` set to 0
  int64_t self_dim_stride = 0;  // added per unit of index value
  int64_t self_dim_size = 0;    // valid index values are [0, self_dim_size) (wraps: from -size)
  int64_t dim = 0;              // the dim errors name (GatherArgs::report_dim when set)
  bool wraps = false;
  // Vector width in elements (1 = scalar). >1 only when the fastest planned dim has
  // index stride 0 and unit stride for self and out, its size and every other stride of
  // self and out are multiples of vec, and out/self data are vec*elem_size aligned.
  int vec = 1;
};

// Validates the contract above (cheap, host only) and plans the loop nest.
Status plan_gather(const GatherArgs& args, GatherPlan* plan, ErrorDetail* err);

// Largest power-of-two vector width (in elements, up to 16 bytes) the plan allows.
int pick_gather_vec(const GatherArgs& args, const GatherPlan& plan, int max_bytes);

// Each entry point comes in two forms. The convenience form plans (plan_gather) and then
// runs the plan-taking form. The plan-taking form is for callers that planned already (the
// torch adapter plans once per call for its statistics): it requires `plan` to be the
// result of a successful plan_gather(args, ...) on these very args -- same views, data
// pointers and dim -- and does not validate again; any other plan may address memory
// outside the operands.

Status gather_cpu(const GatherArgs& args, const CpuExecutor& exec, ErrorDetail* err);
Status gather_cpu(const GatherArgs& args, const GatherPlan& plan, const CpuExecutor& exec,
                  ErrorDetail* err);

// `stream` is a cudaStream_t (void* keeps this header free of CUDA). Asynchronous: returns
// after the launch. Returns kNotCompiled in builds without CUDA.
Status gather_cuda(const GatherArgs& args, void* stream, ErrorDetail* err);
Status gather_cuda(const GatherArgs& args, const GatherPlan& plan, void* stream, ErrorDetail* err);

}  // namespace stridewise
