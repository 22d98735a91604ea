// The descriptor every indexed op is built from, and the argument checks they share.
//
// An indexed op is "one operand addressed through index values along `dim`". What differs
// between ops is small and is said here, once per op:
//  - role: the indexed operand is read (gather: out[i] = self[.., index[i], ..]) or written
//    (scatter family: out[.., index[i], ..] (+)= src[i]);
//  - combine: how a written value meets the one already there (copy, add, multiply, mean,
//    max, min); every combine but copy accumulates, so duplicate index values add up
//    instead of racing;
//  - include_self: whether out's prior value takes part in an accumulating combine
//    (scatter_reduce's include_self; always true for scatter_add and scatter(reduce=));
//  - wraps: whether a negative index value counts from the end. ATen's index, index_put_,
//    take, put and index_fill take values in [-n, n) and address v + n for v < 0; gather, the
//    scatter family, index_select/add/copy/reduce and embedding take [0, n). The k-index
//    core (index_k.h) wraps, and so does the gather core for a read through one index tensor
//    that the k-index core hands it (GatherArgs::wraps); the scatter cores never wrap.
// The shared parts (planner and LoopPlan, OffsetCalculator, CPU executor, CUDA error
// records, the bound check and its message) take the descriptor, not the op.
#pragma once

#include <cstdint>
#include <string>

#include "stridewise/offset_calc.h"  // SW_HOST_DEVICE
#include "stridewise/status.h"
#include "stridewise/view.h"

namespace stridewise {

// The gather and k-index cores' bound check (CPU and CUDA bodies): true with v moved into
// [0, n) (v + n for a negative v when `wraps`); false, v untouched, when v is outside
// [wraps ? -n : 0, n). (The scatter cores never wrap and keep their own v < 0 || v >= n.)
SW_HOST_DEVICE SW_INLINE bool wrap_index(int64_t& v, int64_t n, bool wraps) {
  if (v >= n || v < (wraps ? -n : 0)) return false;
  if (v < 0) v += n;
  return true;
}

enum class IndexRole : uint8_t { kRead, kWrite };

enum class Combine : uint8_t { kCopy, kAdd, kMul, kMean, kMax, kMin };

struct IndexedOpDesc {
  OpCode op = OpCode::kUnknown;
  IndexRole role = IndexRole::kRead;
  Combine combine = Combine::kCopy;
  bool include_self = true;
  bool wraps = false;

  bool accumulates() const { return combine != Combine::kCopy; }
  // The smallest valid index value for a dim of size n (the largest is n - 1).
  int64_t lowest_index(int64_t n) const { return wraps ? -n : 0; }
};

// "copy", "add", "multiply", "mean", "amax", "amin".
const char* combine_name(Combine c);

// The descriptor of each scatter form.
constexpr IndexedOpDesc scatter_desc(OpCode op, Combine c, bool include_self = true) {
  return IndexedOpDesc{op, IndexRole::kWrite, c, include_self};
}

namespace detail {

// "[2, 3]".
std::string sizes_str(const StridedView& v);

// Fills *err (when non-null) with {s, op, message} and returns s.
Status fail_op(ErrorDetail* err, OpCode op, Status s, const std::string& message);

// One operand on its own: rank in [0, kMaxRank], sizes and strides non-negative, data present
// when it has elements. `fn` prefixes messages ("gather()", "scatter()").
Status check_operand(OpCode op, const char* fn, const char* name, const StridedView& v,
                     ErrorDetail* err);

// True when some dim of size > 1 has stride 0 and the view has more than one element: two
// positions share one address, so writing it would race.
bool has_internal_overlap(const StridedView& v);

// ATen's message for writing into such a view.
const char* internal_overlap_message();

}  // namespace detail
}  // namespace stridewise
