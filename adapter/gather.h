// gather's device-independent half: ATen-identical argument checks, out= handling, views and
// statistics. gather.cpp (CPU) and gather_cuda.cpp (CUDA) call gather_prepare() and then their
// core entry point.
#pragma once

#include <ATen/core/Tensor.h>

#include "common.h"
#include "stridewise/gather.h"

namespace stridewise::adapter {

OpStats& gather_stats();

// The plan is made once per call, by gather_prepare from `args`, and handed as-is to the
// plan-taking core entry points (gather.h), which do not plan or validate again.
struct GatherCall {
  GatherArgs args;
  GatherPlan plan;
};

// Checks arguments with ATen's rules, order, exception types and wording (torch 2.13):
//   dim wrap (IndexError) -> [out=: dtype, device, resize_output (with ATen's deprecation
//   warning for a non-empty out of another shape), internal overlap, overlap with self,
//   partial overlap with index] -> index dtype (non-empty index only) -> empty index returns
//   -> shape check.
// `out` is the out= tensor when `out_given`, otherwise it receives a new contiguous result.
// Returns false when the index is empty (nothing to compute); otherwise fills `call` (views,
// wrapped dim, plan) and counts the layout statistics.
bool gather_prepare(const at::Tensor& self, int64_t dim, const at::Tensor& index, at::Tensor& out,
                    bool out_given, GatherCall* call);

}  // namespace stridewise::adapter
