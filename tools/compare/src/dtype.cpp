#include "dtype.h"

#include <algorithm>
#include <cctype>
#include <limits>

namespace swc {
namespace {
struct Info {
  DType t;
  size_t size;
  bool is_float;
  const char* name;
  const char* st;
};
constexpr Info kInfo[kNumDTypes] = {
    {DType::Bool, 1, false, "bool", "BOOL"},    {DType::U8, 1, false, "uint8", "U8"},
    {DType::I8, 1, false, "int8", "I8"},        {DType::U16, 2, false, "uint16", "U16"},
    {DType::I16, 2, false, "int16", "I16"},     {DType::U32, 4, false, "uint32", "U32"},
    {DType::I32, 4, false, "int32", "I32"},     {DType::U64, 8, false, "uint64", "U64"},
    {DType::I64, 8, false, "int64", "I64"},     {DType::F16, 2, true, "float16", "F16"},
    {DType::BF16, 2, true, "bfloat16", "BF16"}, {DType::F32, 4, true, "float32", "F32"},
    {DType::F64, 8, true, "float64", "F64"},
};
const Info& info(DType t) {
  return kInfo[static_cast<int>(t)];
}
}  // namespace

size_t dtype_size(DType t) {
  return info(t).size;
}
bool dtype_is_float(DType t) {
  return info(t).is_float;
}
const char* dtype_name(DType t) {
  return info(t).name;
}
const char* dtype_st_code(DType t) {
  return info(t).st;
}

std::optional<DType> dtype_from_st_code(const std::string& code) {
  for (const Info& i : kInfo)
    if (code == i.st) return i.t;
  return std::nullopt;
}

std::optional<DType> dtype_parse(const std::string& raw) {
  std::string s = raw;
  if (s.rfind("torch.", 0) == 0) s = s.substr(6);
  if (auto st = dtype_from_st_code(s)) return st;
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return std::tolower(c); });
  for (const Info& i : kInfo)
    if (s == i.name) return i.t;
  struct Alias {
    const char* a;
    DType t;
  };
  static const Alias aliases[] = {
      {"f16", DType::F16},  {"fp16", DType::F16},   {"half", DType::F16},  {"bf16", DType::BF16},
      {"f32", DType::F32},  {"fp32", DType::F32},   {"float", DType::F32}, {"f64", DType::F64},
      {"fp64", DType::F64}, {"double", DType::F64}, {"long", DType::I64},  {"int", DType::I32},
      {"i8", DType::I8},    {"i16", DType::I16},    {"i32", DType::I32},   {"i64", DType::I64},
      {"u8", DType::U8},    {"u16", DType::U16},    {"u32", DType::U32},   {"u64", DType::U64},
  };
  for (const Alias& al : aliases)
    if (s == al.a) return al.t;
  return std::nullopt;
}

size_t st_code_size(const std::string& code) {
  if (auto t = dtype_from_st_code(code)) return dtype_size(*t);
  if (code.rfind("F8_", 0) == 0) return 1;
  if (code == "C64") return 8;
  if (code == "C128") return 16;
  return 0;
}

double dtype_tiny(DType t) {
  switch (t) {
    case DType::F16:
      return 6.103515625e-05;  // 2^-14
    case DType::BF16:
      return static_cast<double>(std::numeric_limits<float>::min());
    case DType::F32:
      return static_cast<double>(std::numeric_limits<float>::min());
    case DType::F64:
      return std::numeric_limits<double>::min();
    default:
      return 1.0;
  }
}

}  // namespace swc
