#include "metrics.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <type_traits>

#include "element_traits.h"
#include "simd_kernels.h"

namespace swc {

void Partial::merge(const Partial& o) {
  if (first_wrong == kNoIndex && o.first_wrong != kNoIndex) {
    first_wrong = o.first_wrong;
    first_wrong_a = o.first_wrong_a;
    first_wrong_b = o.first_wrong_b;
  }
  if (first_bit_mismatch == kNoIndex && o.first_bit_mismatch != kNoIndex) {
    first_bit_mismatch = o.first_bit_mismatch;
    first_bit_a = o.first_bit_a;
    first_bit_b = o.first_bit_b;
  }
  n += o.n;
  n_finite += o.n_finite;
  dot += o.dot;
  aa += o.aa;
  bb += o.bb;
  sq += o.sq;
  sum_rel += o.sum_rel;
  max_abs = std::max(max_abs, o.max_abs);
  max_rel = std::max(max_rel, o.max_rel);
  max_ulp = std::max(max_ulp, o.max_ulp);
  rel_gt_1e3 += o.rel_gt_1e3;
  rel_gt_5e3 += o.rel_gt_5e3;
  nan_a += o.nan_a;
  nan_b += o.nan_b;
  inf_a += o.inf_a;
  inf_b += o.inf_b;
  nonfinite_mismatch += o.nonfinite_mismatch;
  wrong += o.wrong;
  bit_mismatch += o.bit_mismatch;
}

namespace {

using namespace detail;  // NOLINT
using namespace simd;    // NOLINT

// Handles a pair where at least one value is NaN or Inf.
inline void nonfinite(double x, double y, uint64_t idx, Partial& p) {
  const bool na = std::isnan(x), nb = std::isnan(y), ia = std::isinf(x), ib = std::isinf(y);
  p.nan_a += na;
  p.nan_b += nb;
  p.inf_a += ia;
  p.inf_b += ib;
  const bool same = (na && nb) || (ia && ib && x == y);
  if (!same) {
    ++p.nonfinite_mismatch;
    if (p.wrong++ == 0) {
      p.first_wrong = idx;
      p.first_wrong_a = x;
      p.first_wrong_b = y;
    }
  }
}

template <class Tr>
void kernel(const typename Tr::raw* a, const typename Tr::raw* b, uint64_t n, uint64_t base,
            double tiny, const Tolerance& tol, bool count_bits, Partial& p) {
  double dot = 0, aa = 0, bb = 0, sq = 0, sum_rel = 0, max_abs = 0, max_rel = 0;
  uint64_t max_ulp = 0, gt1 = 0, gt5 = 0, bits = 0, wrong = p.wrong, finite = 0;
  uint64_t first_bit = kNoIndex;
  double first_bit_a = 0, first_bit_b = 0;
  const double rtol = tol.rtol, atol = tol.atol;
  for (uint64_t i = 0; i < n; ++i) {
    const typename Tr::raw ra = a[i], rb = b[i];
    if (ra != rb) {
      if (bits++ == 0) {
        first_bit = base + i;
        first_bit_a = Tr::value(ra);
        first_bit_b = Tr::value(rb);
      }
    }
    const double x = Tr::value(ra), y = Tr::value(rb);
    if constexpr (Tr::is_float) {
      if (!(std::isfinite(x) && std::isfinite(y))) {
        p.wrong = wrong;  // keep first-wrong bookkeeping consistent
        nonfinite(x, y, base + i, p);
        wrong = p.wrong;
        continue;
      }
    }
    ++finite;
    const double d = y - x;
    const double ad = std::fabs(d);
    const double rel = ad / std::max(std::fabs(x), tiny);
    dot += x * y;
    aa += x * x;
    bb += y * y;
    sq += d * d;
    sum_rel += rel;
    max_abs = ad > max_abs ? ad : max_abs;
    max_rel = rel > max_rel ? rel : max_rel;
    gt1 += rel > 1e-3;
    gt5 += rel > 5e-3;
    if (ad > atol && rel > rtol) {
      if (wrong++ == 0) {
        p.first_wrong = base + i;
        p.first_wrong_a = x;
        p.first_wrong_b = y;
      }
    }
    const uint64_t u = Tr::ulp(ra, rb);
    max_ulp = u > max_ulp ? u : max_ulp;
  }
  p.n += n;
  p.n_finite += finite;
  p.dot += dot;
  p.aa += aa;
  p.bb += bb;
  p.sq += sq;
  p.sum_rel += sum_rel;
  p.max_abs = std::max(p.max_abs, max_abs);
  p.max_rel = std::max(p.max_rel, max_rel);
  p.max_ulp = std::max(p.max_ulp, max_ulp);
  p.rel_gt_1e3 += gt1;
  p.rel_gt_5e3 += gt5;
  p.wrong = wrong;
  if (!count_bits) {  // different dtypes: never bitwise equal
    bits = n;
    first_bit = n ? base : kNoIndex;
    if (n) {
      first_bit_a = Tr::value(a[0]);
      first_bit_b = Tr::value(b[0]);
    }
  }
  p.bit_mismatch += bits;
  if (p.first_bit_mismatch == kNoIndex && first_bit != kNoIndex) {
    p.first_bit_mismatch = first_bit;
    p.first_bit_a = first_bit_a;
    p.first_bit_b = first_bit_b;
  }
}

template <class Tr>
void to_block(const typename Tr::raw* src, uint64_t n, double* dst) {
  for (uint64_t i = 0; i < n; ++i) dst[i] = Tr::value(src[i]);
}
template <>
void to_block<F64Traits>(const uint64_t* src, uint64_t n, double* dst) {
  std::memcpy(dst, src, n * 8);
}
template <>
void to_block<MixedTraits>(const uint64_t* src, uint64_t n, double* dst) {
  std::memcpy(dst, src, n * 8);
}
template <>
void to_block<BF16Traits>(const uint16_t* src, uint64_t n, double* dst) {
  // bf16 is the high half of an f32: widen bitwise per element (memcpy is the defined way
  // to reinterpret; per element so no compiler sees a partially initialised array).
  float tmp[kBlock];
  for (uint64_t i = 0; i < n; ++i) {
    const uint32_t bits = static_cast<uint32_t>(src[i]) << 16;
    std::memcpy(&tmp[i], &bits, 4);
  }
  cvt_f32(tmp, n, dst);
}

template <class Tr>
uint64_t block_max_ulp(const typename Tr::raw* a, const typename Tr::raw* b, uint64_t n) {
  if constexpr (Tr::is_float && sizeof(typename Tr::raw) == 2) {
    return static_cast<uint64_t>(max_ulp16(a, b, n));
  } else {
    uint64_t m = 0;
    for (uint64_t i = 0; i < n; ++i) {
      const uint64_t u = Tr::ulp(a[i], b[i]);
      m = u > m ? u : m;
    }
    return m;
  }
}

template <class Tr>
void blocked(const typename Tr::raw* a, const typename Tr::raw* b, uint64_t n, uint64_t base,
             double tiny, const Tolerance& tol, bool same, Partial& p) {
  alignas(64) double xa[kBlock], xb[kBlock];
  for (uint64_t s = 0; s < n; s += kBlock) {
    const uint64_t m = std::min(kBlock, n - s);
    BlockSums bs;
    uint64_t bits = 0, ulp = 0;
    if constexpr (std::is_same_v<Tr, F32Traits>) {
      double u = 0;
      fused_f32(a + s, b + s, m, tiny, tol.rtol, tol.atol, &bs, &bits, &u);
      ulp = static_cast<uint64_t>(u);
    } else {
      to_block<Tr>(a + s, m, xa);
      to_block<Tr>(b + s, m, xb);
      finite_block(xa, xb, m, tiny, tol.rtol, tol.atol, &bs);
      if (!bs.nonfinite) {
        bits = same ? count_diff(a + s, b + s, m) : m;
        if (same) ulp = block_max_ulp<Tr>(a + s, b + s, m);
      }
    }
    if (bs.nonfinite) {  // NaN/Inf in this block: redo it with the scalar kernel
      kernel<Tr>(a + s, b + s, m, base + s, tiny, tol, same, p);
      continue;
    }
    if (bs.wrong && p.first_wrong == kNoIndex) {
      for (uint64_t i = 0; i < m; ++i) {
        const double x = Tr::value(a[s + i]), y = Tr::value(b[s + i]);
        const double ad = std::fabs(y - x);
        if (ad > tol.atol && ad / std::max(std::fabs(x), tiny) > tol.rtol) {
          p.first_wrong = base + s + i;
          p.first_wrong_a = x;
          p.first_wrong_b = y;
          break;
        }
      }
    }
    p.n += m;
    p.n_finite += m;
    p.dot += bs.dot;
    p.aa += bs.aa;
    p.bb += bs.bb;
    p.sq += bs.sq;
    p.sum_rel += bs.srel;
    p.max_abs = std::max(p.max_abs, bs.mabs);
    p.max_rel = std::max(p.max_rel, bs.mrel);
    p.rel_gt_1e3 += bs.g1;
    p.rel_gt_5e3 += bs.g5;
    p.wrong += bs.wrong;
    p.max_ulp = std::max(p.max_ulp, ulp);
    if (bits && p.first_bit_mismatch == kNoIndex) {
      for (uint64_t i = 0; i < m; ++i)
        if (!same || a[s + i] != b[s + i]) {
          p.first_bit_mismatch = base + s + i;
          p.first_bit_a = Tr::value(a[s + i]);
          p.first_bit_b = Tr::value(b[s + i]);
          break;
        }
    }
    p.bit_mismatch += bits;
  }
}

template <class Tr>
void run_same(const void* a, const void* b, uint64_t n, uint64_t base, double tiny,
              const Tolerance& tol, Partial* out) {
  blocked<Tr>(static_cast<const typename Tr::raw*>(a), static_cast<const typename Tr::raw*>(b), n,
              base, tiny, tol, true, *out);
}

template <class Tr>
void conv(const void* src, uint64_t n, double* dst) {
  const auto* s = static_cast<const typename Tr::raw*>(src);
  for (uint64_t i = 0; i < n; ++i) dst[i] = Tr::value(s[i]);
}

void to_double(DType t, const void* src, uint64_t n, double* dst) {
  with_traits(t, [&](auto tr) { conv<decltype(tr)>(src, n, dst); });
}

}  // namespace

void accumulate(DType ta, const void* a, DType tb, const void* b, uint64_t n, uint64_t base,
                const Tolerance& tol, Partial* out, double* scratch_a, double* scratch_b) {
  const double tiny = dtype_tiny(ta);
  if (ta != tb) {
    to_double(ta, a, n, scratch_a);
    to_double(tb, b, n, scratch_b);
    blocked<MixedTraits>(reinterpret_cast<const uint64_t*>(scratch_a),
                         reinterpret_cast<const uint64_t*>(scratch_b), n, base, tiny, tol, false,
                         *out);
    return;
  }
  with_traits(ta, [&](auto tr) { run_same<decltype(tr)>(a, b, n, base, tiny, tol, out); });
}

uint64_t ulp_distance(DType t, uint64_t x, uint64_t y) {
  return with_traits(t, [&](auto tr) -> uint64_t {
    using Tr = decltype(tr);
    return Tr::ulp(static_cast<typename Tr::raw>(x), static_cast<typename Tr::raw>(y));
  });
}

Metrics finalize(const Partial& p, bool same_dtype) {
  Metrics m;
  const double nan = std::numeric_limits<double>::quiet_NaN();
  m.n = p.n;
  m.n_finite = p.n_finite;
  if (p.n_finite == 0) {
    m.cosine = m.mean_rel = m.rmse = nan;
    m.max_abs = m.max_rel = nan;
    m.frac_rel_gt_1e3 = m.frac_rel_gt_5e3 = nan;
  } else {
    if (p.aa == 0 && p.bb == 0) {
      m.cosine = 1.0;
    } else if (p.aa == 0 || p.bb == 0) {
      m.cosine = 0.0;
    } else {
      m.cosine = p.dot / (std::sqrt(p.aa) * std::sqrt(p.bb));
    }
    const double nf = static_cast<double>(p.n_finite);
    m.max_abs = p.max_abs;
    m.max_rel = p.max_rel;
    m.mean_rel = p.sum_rel / nf;
    m.rmse = std::sqrt(p.sq / nf);
    m.frac_rel_gt_1e3 = static_cast<double>(p.rel_gt_1e3) / nf;
    m.frac_rel_gt_5e3 = static_cast<double>(p.rel_gt_5e3) / nf;
  }
  if (same_dtype) m.max_ulp = p.max_ulp;
  m.nan_a = p.nan_a;
  m.nan_b = p.nan_b;
  m.inf_a = p.inf_a;
  m.inf_b = p.inf_b;
  m.nonfinite_mismatch = p.nonfinite_mismatch;
  m.wrong = p.wrong;
  m.wrong_fraction = p.n ? static_cast<double>(p.wrong) / static_cast<double>(p.n) : 0.0;
  m.bit_mismatch = p.bit_mismatch;
  m.first_wrong = p.first_wrong;
  m.first_wrong_a = p.first_wrong_a;
  m.first_wrong_b = p.first_wrong_b;
  m.first_bit_mismatch = p.first_bit_mismatch;
  m.first_bit_a = p.first_bit_a;
  m.first_bit_b = p.first_bit_b;
  return m;
}

}  // namespace swc
