// Shared pieces of the torch adapter: tensor -> StridedView, dtype mapping, the CPU executor
// backed by at::parallel_for, Status -> exception mapping, per-op statistics and the table of
// switchable aten:: overrides. Only adapter/ sees at::Tensor; the core never does.
#pragma once

#include <ATen/core/Tensor.h>
#include <c10/core/DispatchKey.h>
#include <c10/core/Scalar.h>
#include <c10/core/ScalarType.h>

#include <atomic>
#include <cstdint>
#include <string>
#include <vector>

#include "stridewise/cpu_exec.h"
#include "stridewise/dtype.h"
#include "stridewise/indexed_op.h"
#include "stridewise/status.h"
#include "stridewise/view.h"

namespace torch {
class Library;
}  // namespace torch

namespace stridewise::adapter {

// ---- dtypes and views -------------------------------------------------------------------------

// Maps a torch dtype to the core's DType; false for dtypes the core has no entry for
// (quantized, bits*, float4, float8_e8m0fnu, sub-byte integers).
bool to_dtype(c10::ScalarType st, DType* out);

// The DType of `t`, or a NotImplementedError naming `op`, `arg` and the dtype.
DType dtype_of(const at::Tensor& t, const char* op, const char* arg);

// A view of `t`: data pointer with the storage offset applied, sizes, strides in elements.
// Never copies (inputs use const_data_ptr(), so a copy-on-write tensor is not materialized;
// `writable` is for outputs). Rank above kMaxRank or an unmapped dtype raises a clear error
// naming `op` and `arg`.
StridedView to_view(const at::Tensor& t, const char* op, const char* arg, bool writable = false);

// Turns a rank-0 view into a rank-1 view of one element (ATen treats rank 0 like rank 1 in
// gather/scatter shape checks, so a 0-dim operand may meet a 1-dim one).
void promote_scalar(StridedView* v);

// `v` in dtype `st`, as bytes (the core's value and alpha scalars), with ATen's conversion
// (Scalar::to: "value cannot be converted to type ... without overflow" as ATen's kernels).
void scalar_bytes(const c10::Scalar& v, c10::ScalarType st, unsigned char (&out)[16]);

// True when some dim of size > 1 has stride 0 (an expand()ed operand).
bool is_expanded(const at::Tensor& t);

// CPU executor that runs chunks through at::parallel_for (honours torch.set_num_threads and
// reuses torch's thread pool; nested calls inside a parallel region run inline).
const CpuExecutor& torch_cpu_executor();

// ---- errors -----------------------------------------------------------------------------------

// Raises the exception for a non-ok core status. `op` is the op name ("gather"), `device`
// "cpu" or "cuda". CPU index errors use ATen's exact wording (RuntimeError).
[[noreturn]] void throw_status(const char* op, const char* device, Status s, const ErrorDetail& e);

// ---- statistics -------------------------------------------------------------------------------

enum Counter : int {
  kCalls = 0,
  kCpu,
  kCuda,
  kNoncontigIndex,
  kNoncontigSelf,
  kNoncontigOut,
  kExpandedIndex,
  kCopies,  // always 0: the adapter never copies. A future fallback that copies must count here.
  kVectorized,
  kInt64Offsets,
  kErrors,
  // Appended for the scatter family (issue 9); the names above keep their order.
  kNoncontigSrc,   // src is not contiguous
  kExpandedSrc,    // src has a stride-0 dimension of size > 1
  kDeterministic,  // calls made in deterministic mode (torch.use_deterministic_algorithms)
  kFallback,       // calls handed to ATen's own kernel (a dtype/combine the core does not run)
  kNumCounters
};

const char* counter_name(int c);

// Why a call went to ATen's own kernel: one stable name per rule (stats()[op]
// ["fallback_reasons"]; docs/fallbacks.md lists the rules per op and says which ATen forces).
enum class Fallback : uint8_t {
  kUnmappedDtype,  // "unmapped_dtype": a dtype the core has no entry for (quantized, bits, ...)
  kDtypeRejected,  // "dtype_rejected": ATen's kernel raises for this dtype (op, combine, device)
  kDtypeMoved,     // "dtype_moved": CUDA: a dtype without arithmetic in the core (ATen may move it)
  kDtypeArith,     // "dtype_arith": ATen computes in a dtype the core has no arithmetic for
  kComplexMean,    // "complex_mean": scatter_reduce mean of a complex self
  kReduceDtype,    // "reduce_dtype": index_reduce of a bool or complex self
  kCxProduct,      // "complex_product": ATen's CPU complex product is neither core formula
  kAlphaKind,      // "alpha_kind": index_add's alpha of a kind ATen refuses for self's dtype
  kEmptySelf,      // "empty_self": an empty self with a non-empty index (ATen: per path)
  kSourceShape,    // "source_shape": a source whose shape is not self's with dim resized
  kShapeError,     // "shape_error": shapes ATen rejects with its own error (embedding backward)
  kNeedsCopy,      // "needs_copy": ATen's result needs a copy or cast the core does not make
  kRank,           // "rank": more than kMaxRank dims
  kIndexTerms,     // "index_terms": more than kMaxIndexTerms index tensors (a mask counts its dims)
  kNoIndexTerms,   // "no_index_terms": only None / 0-dim masks, no index tensor
  kDeviceMix,      // "device_mix": an index, out= or values on another device (ATen moves them)
  kExpandedSelf,   // "expanded_self": index_put_ on a self with internal overlap
  kMaskedFill,     // "masked_fill": index_put_ of one CPU value through a mask (masked_fill_)
  kCoreDeclined,   // "core_declined": the core's plan or kernel returned kUnsupported
  kNumFallbacks
};

const char* fallback_name(Fallback r);

// The dtype rule of a call the core would run with combine `c` on `t`'s dtype (kNumFallbacks:
// the core runs it). The core computes the dtypes with arithmetic (scatter_supports) and moves
// any dtype's bytes; ATen's CPU kernels move or compute some of the others per op (torch 2.13,
// measured: tests/test_dtype_rules.py): index_select, embedding and index move every dtype,
// index_copy complex32, index_put complex32 and four float8 types (copy and accumulate, the
// latter computed), index_add computes complex32; the rest raise NotImplementedError. So on
// the CPU: the core moves what ATen moves; ATen raises (dtype_rejected) or computes
// (dtype_arith) the rest. On CUDA (not measured here): dtype_moved / dtype_rejected.
Fallback dtype_rule(OpCode op, const at::Tensor& t, Combine c);

struct OpStats {
  const char* name = "";
  std::atomic<uint64_t> counters[kNumCounters] = {};
  std::atomic<uint64_t> fallbacks[static_cast<int>(Fallback::kNumFallbacks)] = {};
  void bump(Counter c) { counters[c].fetch_add(1, std::memory_order_relaxed); }
  // Counts a call handed to ATen's kernel under rule `r` (and in the "fallback" total).
  void fall_back(Fallback r) {
    bump(kFallback);
    fallbacks[static_cast<int>(r)].fetch_add(1, std::memory_order_relaxed);
  }
};

// Counts one call's layouts: non-contiguous index / self / out / src (src may be null),
// expanded (stride-0) index and src, and whether the plan needed 64-bit offsets.
void count_layouts(OpStats& s, const at::Tensor& self, const at::Tensor& index,
                   const at::Tensor* src, const at::Tensor& out, bool int64_offsets);

// The (process-lifetime) stats entry of `op`, named by its op table key (ops.def). Every op of
// the table has one from the start; supported_ops() lists the keys in table order.
OpStats& op_stats(OpCode op);
std::vector<std::string> supported_ops();
std::string stats_json();
void reset_stats();

// Counts a call; if the scope is left by an exception, also counts an error.
class CallScope {
 public:
  CallScope(OpStats& s, Counter device) : stats_(s), uncaught_(std::uncaught_exceptions()) {
    s.bump(kCalls);
    s.bump(device);
  }
  ~CallScope() {
    if (std::uncaught_exceptions() > uncaught_) stats_.bump(kErrors);
  }
  CallScope(const CallScope&) = delete;
  CallScope& operator=(const CallScope&) = delete;

 private:
  OpStats& stats_;
  int uncaught_;
};

// ---- ATen's own kernels ----------------------------------------------------------------------

// ATen's structured kernel class with the one output it asks for; only impl() is called (the
// hand-over to ATen's kernel for a call whose checks passed, where the core has none).
template <class Structured>
struct AtenImpl final : Structured {
  explicit AtenImpl(const at::Tensor& out) : out_(out) {}
  const at::Tensor& maybe_get_output(int64_t /*output_idx*/) override { return out_; }
  const at::Tensor& out_;
};

// ---- switchable aten:: overrides --------------------------------------------------------------

// How one op installs its kernels for one dispatch key into a torch::Library(IMPL, "aten", key).
struct OverrideSpec {
  OpCode op;  // enable() names it by its op table key
  c10::DispatchKey key;
  void (*install)(torch::Library& lib);
  const char* file;
  uint32_t line;
};

// Called from namespace-scope initializers in the op files; returns a dummy for that purpose.
int add_override(const OverrideSpec& spec);
const std::vector<OverrideSpec>& overrides();

// ---- CUDA hooks -------------------------------------------------------------------------------

// Filled by the CUDA part of the adapter when it is linked in (torch built with CUDA).
struct CudaHooks {
  void (*check_errors)(bool sync) = nullptr;
};
int set_cuda_hooks(const CudaHooks& hooks);
const CudaHooks& cuda_hooks();

}  // namespace stridewise::adapter
