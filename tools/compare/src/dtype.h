// Element types understood by sw-compare, with conversions to double and ULP ordinals.
#pragma once
#include <cstdint>
#include <cstring>
#include <limits>
#include <optional>
#include <string>

namespace swc {

enum class DType : uint8_t { Bool, U8, I8, U16, I16, U32, I32, U64, I64, F16, BF16, F32, F64 };
constexpr int kNumDTypes = 13;

size_t dtype_size(DType t);
bool dtype_is_float(DType t);
// torch-style name: "float32", "bfloat16", "int64", "bool", ...
const char* dtype_name(DType t);
// Safetensors code: "F32", "BF16", "I64", "BOOL", ...
const char* dtype_st_code(DType t);
std::optional<DType> dtype_from_st_code(const std::string& code);
// Accepts torch names ("float32", "torch.float32"), short names ("f32", "fp32", "bf16", "half"),
// and safetensors codes ("F32").
std::optional<DType> dtype_parse(const std::string& name);
// Size in bytes of a safetensors dtype code, including the codes we do not compare
// (F8_*, C64, ...); 0 when the code is unknown.
size_t st_code_size(const std::string& code);
// Smallest positive normal value of a float dtype; 1 for integer and bool types.  Used as the
// floor of the relative-error denominator.
double dtype_tiny(DType t);

inline double half_to_double(uint16_t h) {
  const uint32_t sign = (h >> 15) & 1u, exp = (h >> 10) & 0x1fu, man = h & 0x3ffu;
  double v;
  if (exp == 0) {
    v = static_cast<double>(man) * (1.0 / 16777216.0);  // man * 2^-24
  } else if (exp == 31) {
    v = man ? std::numeric_limits<double>::quiet_NaN() : std::numeric_limits<double>::infinity();
  } else {
    uint64_t bits =
        (static_cast<uint64_t>(exp - 15 + 1023) << 52) | (static_cast<uint64_t>(man) << 42);
    std::memcpy(&v, &bits, sizeof v);
  }
  return sign ? -v : v;
}

inline double bf16_to_double(uint16_t h) {
  const uint32_t bits = static_cast<uint32_t>(h) << 16;
  float f;
  std::memcpy(&f, &bits, sizeof f);
  return static_cast<double>(f);
}

}  // namespace swc
