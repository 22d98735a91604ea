// The operands of an indexed write's bodies (scatter's, the sorted path's), shared so that one
// argument struct serves every family's launch of the sorted path's back half. Host and device
// compilable.
#pragma once

#include "common/elem_arith.h"      // SrcScale, Conv
#include "common/kernel_common.h"   // Value, value_as
#include "stridewise/indexed_op.h"  // Combine

namespace stridewise {
namespace cuda_common {

// What every indexed-write body after validation reads and writes (scatter's bodies, the sorted
// path's): out (for the accumulating bodies: the target, out itself or a workspace's
// accumulator), index, src (unused when has_value) and the value scalar. The bodies' argument
// structs derive from it, so one host line fills it (scatter's operands_of, index_k's seg job).
struct Operands {
  void* out;
  const void* index;
  const void* src;
  bool idx64;
  bool has_value;
  Value value;
  Combine combine;  // the accumulating bodies'
  bool include_self;
  bool has_alpha;  // src scaled by alpha (ScatterArgs::has_alpha)
  Value alpha;
};

// src's scale as the accumulating bodies apply it.
template <typename T>
SW_HOST_DEVICE SW_INLINE arith::SrcScale<T> src_scale(const Operands& o) {
  return {o.has_alpha, arith::Conv<T>::load(value_as<T>(o.alpha))};
}

}  // namespace cuda_common
}  // namespace stridewise
