// Element arithmetic of the CUDA scatter kernels, host and device compilable (the host
// emulation test runs it too). Per storage type T: Conv<T> (the accumulation type Acc, load
// and store); per accumulation type A: the combines with ATen's semantics (Ops<A>,
// combine()), their identities, mean, and atomic_combine(), which is a real atomic on the
// device and a plain read-modify-write on the host (the emulation runs one thread at a time).
// Copy kernels never come here: they move bytes per element size.
#pragma once

#include <cstdint>
#include <cstring>
#include <limits>
#include <type_traits>

#include "stridewise/indexed_op.h"
#include "stridewise/offset_calc.h"  // SW_HOST_DEVICE, SW_INLINE

namespace stridewise {
namespace cuda_scatter {

// Storage tags for types whose C++ type would be ambiguous (same layout as the dtype).
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
struct alignas(2 * sizeof(F)) Cx {  // c10::complex layout and alignment
  F re, im;
};

template <typename To, typename From>
SW_HOST_DEVICE SW_INLINE To bits_as(const From& f) {
  static_assert(sizeof(To) == sizeof(From), "bits_as: sizes differ");
  To t;
  memcpy(&t, &f, sizeof t);
  return t;
}

// float16 / bfloat16 <-> float32, round-to-nearest-even (bit-exact with half_bits.h, which
// the CPU path uses), the same code on host and device.
SW_HOST_DEVICE SW_INLINE float bf16_to_float(uint16_t h) {
  return bits_as<float>(static_cast<uint32_t>(h) << 16);
}
SW_HOST_DEVICE SW_INLINE uint16_t float_to_bf16(float f) {
  const uint32_t u = bits_as<uint32_t>(f);
  if ((u & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((u >> 16) | 0x0040u);
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
  if (exp == 0x1f) return bits_as<float>(sign | 0x7f800000u | (man << 13));
  if (exp == 0) {
    const float v = static_cast<float>(man) * bits_as<float>(0x33800000u);  // man * 2^-24
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
  if (a >= 0x477ff000u) return static_cast<uint16_t>(sign | 0x7c00u);
  if (a < 0x38800000u) {  // subnormal result: a * 2^24 rounded by a float add of 0.5f
    const float v = bits_as<float>(a) + 0.5f;
    return static_cast<uint16_t>(sign | static_cast<uint16_t>(bits_as<uint32_t>(v) - 0x3f000000u));
  }
  return static_cast<uint16_t>(sign | ((a + 0xc8000fffu + ((a >> 13) & 1u)) >> 13));
#endif
}

// Storage type -> accumulation type.
template <typename T>
struct Conv {
  using Acc = T;
  SW_HOST_DEVICE static SW_INLINE Acc load(const T& x) { return x; }
  SW_HOST_DEVICE static SW_INLINE T store(const Acc& a) { return a; }
};
template <>
struct Conv<F16> {
  using Acc = float;  // rounded once, at the end
  SW_HOST_DEVICE static SW_INLINE Acc load(const F16& x) { return f16_to_float(x.v); }
  SW_HOST_DEVICE static SW_INLINE F16 store(Acc a) { return F16{float_to_f16(a)}; }
};
template <>
struct Conv<BF16> {
  using Acc = float;
  SW_HOST_DEVICE static SW_INLINE Acc load(const BF16& x) { return bf16_to_float(x.v); }
  SW_HOST_DEVICE static SW_INLINE BF16 store(Acc a) { return BF16{float_to_bf16(a)}; }
};

// 1- and 2-byte integers and bool accumulate in int32 (in the workspace): a device has no
// atomics narrower than 32 bits, and emulating one by swapping the 32-bit word around the
// element would read and write bytes outside the tensor at its ends. int32 arithmetic wraps
// mod 2^32, so storing back to the narrow type gives ATen's mod-2^8/2^16 result for add and
// multiply; bool stores "any non-zero", so add/max are or, multiply/min are and.
template <typename T>
struct NarrowConv {
  using Acc = int32_t;
  SW_HOST_DEVICE static SW_INLINE Acc load(const T& x) { return static_cast<Acc>(x); }
  SW_HOST_DEVICE static SW_INLINE T store(Acc a) { return static_cast<T>(a); }
  // ATen's integer mean divides the sum as wrapped in the narrow type.
  SW_HOST_DEVICE static SW_INLINE Acc wrap(Acc a) { return static_cast<Acc>(static_cast<T>(a)); }
};
template <>
struct Conv<int8_t> : NarrowConv<int8_t> {};
template <>
struct Conv<uint8_t> : NarrowConv<uint8_t> {};
template <>
struct Conv<int16_t> : NarrowConv<int16_t> {};
template <>
struct Conv<Bool> {
  using Acc = int32_t;
  SW_HOST_DEVICE static SW_INLINE Acc load(const Bool& x) { return x.v != 0; }
  SW_HOST_DEVICE static SW_INLINE Bool store(Acc a) { return Bool{uint8_t(a != 0)}; }
  SW_HOST_DEVICE static SW_INLINE Acc wrap(Acc a) { return a; }  // never used: no bool mean
};

template <typename T>
using AccOf = typename Conv<T>::Acc;

// The sum a mean divides: wrapped to the storage type where ATen's sum wraps (narrow
// integers), kept wide where ours is more exact on purpose (float16/bfloat16 in float32).
template <typename T>
SW_HOST_DEVICE SW_INLINE AccOf<T> mean_sum(AccOf<T> a) {
  if constexpr (std::is_integral<T>::value && sizeof(T) < sizeof(AccOf<T>))
    return Conv<T>::wrap(a);
  else
    return a;
}

// Arithmetic per accumulation type: integers (wrap-around through unsigned arithmetic, as
// ATen's), float and double. max/min: a NaN from src wins, a NaN already there stays
// (ATen CPU's scatter_reduce amax/amin).
// The unsigned type integer arithmetic wraps in (at least unsigned int: no promotion to int).
template <typename A, bool = std::is_integral<A>::value>
struct Wrap {
  using type = A;
};
template <typename A>
struct Wrap<A, true> {
  using type =
      std::conditional_t<(sizeof(A) < sizeof(unsigned)), unsigned, std::make_unsigned_t<A>>;
};

template <typename A>
struct Ops {
  static constexpr bool kOrdered = true;
  using U = typename Wrap<A>::type;
  SW_HOST_DEVICE static SW_INLINE A add(A a, A b) {
    if constexpr (std::is_integral<A>::value)
      return static_cast<A>(static_cast<U>(static_cast<U>(a) + static_cast<U>(b)));
    else
      return a + b;
  }
  SW_HOST_DEVICE static SW_INLINE A mul(A a, A b) {
    if constexpr (std::is_integral<A>::value)
      return static_cast<A>(static_cast<U>(static_cast<U>(a) * static_cast<U>(b)));
    else
      return a * b;
  }
  SW_HOST_DEVICE static SW_INLINE bool isnan(A a) {
    if constexpr (std::is_floating_point<A>::value)
      return a != a;
    else
      return false;
  }
  SW_HOST_DEVICE static SW_INLINE A max(A a, A b) { return isnan(b) ? b : (a < b ? b : a); }
  SW_HOST_DEVICE static SW_INLINE A min(A a, A b) { return isnan(b) ? b : (b < a ? b : a); }
  SW_HOST_DEVICE static SW_INLINE A identity(Combine c) {
    switch (c) {
      case Combine::kMul:
        return A(1);
      case Combine::kMax:
        return std::numeric_limits<A>::has_infinity ? -std::numeric_limits<A>::infinity()
                                                    : std::numeric_limits<A>::lowest();
      case Combine::kMin:
        return std::numeric_limits<A>::has_infinity ? std::numeric_limits<A>::infinity()
                                                    : std::numeric_limits<A>::max();
      default:
        return A(0);
    }
  }
  // Mean of n >= 1 values summing to s: floor division for integers (ATen's
  // div_(count, rounding_mode="floor")).
  SW_HOST_DEVICE static SW_INLINE A mean(A s, int64_t n) {
    if constexpr (std::is_integral<A>::value) {
      const int64_t x = static_cast<int64_t>(s);
      int64_t q = x / n;
      if (x % n != 0 && x < 0) --q;
      return static_cast<A>(q);
    } else {
      return s / static_cast<A>(n);
    }
  }
};

template <typename F>
struct Ops<Cx<F>> {  // c10::complex's plain formulas; never max/min (scatter_supports)
  static constexpr bool kOrdered = false;
  using A = Cx<F>;
  SW_HOST_DEVICE static SW_INLINE A add(A a, A b) { return A{a.re + b.re, a.im + b.im}; }
  SW_HOST_DEVICE static SW_INLINE A mul(A a, A b) {
    return A{a.re * b.re - a.im * b.im, a.re * b.im + a.im * b.re};
  }
  SW_HOST_DEVICE static SW_INLINE A max(A a, A) { return a; }  // never used
  SW_HOST_DEVICE static SW_INLINE A min(A a, A) { return a; }  // never used
  SW_HOST_DEVICE static SW_INLINE A identity(Combine c) {
    return A{F(c == Combine::kMul ? 1 : 0), F(0)};
  }
  SW_HOST_DEVICE static SW_INLINE A mean(A s, int64_t n) {
    const F d = static_cast<F>(n);
    return A{s.re / d, s.im / d};
  }
};

// combine(c, acc, v): the value acc becomes. The combine is a runtime (uniform) switch.
template <typename A>
SW_HOST_DEVICE SW_INLINE A combine(Combine c, A a, A b) {
  switch (c) {
    case Combine::kAdd:
    case Combine::kMean:
      return Ops<A>::add(a, b);
    case Combine::kMul:
      return Ops<A>::mul(a, b);
    case Combine::kMax:
      return Ops<A>::max(a, b);
    case Combine::kMin:
      return Ops<A>::min(a, b);
    default:
      return b;
  }
}

#if defined(__CUDA_ARCH__)
// *p = f(*p), atomically, by compare-and-swap on the element itself (4 or 8 bytes). Narrower
// types never come here (they accumulate in int32, NarrowConv), so no byte outside the element
// is ever read or written; 16 bytes never come here either: run_scatter sends complex128
// multiply to the lines kernel (no atomics).
template <typename A, typename F>
__device__ SW_INLINE void cas_update(A* p, F f) {
  static_assert(sizeof(A) >= 4, "cas_update: narrow types accumulate in int32 (NarrowConv)");
  if constexpr (sizeof(A) == 4 || sizeof(A) == 8) {
    using W = std::conditional_t<sizeof(A) == 4, unsigned int, unsigned long long>;
    W* w = reinterpret_cast<W*>(p);
    W old = *w, assumed;
    do {
      assumed = old;
      const W nv = bits_as<W>(f(bits_as<A>(assumed)));
      if (nv == assumed) return;
      old = atomicCAS(w, assumed, nv);
    } while (old != assumed);
  } else {
    __trap();  // complex128 multiply: unreachable (the lines kernel takes it)
  }
}

template <typename A>
__device__ SW_INLINE void device_combine(A* p, A v, Combine c) {
  const bool add = c == Combine::kAdd || c == Combine::kMean;
  if constexpr (std::is_same<A, float>::value || std::is_same<A, double>::value) {
    if (add) return (void)atomicAdd(p, v);
  } else if constexpr (std::is_same<A, int32_t>::value) {
    int* q = reinterpret_cast<int*>(p);
    if (add) return (void)atomicAdd(q, v);
    if (c == Combine::kMax) return (void)atomicMax(q, v);
    if (c == Combine::kMin) return (void)atomicMin(q, v);
  } else if constexpr (std::is_same<A, int64_t>::value) {
    if (add)
      return (void)atomicAdd(reinterpret_cast<unsigned long long*>(p),
                             static_cast<unsigned long long>(v));
    long long* q = reinterpret_cast<long long*>(p);
    if (c == Combine::kMax) return (void)atomicMax(q, static_cast<long long>(v));
    if (c == Combine::kMin) return (void)atomicMin(q, static_cast<long long>(v));
  } else if constexpr (std::is_same<A, Cx<float>>::value || std::is_same<A, Cx<double>>::value) {
    if (add) {
      atomicAdd(&p->re, v.re);
      atomicAdd(&p->im, v.im);
      return;
    }
  }
  cas_update(p, [&](A a) { return combine<A>(c, a, v); });
}
#endif

// *p = combine(c, *p, v) with concurrent updaters (device), or plainly (host emulation).
template <typename A>
SW_HOST_DEVICE SW_INLINE void atomic_combine(A* p, A v, Combine c) {
#if defined(__CUDA_ARCH__)
  device_combine(p, v, c);
#else
  *p = combine<A>(c, *p, v);
#endif
}

SW_HOST_DEVICE SW_INLINE void atomic_count(int32_t* p) {
#if defined(__CUDA_ARCH__)
  atomicAdd(reinterpret_cast<int*>(p), 1);
#else
  ++*p;
#endif
}

}  // namespace cuda_scatter
}  // namespace stridewise
