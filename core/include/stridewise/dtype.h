// Element types the core understands. Copy-like kernels care only about the element
// size (they are instantiated per size, not per dtype); index operands must be int32
// or int64; accumulating ops (later issues) need the real arithmetic type.
#pragma once

#include <cstdint>

namespace stridewise {

enum class DType : uint8_t {
  kBool,
  kUInt8,
  kInt8,
  kInt16,
  kUInt16,
  kInt32,
  kUInt32,
  kInt64,
  kUInt64,
  kFloat16,
  kBFloat16,
  kFloat32,
  kFloat64,
  kComplex32,  // complex<half>
  kComplex64,
  kComplex128,
  kFloat8E4M3FN,
  kFloat8E5M2,
  kFloat8E4M3FNUZ,
  kFloat8E5M2FNUZ,
  kFloat8E8M0FNU,
};

constexpr int elem_size(DType t) {
  switch (t) {
    case DType::kBool:
    case DType::kUInt8:
    case DType::kInt8:
    case DType::kFloat8E4M3FN:
    case DType::kFloat8E5M2:
    case DType::kFloat8E4M3FNUZ:
    case DType::kFloat8E5M2FNUZ:
    case DType::kFloat8E8M0FNU:
      return 1;
    case DType::kInt16:
    case DType::kUInt16:
    case DType::kFloat16:
    case DType::kBFloat16:
      return 2;
    case DType::kInt32:
    case DType::kUInt32:
    case DType::kFloat32:
    case DType::kComplex32:
      return 4;
    case DType::kInt64:
    case DType::kUInt64:
    case DType::kFloat64:
    case DType::kComplex64:
      return 8;
    case DType::kComplex128:
      return 16;
  }
  return 0;
}

constexpr bool is_index_dtype(DType t) {
  return t == DType::kInt32 || t == DType::kInt64;
}

const char* dtype_name(DType t);

}  // namespace stridewise
