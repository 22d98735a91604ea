#include "simd_kernels.h"

#include <cmath>
#include <cstring>
#include <limits>

#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
#define SWC_CLONES __attribute__((target_clones("avx2", "default")))
#else
#define SWC_CLONES
#endif

namespace swc::simd {

SWC_CLONES void finite_block(const double* x, const double* y, uint64_t n, double tiny, double rtol,
                             double atol, BlockSums* out) {
  double dot = 0, aa = 0, bb = 0, sq = 0, srel = 0, mabs = 0, mrel = 0;
  uint64_t g1 = 0, g5 = 0, wr = 0, nf = 0;
  const double big = std::numeric_limits<double>::max();
#pragma omp simd reduction(+ : dot, aa, bb, sq, srel, g1, g5, wr, nf) reduction(max : mabs, mrel)
  for (uint64_t i = 0; i < n; ++i) {
    const double a = x[i], b = y[i], d = b - a, ad = std::fabs(d);
    const double fa = std::fabs(a);
    nf += !(fa <= big) | !(std::fabs(b) <= big);
    const double rel = ad / (fa > tiny ? fa : tiny);
    dot += a * b;
    aa += a * a;
    bb += b * b;
    sq += d * d;
    srel += rel;
    mabs = ad > mabs ? ad : mabs;
    mrel = rel > mrel ? rel : mrel;
    g1 += rel > 1e-3;
    g5 += rel > 5e-3;
    wr += (ad > atol) & (rel > rtol);
  }
  *out = {dot, aa, bb, sq, srel, mabs, mrel, g1, g5, wr, nf};
}

SWC_CLONES void cvt_f32(const float* src, uint64_t n, double* dst) {
#pragma omp simd
  for (uint64_t i = 0; i < n; ++i) dst[i] = src[i];
}
SWC_CLONES double max_ulp16(const uint16_t* a, const uint16_t* b, uint64_t n) {
  double m = 0;
#pragma omp simd reduction(max : m)
  for (uint64_t i = 0; i < n; ++i) {
    const int32_t x = static_cast<int16_t>(a[i]), y = static_cast<int16_t>(b[i]);
    const int32_t nx = x >> 31, ny = y >> 31;
    const int32_t ox = (x ^ (nx & 0x7fff)) - nx, oy = (y ^ (ny & 0x7fff)) - ny;
    const double d = std::fabs(static_cast<double>(ox - oy));
    m = d > m ? d : m;
  }
  return m;
}

SWC_CLONES void fused_f32(const uint32_t* ra, const uint32_t* rb, uint64_t n, double tiny,
                          double rtol, double atol, BlockSums* out, uint64_t* bits_out,
                          double* ulp_out) {
  double dot = 0, aa = 0, bb = 0, sq = 0, srel = 0, mabs = 0, mrel = 0, mulp = 0;
  uint64_t g1 = 0, g5 = 0, wr = 0, nf = 0, bits = 0;
  const double big = std::numeric_limits<double>::max();
#pragma omp simd reduction(+ : dot, aa, bb, sq, srel, g1, g5, wr, nf, bits) \
    reduction(max : mabs, mrel, mulp)
  for (uint64_t i = 0; i < n; ++i) {
    const uint32_t ua = ra[i], ub = rb[i];
    float fa, fb;
    std::memcpy(&fa, &ua, 4);
    std::memcpy(&fb, &ub, 4);
    const double a = fa, b = fb, d = b - a, ad = std::fabs(d), aabs = std::fabs(a);
    nf += !(aabs <= big) | !(std::fabs(b) <= big);
    const double rel = ad / (aabs > tiny ? aabs : tiny);
    dot += a * b;
    aa += a * a;
    bb += b * b;
    sq += d * d;
    srel += rel;
    mabs = ad > mabs ? ad : mabs;
    mrel = rel > mrel ? rel : mrel;
    g1 += rel > 1e-3;
    g5 += rel > 5e-3;
    wr += (ad > atol) & (rel > rtol);
    bits += ua != ub;
    const int32_t x = static_cast<int32_t>(ua), y = static_cast<int32_t>(ub);
    const int32_t nx = x >> 31, ny = y >> 31;
    const int32_t ox = (x ^ (nx & 0x7fffffff)) - nx, oy = (y ^ (ny & 0x7fffffff)) - ny;
    const double u = std::fabs(static_cast<double>(ox) - static_cast<double>(oy));
    mulp = u > mulp ? u : mulp;
  }
  *out = {dot, aa, bb, sq, srel, mabs, mrel, g1, g5, wr, nf};
  *bits_out = bits;
  *ulp_out = mulp;
}

}  // namespace swc::simd
