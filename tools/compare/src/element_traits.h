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
struct F32Traits {
  using raw = uint32_t;
  static constexpr bool is_float = true;
  static double value(raw r) {
    float f;
    std::memcpy(&f, &r, 4);
    return f;
  }
  static uint64_t ulp(raw x, raw y) {
    return udiff(ordinal(static_cast<int32_t>(x)), ordinal(static_cast<int32_t>(y)));
  }
};
struct F64Traits {
  using raw = uint64_t;
  static constexpr bool is_float = true;
  static double value(raw r) {
    double f;
    std::memcpy(&f, &r, 8);
    return f;
  }
  static uint64_t ulp(raw x, raw y) {
    return udiff(ordinal(static_cast<int64_t>(x)), ordinal(static_cast<int64_t>(y)));
  }
};
// Values already converted to double, dtypes differ: no ULP, no bitwise equality.
struct MixedTraits : F64Traits {
  static uint64_t ulp(raw, raw) { return 0; }
};

}  // namespace swc::detail
