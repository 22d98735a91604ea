// Element types of the indexed ops, written once for the CPU and the CUDA kernels (host and
// device compilable, no CUDA runtime calls): Tag, the storage tags of dtypes whose C++ type
// would be ambiguous, float16 / bfloat16 <-> float32 conversions and with_type (dtype ->
// storage type). Copy kernels never need these: they move bytes per element size.
#pragma once

#include <cstdint>
#include <cstring>

#include "stridewise/dtype.h"
#include "stridewise/offset_calc.h"  // SW_HOST_DEVICE, SW_INLINE
#include "stridewise/status.h"

namespace stridewise {
namespace elem {

template <typename T>
struct Tag {
  using type = T;
};

// Storage tags (same size and layout as the dtype's elements).
struct Bool {
  uint8_t v;
};
struct F16 {
  uint16_t v;
};
struct BF16 {
  uint16_t v;
};
template <typename F>
struct alignas(2 * sizeof(F)) Cx {  // c10::complex's layout and alignment
  F re, im;
};
// The same storage, multiplied with the fused formula (scatter.h's ComplexProduct::kFma).
template <typename F>
struct alignas(2 * sizeof(F)) CxFma {
  F re, im;
};

template <typename To, typename From>
SW_HOST_DEVICE SW_INLINE To bits_as(const From& f) {
  static_assert(sizeof(To) == sizeof(From), "bits_as: sizes differ");
  To t;
  memcpy(&t, &f, sizeof t);
  return t;
}

// float16 / bfloat16 <-> float32 with IEEE round-to-nearest-even (what c10::Half and
// c10::BFloat16 do), the same results on the host and the device; the device takes the
// conversion instructions where they give the same bits (test_half_conversions.cu checks
// every float16 and every rounding boundary, device against host).
SW_HOST_DEVICE SW_INLINE float bf16_to_float(uint16_t h) {
  return bits_as<float>(static_cast<uint32_t>(h) << 16);
}
SW_HOST_DEVICE SW_INLINE uint16_t float_to_bf16(float f) {
  const uint32_t u = bits_as<uint32_t>(f);
  if ((u & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((u >> 16) | 0x0040u);  // NaN
  return static_cast<uint16_t>((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
}
SW_HOST_DEVICE SW_INLINE float f16_to_float(uint16_t h) {
#if defined(__CUDA_ARCH__)
  // The conversion instruction: the bit manipulation below cost the float16 kernels about a
  // third of their time against bfloat16's (H200, 2026-12-01). It is exact for every value
  // but NaN, whose payload it need not keep: NaNs take the portable path.
  if ((h & 0x7fffu) <= 0x7c00u) {
    float f;
    asm("cvt.f32.f16 %0, %1;" : "=f"(f) : "h"(h));
    return f;
  }
#endif
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  const uint32_t exp = (h >> 10) & 0x1fu;
  const uint32_t man = h & 0x3ffu;
  if (exp == 0x1f) return bits_as<float>(sign | 0x7f800000u | (man << 13));  // inf / NaN
  if (exp == 0) {  // zero or subnormal: man * 2^-24, exact in float
    const float v = static_cast<float>(man) * bits_as<float>(0x33800000u);
    return sign ? -v : v;
  }
  return bits_as<float>(sign | ((exp + 112u) << 23) | (man << 13));
}
SW_HOST_DEVICE SW_INLINE uint16_t float_to_f16(float f) {
  const uint32_t u = bits_as<uint32_t>(f);
  const uint16_t sign = static_cast<uint16_t>((u >> 16) & 0x8000u);
  const uint32_t a = u & 0x7fffffffu;
  if (a > 0x7f800000u) return static_cast<uint16_t>(sign | 0x7e00u | ((a >> 13) & 0x3ffu));
#if defined(__CUDA_ARCH__)
  // Not NaN: the instruction rounds to nearest even, overflow and subnormals included, as
  // the host code does.
  uint16_t r;
  asm("cvt.rn.f16.f32 %0, %1;" : "=h"(r) : "f"(f));
  return r;
#else
  if (a >= 0x477ff000u) return static_cast<uint16_t>(sign | 0x7c00u);  // rounds to inf
  if (a < 0x38800000u) {
    // The result is subnormal (or zero): a * 2^24 rounded to an integer, nearest even; a float
    // add of 0.5f (2^-1) does exactly that for |x| < 2^-14.
    const float v = bits_as<float>(a) + 0.5f;
    return static_cast<uint16_t>(sign | static_cast<uint16_t>(bits_as<uint32_t>(v) - 0x3f000000u));
  }
  // Rebias the exponent (-112 << 23) and round to nearest even.
  return static_cast<uint16_t>(sign | ((a + 0xc8000fffu + ((a >> 13) & 1u)) >> 13));
#endif
}

// f(Tag<T>{}) for the storage type of the dtypes the accumulating kernels take; kUnsupported
// for the others (their copies go through the per-size kernels).
template <typename F>
Status with_type(DType t, F&& f) {
  switch (t) {
    case DType::kBool:
      return f(Tag<Bool>{});
    case DType::kUInt8:
      return f(Tag<uint8_t>{});
    case DType::kInt8:
      return f(Tag<int8_t>{});
    case DType::kInt16:
      return f(Tag<int16_t>{});
    case DType::kInt32:
      return f(Tag<int32_t>{});
    case DType::kInt64:
      return f(Tag<int64_t>{});
    case DType::kFloat16:
      return f(Tag<F16>{});
    case DType::kBFloat16:
      return f(Tag<BF16>{});
    case DType::kFloat32:
      return f(Tag<float>{});
    case DType::kFloat64:
      return f(Tag<double>{});
    case DType::kComplex64:
      return f(Tag<Cx<float>>{});
    case DType::kComplex128:
      return f(Tag<Cx<double>>{});
    default:
      return Status::kUnsupported;
  }
}

}  // namespace elem
}  // namespace stridewise
