// The CUDA scatter's atomics over the shared element arithmetic (scatter_arith.h):
// atomic_combine() is a real atomic on the device and a plain read-modify-write on the host
// (the emulation test runs one thread at a time); atomic_count() likewise.
#pragma once

#include <cstdint>
#include <type_traits>

#include "scatter_arith.h"

namespace stridewise {
namespace cuda_scatter {

using namespace elem;           // NOLINT: the storage tags and conversions
using namespace scatter_arith;  // NOLINT: Conv, Ops, combine, finish_acc

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
