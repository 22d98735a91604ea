// StridedView: the core's only description of a tensor operand.
//
// Contract:
//  - `data` points at element (0, ..., 0): the storage offset is already applied.
//  - `strides` are in elements, may be 0 (broadcast / expand) and are never negative
//    (PyTorch has no negative strides; the planner relies on this for extents).
//  - `rank` is 0..kMaxRank; a rank-0 view holds one element.
//  - Nothing here owns memory.
#pragma once

#include <cstdint>
#include <initializer_list>

#include "stridewise/dtype.h"

namespace stridewise {

// Highest rank the core accepts. PyTorch CPU tensors have no hard rank limit; ATen's CUDA
// TensorIterator stops at 25 dims after coalescing. 64 covers both with room to spare and
// keeps the largest CUDA kernel parameter block well under the 4 KiB limit.
constexpr int kMaxRank = 64;

struct StridedView {
  void* data = nullptr;
  DType dtype = DType::kFloat32;
  int rank = 0;
  int64_t sizes[kMaxRank] = {};
  int64_t strides[kMaxRank] = {};

  int64_t numel() const {
    int64_t n = 1;
    for (int d = 0; d < rank; ++d) n *= sizes[d];
    return n;
  }
  bool is_contiguous() const {
    int64_t expected = 1;
    for (int d = rank - 1; d >= 0; --d) {
      if (sizes[d] != 1 && strides[d] != expected) return false;
      expected *= sizes[d];
    }
    return true;
  }
  // Largest element offset reachable from `data` (0 for an empty or 0-dim view).
  int64_t max_offset() const {
    int64_t off = 0;
    for (int d = 0; d < rank; ++d) {
      if (sizes[d] == 0) return 0;
      off += (sizes[d] - 1) * strides[d];
    }
    return off;
  }
};

// Convenience for tests and C++ users; sizes and strides must have the same length.
inline StridedView make_view(void* data, DType dtype, std::initializer_list<int64_t> sizes,
                             std::initializer_list<int64_t> strides) {
  StridedView v;
  v.data = data;
  v.dtype = dtype;
  v.rank = static_cast<int>(sizes.size());
  int d = 0;
  for (int64_t s : sizes) v.sizes[d++] = s;
  d = 0;
  for (int64_t s : strides) v.strides[d++] = s;
  return v;
}

}  // namespace stridewise
