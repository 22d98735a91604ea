// float16 / bfloat16 <-> float32 on the host, bit-exact with IEEE round-to-nearest-even (what
// c10::Half and c10::BFloat16 do), so CPU accumulation in float32 rounds once at the end.
#pragma once

#include <cstdint>
#include <cstring>

namespace stridewise {
namespace halfbits {

inline float bits_to_float(uint32_t u) {
  float f;
  std::memcpy(&f, &u, sizeof f);
  return f;
}

inline uint32_t float_to_bits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, sizeof u);
  return u;
}

inline float bf16_to_float(uint16_t h) {
  return bits_to_float(static_cast<uint32_t>(h) << 16);
}

inline uint16_t float_to_bf16(float f) {
  const uint32_t u = float_to_bits(f);
  if ((u & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((u >> 16) | 0x0040u);  // NaN
  const uint32_t rounding = 0x7fffu + ((u >> 16) & 1u);
  return static_cast<uint16_t>((u + rounding) >> 16);
}

inline float f16_to_float(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  const uint32_t exp = (h >> 10) & 0x1fu;
  uint32_t man = h & 0x3ffu;
  if (exp == 0x1f) return bits_to_float(sign | 0x7f800000u | (man << 13));  // inf / NaN
  if (exp == 0) {
    if (man == 0) return bits_to_float(sign);
    // Subnormal: value = man * 2^-24, exact in float.
    const float v = static_cast<float>(man) * bits_to_float(0x33800000u);  // 2^-24
    return sign ? -v : v;
  }
  return bits_to_float(sign | ((exp + 112u) << 23) | (man << 13));
}

inline uint16_t float_to_f16(float f) {
  const uint32_t u = float_to_bits(f);
  const uint16_t sign = static_cast<uint16_t>((u >> 16) & 0x8000u);
  const uint32_t a = u & 0x7fffffffu;
  if (a > 0x7f800000u) return static_cast<uint16_t>(sign | 0x7e00u | ((a >> 13) & 0x3ffu));
  if (a >= 0x477ff000u) return static_cast<uint16_t>(sign | 0x7c00u);  // rounds to inf
  if (a < 0x38800000u) {
    // Result is subnormal (or zero): round a * 2^24 to an integer, nearest even. Adding
    // 0.5f (2^-1) in float does exactly that for |x| < 2^-14.
    const float v = bits_to_float(a) + 0.5f;
    return static_cast<uint16_t>(sign | static_cast<uint16_t>(float_to_bits(v) - 0x3f000000u));
  }
  const uint32_t mant_odd = (a >> 13) & 1u;
  const uint32_t r = a + 0xc8000fffu + mant_odd;  // rebias exponent (-112 << 23) and round
  return static_cast<uint16_t>(sign | (r >> 13));
}

}  // namespace halfbits
}  // namespace stridewise
