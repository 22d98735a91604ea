// Per-dtype element traits for the metric kernels: raw storage type, conversion to double, and
// the ULP distance. Internal to tools/compare.
#pragma once
#include <cstdint>
#include <cstring>
#include <limits>
#include <type_traits>

#include "dtype.h"

namespace swc::detail {

// Maps float bits (as a signed integer of the same width) to an integer that is monotonic in the
// float value, with +0 and -0 both at 0.
template <class S>
inline int64_t ordinal(S s) {
  if (s >= 0) return static_cast<int64_t>(s);
  return static_cast<int64_t>(std::numeric_limits<S>::min()) - static_cast<int64_t>(s);
}
inline uint64_t udiff(int64_t x, int64_t y) {
  return x >= y ? static_cast<uint64_t>(x) - static_cast<uint64_t>(y)
                : static_cast<uint64_t>(y) - static_cast<uint64_t>(x);
}

template <class Raw, class Val>
struct IntTraits {
  using raw = Raw;
  static constexpr bool is_float = false;
  static double value(raw r) { return static_cast<double>(static_cast<Val>(r)); }
  static uint64_t ulp(raw x, raw y) {
    const Val a = static_cast<Val>(x), b = static_cast<Val>(y);
    if constexpr (std::is_signed_v<Val>) {
      return udiff(static_cast<int64_t>(a), static_cast<int64_t>(b));
    } else {
      return a >= b ? static_cast<uint64_t>(a - b) : static_cast<uint64_t>(b - a);
    }
  }
};
struct BoolTraits {
  using raw = uint8_t;
  static constexpr bool is_float = false;
  static double value(raw r) { return r ? 1.0 : 0.0; }
  static uint64_t ulp(raw x, raw y) { return (x != 0) != (y != 0); }
};
struct F16Traits {
  using raw = uint16_t;
  static constexpr bool is_float = true;
  static double value(raw r) { return half_to_double(r); }
  static uint64_t ulp(raw x, raw y) {
    return udiff(ordinal(static_cast<int16_t>(x)), ordinal(static_cast<int16_t>(y)));
  }
};
struct BF16Traits : F16Traits {
  static double value(raw r) { return bf16_to_double(r); }
};
// IEEE float / double stored as its bits Raw; Signed is the signed integer of the same width.
template <class Raw, class Float, class Signed>
struct IeeeTraits {
  static_assert(sizeof(Raw) == sizeof(Float) && sizeof(Signed) == sizeof(Float));
  using raw = Raw;
  static constexpr bool is_float = true;
  static double value(raw r) {
    Float f;
    std::memcpy(&f, &r, sizeof(Float));
    return f;
  }
  static uint64_t ulp(raw x, raw y) {
    return udiff(ordinal(static_cast<Signed>(x)), ordinal(static_cast<Signed>(y)));
  }
};
using F32Traits = IeeeTraits<uint32_t, float, int32_t>;
using F64Traits = IeeeTraits<uint64_t, double, int64_t>;
// Values already converted to double, dtypes differ: no ULP, no bitwise equality.
struct MixedTraits : F64Traits {
  static uint64_t ulp(raw, raw) { return 0; }
};

// Calls f(Traits{}) with the element traits of dtype t and returns its result (a value-initialized
// result for a DType outside the enumeration).
template <class F>
auto with_traits(DType t, F&& f) {
  switch (t) {
    case DType::Bool:
      return f(BoolTraits{});
    case DType::U8:
      return f(IntTraits<uint8_t, uint8_t>{});
    case DType::I8:
      return f(IntTraits<uint8_t, int8_t>{});
    case DType::U16:
      return f(IntTraits<uint16_t, uint16_t>{});
    case DType::I16:
      return f(IntTraits<uint16_t, int16_t>{});
    case DType::U32:
      return f(IntTraits<uint32_t, uint32_t>{});
    case DType::I32:
      return f(IntTraits<uint32_t, int32_t>{});
    case DType::U64:
      return f(IntTraits<uint64_t, uint64_t>{});
    case DType::I64:
      return f(IntTraits<uint64_t, int64_t>{});
    case DType::F16:
      return f(F16Traits{});
    case DType::BF16:
      return f(BF16Traits{});
    case DType::F32:
      return f(F32Traits{});
    case DType::F64:
      return f(F64Traits{});
  }
  return decltype(f(BoolTraits{}))();
}

}  // namespace swc::detail
