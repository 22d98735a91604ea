// Vectorized block kernels of the metrics fast path (compiled with -fopenmp-simd; x86-64 builds
// carry an AVX2 clone picked at load time). Internal to tools/compare.
#pragma once
#include <cstdint>

namespace swc::simd {

// The fast path of accumulate(): blocks of kBlock elements are reduced by branch-free loops that
// the compiler vectorizes; metrics.cpp redoes a block that holds a NaN or Inf with its scalar
// kernel, and finds the first wrong / first differing element when a block has one.

constexpr uint64_t kBlock = 512;

struct BlockSums {
  double dot = 0, aa = 0, bb = 0, sq = 0, srel = 0, mabs = 0, mrel = 0;
  uint64_t g1 = 0, g5 = 0, wrong = 0, nonfinite = 0;
};

// Sums of a block of finite pairs (nonfinite counts pairs with a NaN or Inf: the caller redoes such
// a block with the scalar kernel).
void finite_block(const double* x, const double* y, uint64_t n, double tiny, double rtol,
                  double atol, BlockSums* out);
void cvt_f32(const float* src, uint64_t n, double* dst);
// Max ULP distance of a block of finite 16-bit floats. The ordinal of a negative float is
// (bits ^ 0x7f..f) + 1, so -0 and +0 are both 0 (fused_f32 does the same for float32).
double max_ulp16(const uint16_t* a, const uint16_t* b, uint64_t n);
// float32 with equal dtypes, the common case: one pass computes the value metrics, the bit
// mismatches and the ULP distance straight from the raw words.
void fused_f32(const uint32_t* ra, const uint32_t* rb, uint64_t n, double tiny, double rtol,
               double atol, BlockSums* out, uint64_t* bits_out, double* ulp_out);

template <class R>
uint64_t count_diff(const R* a, const R* b, uint64_t n) {
  uint64_t c = 0;
#pragma omp simd reduction(+ : c)
  for (uint64_t i = 0; i < n; ++i) c += a[i] != b[i];
  return c;
}

}  // namespace swc::simd
