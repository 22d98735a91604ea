// Per-tensor error metrics, accumulated chunk by chunk in double precision and merged in a fixed
// order (so results do not depend on the thread count). Definitions: docs/compare.md.
#pragma once
#include <cstdint>
#include <limits>
#include <optional>

#include "dtype.h"

namespace swc {

// An element is wrong when its absolute error exceeds atol AND its relative error exceeds rtol
// (a non-finite mismatch is always wrong).
struct Tolerance {
  double rtol = 0;
  double atol = 0;
};

constexpr uint64_t kNoIndex = std::numeric_limits<uint64_t>::max();

// Mergeable partial sums over a range of elements.
struct Partial {
  uint64_t n = 0;         // elements seen
  uint64_t n_finite = 0;  // pairs where both values are finite
  double dot = 0, aa = 0, bb = 0, sq = 0, sum_rel = 0;
  double max_abs = 0, max_rel = 0;
  uint64_t max_ulp = 0;
  uint64_t rel_gt_1e3 = 0, rel_gt_5e3 = 0;
  uint64_t nan_a = 0, nan_b = 0, inf_a = 0, inf_b = 0;
  uint64_t nonfinite_mismatch = 0;  // one side NaN/Inf and the other not the same NaN/Inf
  uint64_t wrong = 0;               // by the tolerance above
  uint64_t bit_mismatch = 0;  // elements whose bytes differ (only meaningful for equal dtypes)
  uint64_t first_wrong = kNoIndex;  // linear (C-order) index of the first wrong element
  double first_wrong_a = 0, first_wrong_b = 0;
  uint64_t first_bit_mismatch = kNoIndex;
  double first_bit_a = 0, first_bit_b = 0;

  // Appends `o`, which must cover elements after the ones already merged.
  void merge(const Partial& o);
};

// Accumulates n element pairs. a and b hold elements of dtypes ta and tb in host byte order;
// base is the linear index of the first element. When the dtypes differ, values are compared
// after conversion to double, max_ulp stays 0 (undefined) and every element counts as a bit
// mismatch. scratch_a/scratch_b are only used when the dtypes differ (n doubles each).
void accumulate(DType ta, const void* a, DType tb, const void* b, uint64_t n, uint64_t base,
                const Tolerance& tol, Partial* out, double* scratch_a, double* scratch_b);

// Final metrics. NaN marks a value that is undefined (no finite pair).
struct Metrics {
  uint64_t n = 0, n_finite = 0;
  double cosine = 0, max_abs = 0, max_rel = 0, mean_rel = 0, rmse = 0;
  std::optional<uint64_t> max_ulp;  // empty when the dtypes differ
  double frac_rel_gt_1e3 = 0, frac_rel_gt_5e3 = 0;
  uint64_t nan_a = 0, nan_b = 0, inf_a = 0, inf_b = 0, nonfinite_mismatch = 0;
  uint64_t wrong = 0;
  double wrong_fraction = 0;
  uint64_t bit_mismatch = 0;
  uint64_t first_wrong = kNoIndex;
  double first_wrong_a = 0, first_wrong_b = 0;
  uint64_t first_bit_mismatch = kNoIndex;
  double first_bit_a = 0, first_bit_b = 0;
};

Metrics finalize(const Partial& p, bool same_dtype);

// Distance in units in the last place between two values of a float dtype given as raw bits
// (+0 and -0 are 0 apart); |a - b| for integer dtypes. Exposed for tests.
uint64_t ulp_distance(DType t, uint64_t raw_a, uint64_t raw_b);

}  // namespace swc
