// The one offset calculator every kernel uses (CPU and CUDA).
//
// OffsetCalculator<N, I, D> maps a linear position (row-major over a LoopPlan's dims,
// dim 0 fastest) to N element offsets. I is the offset type: uint32_t for the fast path
// (valid when LoopPlan::fits_int32), int64_t otherwise. D is the most dims it holds; the
// dispatch layer picks the smallest instantiation that fits the plan, so the kernel
// parameter block stays small for the common low-rank case.
//
// IntDivider<uint32_t> replaces division by a loop-invariant divisor with a multiply-high
// and a shift (Granlund & Montgomery); the 64-bit variant uses plain division, which is
// exact and only taken when 32-bit offsets would overflow.
#pragma once

#include <cstdint>

#include "stridewise/layout.h"

#if defined(__CUDACC__)
#define SW_HOST_DEVICE __host__ __device__
#define SW_INLINE __forceinline__
#else
#define SW_HOST_DEVICE
#define SW_INLINE inline
#endif

// `#pragma unroll` on the device pass only: host compilers warn on it (-Wall).
#if defined(__CUDA_ARCH__)
#define SW_UNROLL _Pragma("unroll")
#define SW_NO_UNROLL _Pragma("unroll 1")
#else
#define SW_UNROLL
#define SW_NO_UNROLL
#endif

namespace stridewise {

template <typename I>
struct DivMod {
  I div;
  I mod;
};

template <typename I>
struct IntDivider {
  IntDivider() = default;
  explicit IntDivider(I d) : divisor(d) {}
  SW_HOST_DEVICE SW_INLINE DivMod<I> divmod(I n) const { return {n / divisor, n % divisor}; }
  I divisor = 1;
};

template <>
struct IntDivider<uint32_t> {
  IntDivider() = default;
  // Requires 1 <= d < 2^31 (planner guarantees sizes < 2^31 on the 32-bit path).
  explicit IntDivider(uint32_t d) : divisor(d) {
    for (shift = 0; shift < 32; ++shift)
      if ((1u << shift) >= divisor) break;
    const uint64_t one = 1;
    const uint64_t magic = ((one << 32) * ((one << shift) - divisor)) / divisor + 1;
    m1 = static_cast<uint32_t>(magic);
  }
  SW_HOST_DEVICE SW_INLINE uint32_t div(uint32_t n) const {
#if defined(__CUDA_ARCH__)
    const uint32_t t = __umulhi(n, m1);
#else
    const uint32_t t = static_cast<uint32_t>((static_cast<uint64_t>(n) * m1) >> 32);
#endif
    return (t + n) >> shift;
  }
  SW_HOST_DEVICE SW_INLINE DivMod<uint32_t> divmod(uint32_t n) const {
    const uint32_t q = div(n);
    return {q, n - q * divisor};
  }
  uint32_t divisor = 1;
  uint32_t m1 = 1;
  uint32_t shift = 0;
};

template <int N, typename I>
struct Offsets {
  I v[N];
};

// get() unrolls its dims loop for capacities up to this (every bucket below kMaxRank: the
// launches that matter) and keeps a loop above it. Unrolled, the kMaxRank bucket's 64 steps of
// 64-bit division were most of nvcc's work: 809 of index_k_cuda.cu's 826 s (cicc 346 s, ptxas
// 463 s) on one core, against 46 s looped; the rank-64 kernels then read their dims from the
// parameter block by a runtime index.
constexpr int kUnrolledDims = 25;

template <int N, typename I, int D>
struct OffsetCalculator {
  OffsetCalculator() = default;

  // Planned dims 0..plan.rank-1 are taken fastest first. Caller checks plan.rank <= D.
  template <int NP>
  explicit OffsetCalculator(const LoopPlan<NP>& plan, const int* operands = nullptr) {
    static_assert(N <= NP, "calculator cannot hold more operands than the plan");
    rank = plan.rank;
    for (int d = 0; d < D; ++d) {
      const bool live = d < plan.rank;
      sizes[d] = IntDivider<I>(live ? static_cast<I>(plan.sizes[d]) : I(1));
      for (int k = 0; k < N; ++k) {
        const int src = operands ? operands[k] : k;
        strides[d][k] = live ? static_cast<I>(plan.strides[src][d]) : I(0);
      }
    }
  }

  SW_HOST_DEVICE SW_INLINE Offsets<N, I> get(I linear) const {
    Offsets<N, I> out;
    SW_UNROLL
    for (int k = 0; k < N; ++k) out.v[k] = 0;
    // The two loops' bodies are one; written twice because a shared helper renumbered the
    // unrolled kernels' PTX registers, and the unrolled PTX is kept identical to the original.
    if constexpr (D <= kUnrolledDims) {
      SW_UNROLL
      for (int d = 0; d < D; ++d) {
        if (d == rank) break;
        const DivMod<I> qr = sizes[d].divmod(linear);
        linear = qr.div;
        SW_UNROLL
        for (int k = 0; k < N; ++k) out.v[k] += qr.mod * strides[d][k];
      }
    } else {
      SW_NO_UNROLL
      for (int d = 0; d < rank; ++d) {
        const DivMod<I> qr = sizes[d].divmod(linear);
        linear = qr.div;
        SW_UNROLL
        for (int k = 0; k < N; ++k) out.v[k] += qr.mod * strides[d][k];
      }
    }
    return out;
  }

  int rank = 0;
  IntDivider<I> sizes[D];
  I strides[D][N];
};

}  // namespace stridewise
