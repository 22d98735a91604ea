#include "common.h"

#include <ATen/Dispatch.h>
#include <ATen/Parallel.h>
#include <c10/util/Exception.h>

#include <cstring>
#include <iterator>
#include <memory>
#include <mutex>
#include <string>

#include "stridewise/scatter.h"

namespace stridewise::adapter {

// ---- dtypes and views -------------------------------------------------------------------------

bool to_dtype(c10::ScalarType st, DType* out) {
  using S = c10::ScalarType;
  struct Entry {
    S torch;
    DType core;
  };
  static constexpr Entry kMap[] = {
      {S::Bool, DType::kBool},
      {S::Byte, DType::kUInt8},
      {S::Char, DType::kInt8},
      {S::Short, DType::kInt16},
      {S::UInt16, DType::kUInt16},
      {S::Int, DType::kInt32},
      {S::UInt32, DType::kUInt32},
      {S::Long, DType::kInt64},
      {S::UInt64, DType::kUInt64},
      {S::Half, DType::kFloat16},
      {S::BFloat16, DType::kBFloat16},
      {S::Float, DType::kFloat32},
      {S::Double, DType::kFloat64},
      {S::ComplexHalf, DType::kComplex32},
      {S::ComplexFloat, DType::kComplex64},
      {S::ComplexDouble, DType::kComplex128},
      {S::Float8_e4m3fn, DType::kFloat8E4M3FN},
      {S::Float8_e5m2, DType::kFloat8E5M2},
      {S::Float8_e4m3fnuz, DType::kFloat8E4M3FNUZ},
      {S::Float8_e5m2fnuz, DType::kFloat8E5M2FNUZ},
      {S::Float8_e8m0fnu, DType::kFloat8E8M0FNU},
  };
  for (const Entry& e : kMap) {
    if (e.torch == st) {
      *out = e.core;
      return true;
    }
  }
  return false;
}

DType dtype_of(const at::Tensor& t, const char* op, const char* arg) {
  DType d = DType::kFloat32;
  TORCH_CHECK_NOT_IMPLEMENTED(to_dtype(t.scalar_type(), &d), "stridewise.", op, ": dtype ",
                              t.scalar_type(), " of argument '", arg,
                              "' is not supported by stridewise; exclude '", op,
                              "' from stridewise.enable() to use the native kernel");
  return d;
}

StridedView to_view(const at::Tensor& t, const char* op, const char* arg, bool writable) {
  StridedView v;
  const int64_t rank = t.dim();
  TORCH_CHECK(rank <= kMaxRank, "stridewise.", op, ": argument '", arg, "' has ", rank,
              " dimensions, more than the ", kMaxRank, " stridewise supports; exclude '", op,
              "' from stridewise.enable() to use the native kernel for such tensors");
  v.dtype = dtype_of(t, op, arg);
  v.rank = static_cast<int>(rank);
  const auto sizes = t.sizes();
  const auto strides = t.strides();
  for (int64_t d = 0; d < rank; ++d) {
    v.sizes[d] = sizes[d];
    v.strides[d] = strides[d];
  }
  // const_data_ptr() for inputs: a copy-on-write input must not be materialized (a copy).
  v.data = writable ? t.mutable_data_ptr() : const_cast<void*>(t.const_data_ptr());
  return v;
}

void promote_scalar(StridedView* v) {
  if (v->rank != 0) return;
  v->rank = 1;
  v->sizes[0] = 1;
  v->strides[0] = 1;
}

void scalar_bytes(const c10::Scalar& v, c10::ScalarType st, unsigned char (&out)[16]) {
  AT_DISPATCH_ALL_TYPES_AND_COMPLEX_AND4(
      at::ScalarType::Bool, at::ScalarType::Half, at::ScalarType::BFloat16,
      at::ScalarType::ComplexHalf, st, "stridewise", [&] {
        const scalar_t x = v.to<scalar_t>();
        static_assert(sizeof(x) <= sizeof(out), "scalar buffer too small");
        std::memcpy(out, &x, sizeof(x));
      });
}

void count_layouts(OpStats& s, const at::Tensor& self, const at::Tensor& index,
                   const at::Tensor* src, const at::Tensor& out, bool int64_offsets) {
  if (!index.is_contiguous()) s.bump(kNoncontigIndex);
  if (!self.is_contiguous()) s.bump(kNoncontigSelf);
  if (!out.is_contiguous()) s.bump(kNoncontigOut);
  if (src != nullptr && !src->is_contiguous()) s.bump(kNoncontigSrc);
  if (is_expanded(index)) s.bump(kExpandedIndex);
  if (src != nullptr && is_expanded(*src)) s.bump(kExpandedSrc);
  if (int64_offsets) s.bump(kInt64Offsets);
}

bool is_expanded(const at::Tensor& t) {
  const auto sizes = t.sizes();
  const auto strides = t.strides();
  for (size_t d = 0; d < sizes.size(); ++d)
    if (sizes[d] > 1 && strides[d] == 0) return true;
  return false;
}

namespace {

void torch_parallel_for(void* /*self*/, int64_t n, int64_t grain, RangeFn fn, void* ctx) {
  at::parallel_for(0, n, grain, [&](int64_t begin, int64_t end) { fn(ctx, begin, end); });
}

}  // namespace

const CpuExecutor& torch_cpu_executor() {
  static const CpuExecutor exec{&torch_parallel_for, nullptr};
  return exec;
}

// ---- errors -----------------------------------------------------------------------------------

void throw_status(const char* op, const char* device, Status s, const ErrorDetail& e) {
  switch (s) {
    case Status::kOk:
      break;
    case Status::kIndexOutOfRange:
      // ATen's wording, unchanged: "index 16 is out of bounds for dimension 1 with size 16".
      TORCH_CHECK(false, format_index_error(e));
    case Status::kUnsupported:
      TORCH_CHECK_NOT_IMPLEMENTED(false, "stridewise.", op, " (", device, "): ", e.message,
                                  "; exclude '", op,
                                  "' from stridewise.enable() to use the native kernel");
    case Status::kNotCompiled:
      TORCH_CHECK(false, "stridewise.", op, " (", device,
                  "): this build of stridewise has no CUDA kernels (nvcc was not found when it "
                  "was configured); rebuild with CUDA available (./run.sh build)");
    case Status::kDeviceError:
      TORCH_CHECK(false, "stridewise.", op, " (", device, "): CUDA error: ", e.message);
    case Status::kInvalidArgument:
      TORCH_CHECK(false, "stridewise.", op, " (", device,
                  "): the core rejected arguments the adapter accepted: ", e.message,
                  ". This is a stridewise bug; please report it with the tensors' shapes, "
                  "strides and dtypes");
  }
  TORCH_CHECK(false, "stridewise.", op, " (", device, "): unexpected status ", static_cast<int>(s),
              " (", status_name(s), ")");
}

// ---- statistics -------------------------------------------------------------------------------

const char* counter_name(int c) {
  static const char* const kNames[kNumCounters] = {
      "calls",          "cpu",           "cuda",           "noncontig_index",
      "noncontig_self", "noncontig_out", "expanded_index", "copies",
      "vectorized",     "int64_offsets", "errors",         "noncontig_src",
      "expanded_src",   "deterministic", "fallback"};
  return c >= 0 && c < kNumCounters ? kNames[c] : "?";
}

const char* fallback_name(Fallback r) {
  static const char* const kNames[] = {
      "unmapped_dtype", "dtype_rejected",  "dtype_moved", "dtype_arith",  "complex_mean",
      "reduce_dtype",   "complex_product", "alpha_kind",  "empty_self",   "source_shape",
      "shape_error",    "needs_copy",      "rank",        "index_terms",  "no_index_terms",
      "device_mix",     "expanded_self",   "masked_fill", "core_declined"};
  static_assert(std::size(kNames) == static_cast<size_t>(Fallback::kNumFallbacks),
                "a name per Fallback");
  const int i = static_cast<int>(r);
  return i >= 0 && i < static_cast<int>(Fallback::kNumFallbacks) ? kNames[i] : "?";
}

namespace {

bool no_arith_dtype(c10::ScalarType st) {
  using S = c10::ScalarType;
  return st == S::UInt16 || st == S::UInt32 || st == S::UInt64 || st == S::ComplexHalf ||
         st == S::Float8_e4m3fn || st == S::Float8_e5m2 || st == S::Float8_e4m3fnuz ||
         st == S::Float8_e5m2fnuz || st == S::Float8_e8m0fnu;
}

bool float8_4(c10::ScalarType st) {
  using S = c10::ScalarType;
  return st == S::Float8_e4m3fn || st == S::Float8_e5m2 || st == S::Float8_e4m3fnuz ||
         st == S::Float8_e5m2fnuz;
}

}  // namespace

Fallback dtype_rule(OpCode op, const at::Tensor& t, Combine c) {
  DType dt = DType::kFloat32;
  const c10::ScalarType st = t.scalar_type();
  if (!to_dtype(st, &dt)) return Fallback::kUnmappedDtype;
  if (scatter_supports(dt, Combine::kAdd) && scatter_supports(dt, c))
    return Fallback::kNumFallbacks;
  if (!t.is_cpu()) return c == Combine::kCopy ? Fallback::kDtypeMoved : Fallback::kDtypeRejected;
  if (!no_arith_dtype(st)) return Fallback::kDtypeRejected;  // bool mean, complex amax, ...
  const bool cx32 = st == c10::ScalarType::ComplexHalf;
  switch (op) {
    case OpCode::kIndexSelect:
    case OpCode::kEmbedding:
    case OpCode::kIndex:
      return c == Combine::kCopy ? Fallback::kNumFallbacks : Fallback::kDtypeRejected;
    case OpCode::kIndexCopy:
      return cx32 ? Fallback::kNumFallbacks : Fallback::kDtypeRejected;
    case OpCode::kIndexPut:
      if (!(cx32 || float8_4(st))) return Fallback::kDtypeRejected;
      return c == Combine::kCopy ? Fallback::kNumFallbacks : Fallback::kDtypeArith;
    case OpCode::kIndexAdd:
      return cx32 ? Fallback::kDtypeArith : Fallback::kDtypeRejected;
    default:
      return Fallback::kDtypeRejected;
  }
}

namespace {

// One entry per op table row, in table order, made once (an array: no moves of the atomics).
struct StatsTable {
  std::mutex mu;  // serializes the readers (stats_json, reset_stats); bumps are atomic
  std::unique_ptr<OpStats[]> ops;
  StatsTable() : ops(new OpStats[op_count()]) {
    for (int i = 0; i < op_count(); ++i) ops[i].name = op_table()[i].key;
  }
};

StatsTable& stats_table() {
  static StatsTable* t = new StatsTable();  // leaked: kernels may run during static destruction
  return *t;
}

}  // namespace

OpStats& op_stats(OpCode op) {
  const int n = static_cast<int>(op);
  TORCH_CHECK(n >= 1 && n <= op_count(), "stridewise: no op table row for op code ", n);
  return stats_table().ops[n - 1];
}

std::vector<std::string> supported_ops() {
  std::vector<std::string> out;
  for (int i = 0; i < op_count(); ++i) out.emplace_back(op_table()[i].key);
  return out;
}

std::string stats_json() {
  StatsTable& t = stats_table();
  std::lock_guard<std::mutex> lock(t.mu);
  std::string os = "{";
  bool first_op = true;
  for (int i = 0; i < op_count(); ++i) {
    const OpStats& s = t.ops[i];
    os += (first_op ? "\"" : ", \"") + std::string(s.name) + "\": {";
    first_op = false;
    for (int c = 0; c < kNumCounters; ++c)
      os += (c ? ", \"" : "\"") + std::string(counter_name(c)) +
            "\": " + std::to_string(s.counters[c].load(std::memory_order_relaxed));
    // the rules that fired (non-zero counts only), by name
    os += ", \"fallback_reasons\": {";
    bool first_reason = true;
    for (int r = 0; r < static_cast<int>(Fallback::kNumFallbacks); ++r) {
      const uint64_t n = s.fallbacks[r].load(std::memory_order_relaxed);
      if (n == 0) continue;
      os += (first_reason ? "\"" : ", \"") + std::string(fallback_name(static_cast<Fallback>(r))) +
            "\": " + std::to_string(n);
      first_reason = false;
    }
    os += "}}";
  }
  os += '}';
  return os;
}

void reset_stats() {
  StatsTable& t = stats_table();
  std::lock_guard<std::mutex> lock(t.mu);
  for (int i = 0; i < op_count(); ++i) {
    OpStats& s = t.ops[i];
    for (auto& c : s.counters) c.store(0, std::memory_order_relaxed);
    for (auto& c : s.fallbacks) c.store(0, std::memory_order_relaxed);
  }
}

// ---- overrides and hooks ----------------------------------------------------------------------

namespace {

std::vector<OverrideSpec>& override_table() {
  static auto* v = new std::vector<OverrideSpec>();
  return *v;
}

CudaHooks& hooks_storage() {
  static CudaHooks h;
  return h;
}

}  // namespace

int add_override(const OverrideSpec& spec) {
  override_table().push_back(spec);
  return static_cast<int>(override_table().size());
}

const std::vector<OverrideSpec>& overrides() {
  return override_table();
}

int set_cuda_hooks(const CudaHooks& hooks) {
  hooks_storage() = hooks;
  return 1;
}

const CudaHooks& cuda_hooks() {
  return hooks_storage();
}

}  // namespace stridewise::adapter
