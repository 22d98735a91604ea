// gather's device-independent half: ATen-identical argument checks, out= handling, views and
// statistics, and the op of the entry template (entry.h) that gather.cpp (CPU) and
// gather_cuda.cpp (CUDA) register over their backend.
#pragma once

#include <ATen/core/Tensor.h>
#include <torch/library.h>

#include <optional>

#include "common.h"
#include "entry.h"
#include "stridewise/gather.h"

namespace stridewise::adapter {

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
// kDone when the index is empty (nothing to compute); otherwise kRun with `call` filled (views,
// wrapped dim, plan) and the layout statistics counted.
Prep gather_prepare(const at::Tensor& self, int64_t dim, const at::Tensor& index, at::Tensor& out,
                    bool out_given, GatherCall* call);

// ATen's structured gather kernel (either device) for a call whose checks passed: where the
// core's kernel declines at run time.
void gather_aten(const at::Tensor& self, int64_t dim, const at::Tensor& index, bool sparse_grad,
                 at::Tensor& out);

// One gather / gather.out call as an op of the entry template; `wrapper` is the name of
// ATen's generated CUDA wrapper, for its device-mismatch messages.
template <class B>
struct GatherOp {
  const char* wrapper;
  const at::Tensor& self;
  int64_t dim;
  const at::Tensor& index;
  bool sparse_grad;
  at::Tensor& out;
  bool out_given;

  bool devices(std::optional<B>& b) {
    b.emplace(wrapper, out_given ? &out : nullptr, self, index, nullptr);
    return true;
  }
  Prep prepare(GatherCall* call) { return gather_prepare(self, dim, index, out, out_given, call); }
  void fallback() { gather_aten(self, dim, index, sparse_grad, out); }
  [[noreturn]] void raise(B& b, const GatherCall& /*call*/, Status st, const ErrorDetail& err) {
    b.raise(OpCode::kGather, st, err);
  }
};

// gather and gather.out on backend B (the kernels of aten::gather and stridewise::gather).
template <class B>
struct GatherOverloads {
  using T = at::Tensor;
  static T& gather_out(const T& self, int64_t dim, const T& index, bool sparse_grad, T& out) {
    GatherOp<B> op{"out_gather_out", self, dim, index, sparse_grad, out, true};
    entry<B, GatherCall>(OpCode::kGather, op);
    return out;
  }
  static T gather(const T& self, int64_t dim, const T& index, bool sparse_grad) {
    T out;
    GatherOp<B> op{"_gather", self, dim, index, sparse_grad, out, false};
    entry<B, GatherCall>(OpCode::kGather, op);
    return out;
  }
  static void install(torch::Library& m) {
    m.impl("gather", TORCH_FN(gather));
    m.impl("gather.out", TORCH_FN(gather_out));
  }
  static int register_all(c10::DispatchKey key, const char* file) {
    return add_override({OpCode::kGather, key, &install, file, __LINE__});
  }
};

}  // namespace stridewise::adapter
