// Advanced indexing's views (index_adv_views.cpp), shared by index and index_put_ on CPU and
// CUDA: ATen's index list as make_info expands it (its checks and wording), the views over the
// result's shape, and the layout ATen's TensorIterator gives a new result.
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <vector>

#include "index_adv.h"

namespace stridewise::adapter {

// ATen's index list after make_info's expansion: one entry per dim of self (undefined: not
// indexed), a mask replaced by its nonzero() columns, and the broadcast shape.
struct Terms {
  std::vector<at::Tensor> per_dim;
  std::vector<int64_t> bshape;
  int k = 0;
};

// The index tensors the core would take, counted before any mask's nonzero(): a mask over m
// dims is m of them.
int count_terms(const OptTensors& indices);

// make_info's checks in its order and wording, and the expansion. A mask's nonzero() costs the
// host synchronization ATen's own indexing pays (its result's size is data-dependent); no other
// synchronization is added.
Terms expand_terms(const at::Tensor& self, const OptTensors& indices);

// `v` seen over `sizes` with `strides` (elements): its data pointer and dtype kept. How every
// operand of the k-index core is restrided onto the iteration shape.
StridedView restrided(StridedView v, const std::vector<int64_t>& sizes,
                      const std::vector<int64_t>& strides);

// Builds self restrided onto the result's shape, each index over it and the terms, and returns
// the result's sizes (more than kMaxRank of them: nothing built). ATen's placement: adjacent
// indexed dims -> the broadcast dims replace them in place; separated -> the broadcast dims
// first, then the other dims in order. `ops` receives the operands' strides as ATen's
// TensorIterator sees them (for iter_out_strides).
std::vector<int64_t> build_views(const at::Tensor& self, const Terms& t, const char* name,
                                 IndexKArgs* a, std::vector<std::vector<int64_t>>* ops);

// The index tensor stats() describes a call by: the first expanded one, else the first
// non-contiguous one, else the first.
const at::Tensor& telling_index(const Terms& t);

// The strides ATen's TensorIterator gives a new output of `shape` over inputs with these
// strides (compute_strides, reorder_dimensions, then the allocation); empty: contiguous.
std::vector<int64_t> iter_out_strides(at::IntArrayRef shape,
                                      const std::vector<std::vector<int64_t>>& ops);

// An input's strides as TensorIterator's compute_strides sees them: 0 along a broadcast dim.
std::vector<int64_t> iter_strides(at::IntArrayRef op_sizes, at::IntArrayRef op_strides,
                                  at::IntArrayRef shape);

}  // namespace stridewise::adapter
