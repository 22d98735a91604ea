// The sorted paths' common front (scatter's segment path, index_k's sorted path and sorted
// fill): the workspace's key/value layout. Host side, no CUDA runtime calls; the radix sort
// over it is radix_sort.cuh.
//
// Layout, every part on a 256-byte boundary: keys[0], keys[1], vals[0], vals[1] (n elements
// of elem_bytes each: CUB's DoubleBuffer pairs), then CUB's temporary storage; a family's own
// parts (scatter's carry) start at `end`.
#pragma once

#include <cstdint>

#include "common/kernel_common.h"  // align256

namespace stridewise {
namespace cuda_common {

struct SortLayout {
  int64_t keys_at[2] = {0, 0};  // bytes from the workspace's start
  int64_t vals_at[2] = {0, 0};
  int64_t temp_at = 0;
  int64_t temp_bytes = 0;  // CUB's temporary bytes, rounded up to 256
  int64_t end = 0;
};

// n pairs of keys and values of elem_bytes each; temp_bytes: CUB's size query (<= 0: none).
inline SortLayout sort_layout(int64_t n, int elem_bytes, int64_t temp_bytes) {
  SortLayout l;
  const int64_t part = align256(n * elem_bytes);
  for (int k = 0; k < 2; ++k) {
    l.keys_at[k] = k * part;
    l.vals_at[k] = (2 + k) * part;
  }
  l.temp_at = 4 * part;
  l.temp_bytes = align256(temp_bytes > 0 ? temp_bytes : 0);
  l.end = l.temp_at + l.temp_bytes;
  return l;
}

}  // namespace cuda_common
}  // namespace stridewise
