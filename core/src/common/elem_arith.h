// The element arithmetic of every accumulating kernel (scatter family, index_put/index_add),
// written once for the CPU kernels and the CUDA kernels (host and device compilable): per
// storage type T, Conv<T> (the accumulation type Acc, load and store); per accumulation type
// A, the combines with ATen's semantics (Ops<A>, combine()), their identities, the mean rule
// (mean_sum, Ops::mean) and the finish rule (finish_acc); and the atomics over them
// (atomic_combine, atomic_count: real atomics on the device, plain read-modify-writes on the
// host, where the emulation tests run one thread at a time). Copy kernels never come here:
// they move bytes per element size.
#pragma once

#include <cmath>
#include <cstdint>
#include <limits>
#include <type_traits>

#include "common/elem_types.h"
#include "stridewise/indexed_op.h"

namespace stridewise {
namespace arith {

using elem::BF16;
using elem::bits_as;
using elem::Bool;
using elem::Cx;
using elem::CxFma;
using elem::F16;

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
  SW_HOST_DEVICE static SW_INLINE Acc load(const F16& x) { return elem::f16_to_float(x.v); }
  SW_HOST_DEVICE static SW_INLINE F16 store(Acc a) { return F16{elem::float_to_f16(a)}; }
};
template <>
struct Conv<BF16> {
  using Acc = float;
  SW_HOST_DEVICE static SW_INLINE Acc load(const BF16& x) { return elem::bf16_to_float(x.v); }
  SW_HOST_DEVICE static SW_INLINE BF16 store(Acc a) { return BF16{elem::float_to_bf16(a)}; }
};

// 1- and 2-byte integers and bool accumulate in int32 (so does the CUDA workspace): a device
// has no atomics narrower than 32 bits, and emulating one by swapping the 32-bit word around
// the element would read and write bytes outside the tensor at its ends. int32 arithmetic wraps
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

// Complex arithmetic (A = Cx<F> or CxFma<F>): c10::complex's formulas, never max/min
// (scatter_supports). The product (scatter.h's ComplexProduct): a is the value already there,
// b the incoming one, as ATen's `*self_data *= *src_data`. kPlain rounds every product: on the
// device through the _rn intrinsics, which nvcc never contracts into an FMA (its default
// --fmad=true would, in a way of its choosing); on the host each product is its own statement
// (-ffp-contract=on contracts only within one). kFma is the fused formula, explicit on both.
template <typename F>
SW_HOST_DEVICE SW_INLINE F mul_rn(F a, F b) {
#if defined(__CUDA_ARCH__)
  if constexpr (std::is_same<F, float>::value)
    return __fmul_rn(a, b);
  else
    return __dmul_rn(a, b);
#else
  return a * b;
#endif
}
template <typename F>
SW_HOST_DEVICE SW_INLINE F add_rn(F a, F b) {
#if defined(__CUDA_ARCH__)
  if constexpr (std::is_same<F, float>::value)
    return __fadd_rn(a, b);
  else
    return __dadd_rn(a, b);
#else
  return a + b;
#endif
}
template <typename F>
SW_HOST_DEVICE SW_INLINE F fma_rn(F a, F b, F c) {
#if defined(__CUDA_ARCH__)
  if constexpr (std::is_same<F, float>::value)
    return __fmaf_rn(a, b, c);
  else
    return __fma_rn(a, b, c);
#else
  return std::fma(a, b, c);
#endif
}

template <typename A, typename F, bool kFused>
struct CxOps {
  static constexpr bool kOrdered = false;
  SW_HOST_DEVICE static SW_INLINE A add(A a, A b) { return A{a.re + b.re, a.im + b.im}; }
  SW_HOST_DEVICE static SW_INLINE A mul(A a, A b) {
    if constexpr (kFused) {
      return A{fma_rn(a.re, b.re, -mul_rn(a.im, b.im)), fma_rn(a.re, b.im, mul_rn(a.im, b.re))};
    } else {
      const F ac = mul_rn(a.re, b.re);
      const F bd = mul_rn(a.im, b.im);
      const F ad = mul_rn(a.re, b.im);
      const F bc = mul_rn(a.im, b.re);
      return A{add_rn(ac, -bd), add_rn(ad, bc)};
    }
  }
  SW_HOST_DEVICE static SW_INLINE A max(A a, A) { return a; }  // never used
  SW_HOST_DEVICE static SW_INLINE A min(A a, A) { return a; }  // never used
  SW_HOST_DEVICE static SW_INLINE A identity(Combine c) {
    return A{F(c == Combine::kMul ? 1 : 0), F(0)};
  }
  // ATen's mean: div_(count) with count n + 0i, in c10::complex's division (rat = 0 / n,
  // scl = 1 / (n + 0 * rat)): ((re + im * rat) * scl, (im - re * rat) * scl). Not re / n: the
  // reciprocal rounds first, and a zero times an infinite or NaN part is NaN (n = 1 too).
  SW_HOST_DEVICE static SW_INLINE A mean(A s, int64_t n) {
    const F c = static_cast<F>(n);
    const F rat = F(0) / c;
    const F scl = F(1) / add_rn(c, mul_rn(F(0), rat));
    return A{mul_rn(add_rn(s.re, mul_rn(s.im, rat)), scl),
             mul_rn(add_rn(s.im, -mul_rn(s.re, rat)), scl)};
  }
};
template <typename F>
struct Ops<Cx<F>> : CxOps<Cx<F>, F, false> {};
template <typename F>
struct Ops<CxFma<F>> : CxOps<CxFma<F>, F, true> {};

// The storage type a multiply of T runs on: CxFma<F> for a complex T with the fused product.
template <typename T>
struct FusedOf {
  using type = T;
};
template <typename F>
struct FusedOf<Cx<F>> {
  using type = CxFma<F>;
};

// Whether T is complex (either product).
template <typename T>
struct IsCx : std::false_type {};
template <typename F>
struct IsCx<Cx<F>> : std::true_type {};
template <typename F>
struct IsCx<CxFma<F>> : std::true_type {};

// How src's values enter a combine: as they are, or scaled by the op's alpha
// (ScatterArgs::has_alpha, index_add's) in the accumulation type, alpha * src.
template <typename T>
struct SrcScale {
  bool on = false;
  AccOf<T> alpha{};
  SW_HOST_DEVICE SW_INLINE AccOf<T> operator()(AccOf<T> x) const {
    return on ? Ops<AccOf<T>>::mul(alpha, x) : x;
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

// A finished accumulator r over `count` values (self not counted): false when out keeps its
// value (include_self = false and nothing arrived, or a mean over nothing); else true with r
// the value to store (mean: divided by count, plus one with self).
template <typename T>
SW_HOST_DEVICE SW_INLINE bool finish_acc(Combine c, bool include_self, int64_t count, AccOf<T>* r) {
  if (c == Combine::kMean) {
    const int64_t d = count + (include_self ? 1 : 0);
    if (d == 0) return false;
    *r = Ops<AccOf<T>>::mean(mean_sum<T>(*r), d);
    return true;
  }
  return include_self || count > 0;
}

// ---- atomics ------------------------------------------------------------------------

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

}  // namespace arith
}  // namespace stridewise
