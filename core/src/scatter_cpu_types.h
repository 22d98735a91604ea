// Element arithmetic for the CPU scatter kernels: per storage type, the accumulation type,
// load/store, and the combines with ATen's semantics. Kernels that only move bytes (copy)
// never come here: they are instantiated per element size.
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>
#include <type_traits>

#include "half_bits.h"
#include "stridewise/dtype.h"
#include "stridewise/indexed_op.h"

namespace stridewise {
namespace scatter_types {

// Storage tags for types whose C++ type would be ambiguous.
struct Bool {
  uint8_t v;
};
struct F16 {
  uint16_t v;
};
struct BF16 {
  uint16_t v;
};
// c10::complex's arithmetic: the plain formula (no C99 Annex G inf/NaN recovery).
template <typename F>
struct Cx {
  F re, im;
};

template <typename T>
struct Arith {  // integers (two's complement wrap, as ATen's) and float/double
  using Acc = T;
  static Acc load(const T& x) { return x; }
  static T store(Acc a) { return a; }
  static Acc add(Acc a, Acc b) {
    if constexpr (std::is_integral_v<T>) {
      using U = std::make_unsigned_t<T>;
      return static_cast<T>(static_cast<U>(static_cast<U>(a) + static_cast<U>(b)));
    } else {
      return a + b;
    }
  }
  static Acc mul(Acc a, Acc b) {
    if constexpr (std::is_integral_v<T>) {
      using U =
          std::conditional_t<(sizeof(T) < sizeof(unsigned)), unsigned, std::make_unsigned_t<T>>;
      return static_cast<T>(static_cast<U>(static_cast<U>(a) * static_cast<U>(b)));
    } else {
      return a * b;
    }
  }
  static bool isnan(Acc a) {
    if constexpr (std::is_floating_point_v<T>) return std::isnan(a);
    return false;
  }
  // Mean: floor division for integers (ATen: div_(count, rounding_mode="floor")).
  static T mean(Acc sum, int64_t n) {
    if constexpr (std::is_integral_v<T>) {
      const int64_t s = static_cast<int64_t>(store(sum));
      int64_t q = s / n;
      if ((s % n != 0) && ((s < 0) != (n < 0))) --q;
      return static_cast<T>(q);
    } else {
      return store(sum / static_cast<Acc>(n));
    }
  }
};

template <>
struct Arith<Bool> {
  using Acc = bool;
  static Acc load(const Bool& x) { return x.v != 0; }
  static Bool store(Acc a) { return Bool{static_cast<uint8_t>(a)}; }
  static Acc add(Acc a, Acc b) { return a || b; }
  static Acc mul(Acc a, Acc b) { return a && b; }
  static bool isnan(Acc) { return false; }
  static Bool mean(Acc a, int64_t) { return store(a); }  // never called: scatter_supports
};

template <typename H, float (*ToF)(uint16_t), uint16_t (*FromF)(float)>
struct HalfArith {
  using Acc = float;  // accumulated in float32, rounded once by store()
  static Acc load(const H& x) { return ToF(x.v); }
  static H store(Acc a) { return H{FromF(a)}; }
  static Acc add(Acc a, Acc b) { return a + b; }
  static Acc mul(Acc a, Acc b) { return a * b; }
  static bool isnan(Acc a) { return std::isnan(a); }
  static H mean(Acc sum, int64_t n) { return store(sum / static_cast<float>(n)); }
};
template <>
struct Arith<F16> : HalfArith<F16, halfbits::f16_to_float, halfbits::float_to_f16> {};
template <>
struct Arith<BF16> : HalfArith<BF16, halfbits::bf16_to_float, halfbits::float_to_bf16> {};

template <typename F>
struct Arith<Cx<F>> {
  using Acc = Cx<F>;
  static Acc load(const Cx<F>& x) { return x; }
  static Cx<F> store(Acc a) { return a; }
  static Acc add(Acc a, Acc b) { return {a.re + b.re, a.im + b.im}; }
  static Acc mul(Acc a, Acc b) { return {a.re * b.re - a.im * b.im, a.re * b.im + a.im * b.re}; }
  static bool isnan(Acc) { return false; }
  static Cx<F> mean(Acc s, int64_t n) {  // c10::complex / complex(n, 0)
    const F d = static_cast<F>(n);
    return {s.re / d, s.im / d};
  }
};

// a := combine(a, b); max/min keep ATen's NaN rule: a NaN from src wins, a NaN in a stays.
template <typename T, Combine C>
inline typename Arith<T>::Acc combine(typename Arith<T>::Acc a, typename Arith<T>::Acc b) {
  using A = Arith<T>;
  if constexpr (C == Combine::kAdd || C == Combine::kMean) {
    return A::add(a, b);
  } else if constexpr (C == Combine::kMul) {
    return A::mul(a, b);
  } else if constexpr (C == Combine::kMax) {
    if constexpr (std::is_same_v<T, Bool>) return a || b;
    if (A::isnan(b)) return b;
    return a < b ? b : a;
  } else if constexpr (C == Combine::kMin) {
    if constexpr (std::is_same_v<T, Bool>) return a && b;
    if (A::isnan(b)) return b;
    return b < a ? b : a;
  } else {
    return b;  // copy
  }
}

// f(Tag<T>{}) for the storage type of dtype t; false when scatter has no arithmetic for it.
template <typename T>
struct Tag {
  using type = T;
};
template <typename F>
bool with_type(DType t, F&& f) {
  switch (t) {
    case DType::kBool:
      f(Tag<Bool>{});
      return true;
    case DType::kUInt8:
      f(Tag<uint8_t>{});
      return true;
    case DType::kInt8:
      f(Tag<int8_t>{});
      return true;
    case DType::kInt16:
      f(Tag<int16_t>{});
      return true;
    case DType::kInt32:
      f(Tag<int32_t>{});
      return true;
    case DType::kInt64:
      f(Tag<int64_t>{});
      return true;
    case DType::kFloat16:
      f(Tag<F16>{});
      return true;
    case DType::kBFloat16:
      f(Tag<BF16>{});
      return true;
    case DType::kFloat32:
      f(Tag<float>{});
      return true;
    case DType::kFloat64:
      f(Tag<double>{});
      return true;
    case DType::kComplex64:
      f(Tag<Cx<float>>{});
      return true;
    case DType::kComplex128:
      f(Tag<Cx<double>>{});
      return true;
    default:
      return false;
  }
}

}  // namespace scatter_types
}  // namespace stridewise
