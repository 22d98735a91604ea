#include "stridewise/status.h"

#include "stridewise/dtype.h"

namespace stridewise {

namespace {

constexpr OpInfo kOps[] = {
#define SW_OP(code, number, key, error_name, family, packets) \
  {OpCode::code, key, error_name, Family::k##family, packets},
#include "stridewise/ops.def"
#undef SW_OP
};
constexpr int kOpCount = static_cast<int>(sizeof(kOps) / sizeof(kOps[0]));

// Rows in number order from 1 with no gap: op_info() indexes by number.
constexpr bool numbered_in_order() {
  for (int i = 0; i < kOpCount; ++i)
    if (static_cast<int32_t>(kOps[i].code) != i + 1) return false;
  return true;
}
static_assert(numbered_in_order(), "ops.def: numbers must run 1, 2, 3, ... in table order");

}  // namespace

const OpInfo* op_table() {
  return kOps;
}

int op_count() {
  return kOpCount;
}

const OpInfo* op_info(OpCode op) {
  const int32_t n = static_cast<int32_t>(op);
  return n >= 1 && n <= kOpCount ? &kOps[n - 1] : nullptr;
}

const char* op_name(OpCode op) {
  const OpInfo* info = op_info(op);
  return info != nullptr ? info->error_name : "unknown op";
}

const char* family_name(Family f) {
  switch (f) {
    case Family::kGather:
      return "gather";
    case Family::kScatter:
      return "scatter";
    case Family::kIndexDim:
      return "index_dim";
    case Family::kIndexK:
      return "index_k";
  }
  return "unknown family";
}

const char* status_name(Status s) {
  switch (s) {
    case Status::kOk:
      return "ok";
    case Status::kInvalidArgument:
      return "invalid argument";
    case Status::kIndexOutOfRange:
      return "index out of range";
    case Status::kUnsupported:
      return "unsupported";
    case Status::kDeviceError:
      return "device error";
    case Status::kNotCompiled:
      return "not compiled in this build";
  }
  return "unknown status";
}

std::string format_index_error(const ErrorDetail& e) {
  return "index " + std::to_string(e.value) + " is out of bounds for dimension " +
         std::to_string(e.dim) + " with size " + std::to_string(e.hi);
}

const char* dtype_name(DType t) {
  switch (t) {
    case DType::kBool:
      return "bool";
    case DType::kUInt8:
      return "uint8";
    case DType::kInt8:
      return "int8";
    case DType::kInt16:
      return "int16";
    case DType::kUInt16:
      return "uint16";
    case DType::kInt32:
      return "int32";
    case DType::kUInt32:
      return "uint32";
    case DType::kInt64:
      return "int64";
    case DType::kUInt64:
      return "uint64";
    case DType::kFloat16:
      return "float16";
    case DType::kBFloat16:
      return "bfloat16";
    case DType::kFloat32:
      return "float32";
    case DType::kFloat64:
      return "float64";
    case DType::kComplex32:
      return "complex32";
    case DType::kComplex64:
      return "complex64";
    case DType::kComplex128:
      return "complex128";
    case DType::kFloat8E4M3FN:
      return "float8_e4m3fn";
    case DType::kFloat8E5M2:
      return "float8_e5m2";
    case DType::kFloat8E4M3FNUZ:
      return "float8_e4m3fnuz";
    case DType::kFloat8E5M2FNUZ:
      return "float8_e5m2fnuz";
    case DType::kFloat8E8M0FNU:
      return "float8_e8m0fnu";
  }
  return "unknown dtype";
}

}  // namespace stridewise
