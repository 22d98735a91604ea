// The scatter family's device-independent half: ATen-identical argument checks, out= and
// in-place handling, views, the value scalar, statistics and the hand-over to ATen's own kernel
// where the core has none. scatter.cpp (CPU) and scatter_cuda.cpp (CUDA) instantiate
// ScatterOverloads<Backend> below and register it for the three switchable ops:
//   "scatter"        aten::scatter.{src,value,reduce,value_reduce}, scatter_.*, scatter.*_out
//   "scatter_add"    aten::scatter_add, scatter_add_, scatter_add.out
//   "scatter_reduce" aten::scatter_reduce.two, scatter_reduce_.two, scatter_reduce.two_out
// Only the CPU/CUDA kernels are replaced: ATen's autograd formulas stay.
#pragma once

#include <ATen/core/Tensor.h>
#include <c10/core/Scalar.h>
#include <torch/library.h>

#include <optional>
#include <string_view>

#include "common.h"
#include "entry.h"
#include "stridewise/scatter.h"

namespace stridewise::adapter {

enum class ScatterForm : uint8_t { kFunctional, kInPlace, kOut };

// One aten:: call of the family, as the overload received it.
struct ScatterRequest {
  OpCode op = OpCode::kScatter;            // kScatter, kScatterAdd or kScatterReduce
  const at::Tensor* src = nullptr;         // null for the value overloads
  const c10::Scalar* value = nullptr;      // set for the value overloads
  std::optional<std::string_view> reduce;  // scatter(reduce=) and scatter_reduce
  bool include_self = true;                // scatter_reduce only
};

// The plan is made once per call by scatter_prepare and handed to the plan-taking core entry
// points as-is.
struct ScatterCall {
  ScatterArgs args;
  ScatterPlan plan;
};

// Checks arguments with ATen's rules, order, exception types and wording (torch 2.13; the
// structured meta function scatter_meta_impl, its out=/in-place wrappers, then the impl):
//   [scatter.reduce: deprecation warning] -> dim wrap (IndexError) -> index/src dtype ->
//   shape -> [out= / in place: internal overlap, overlap with index, overlap with src] ->
//   [out=: dtype, device, resize_output] -> reduce string -> [out= : partial overlap with self
//   (what copy_ checks)] -> ATen's kernel when the core has none for this dtype/combine (counted
//   as "fallback") -> empty index (out = self's copy) -> views, value scalar, plan.
// In place, `out` must be `self`; functional, `out` receives a new contiguous tensor of self's
// sizes. kRun: the core is to run `call`; kDone: the call is complete (an empty index, or handed
// to ATen under a rule, counted); kFallback: the core's plan declined (counted), ATen is to run it.
Prep scatter_prepare(const at::Tensor& self, int64_t dim, const at::Tensor& index,
                     const ScatterRequest& req, ScatterForm form, at::Tensor& out,
                     ScatterCall* call);

// Runs ATen's own kernel (the structured impl: copy, include_self init, stub, mean division)
// for a call whose checks passed (counted by the caller), so the user gets ATen's result or
// ATen's exact NotImplementedError where the core has no kernel.
void scatter_aten(const at::Tensor& self, int64_t dim, const at::Tensor& index,
                  const ScatterRequest& req, const at::Tensor& out);

// The complex product ATen's CPU scatter kernels compute for `st` (ComplexFloat or
// ComplexDouble), asked of ATen's kernel once per dtype (complex_product.cpp).
enum class ProductKind : int { kPlain = 0, kFma = 1, kUnknown = 2 };
ProductKind aten_cpu_complex_product(c10::ScalarType st);

// One aten:: call of the family as an op of the entry template (entry.h).
template <class B>
struct ScatterOp {
  const char* wrapper;  // ATen's generated CUDA wrapper's name, for device-mismatch messages
  const at::Tensor& self;
  int64_t dim;
  const at::Tensor& index;
  const ScatterRequest& req;
  ScatterForm form;
  at::Tensor& out;

  bool devices(std::optional<B>& b) {
    b.emplace(wrapper, form == ScatterForm::kOut ? &out : nullptr, self, index, req.src);
    return true;
  }
  Prep prepare(ScatterCall* call) {
    return scatter_prepare(self, dim, index, req, form, out, call);
  }
  void fallback() { scatter_aten(self, dim, index, req, out); }
  [[noreturn]] void raise(B& b, const ScatterCall& /*call*/, Status st, const ErrorDetail& err) {
    b.raise(req.op, st, err);
  }
};

// Every aten:: overload of the family for one backend. The wrapper names are those of ATen's
// generated CUDA wrappers, so device-mismatch messages match.
template <class B>
struct ScatterOverloads {
  using T = at::Tensor;
  using S = c10::Scalar;
  using Str = c10::string_view;

  static ScatterRequest req(OpCode op, const T* src, const S* value,
                            std::optional<std::string_view> reduce = std::nullopt,
                            bool include_self = true) {
    ScatterRequest r;
    r.op = op;
    r.src = src;
    r.value = value;
    r.reduce = reduce;
    r.include_self = include_self;
    return r;
  }
  static T& run(const char* w, const T& self, int64_t dim, const T& index, const ScatterRequest& r,
                ScatterForm form, T& out) {
    ScatterOp<B> op{w, self, dim, index, r, form, out};
    entry<B, ScatterCall>(r.op, op);
    return out;
  }
  static T functional(const char* w, const T& self, int64_t dim, const T& index,
                      const ScatterRequest& r) {
    T out;
    return run(w, self, dim, index, r, ScatterForm::kFunctional, out);
  }
  static T& in_place(const char* w, T& self, int64_t dim, const T& index, const ScatterRequest& r) {
    return run(w, self, dim, index, r, ScatterForm::kInPlace, self);
  }
  static T& out_form(const char* w, const T& self, int64_t dim, const T& index,
                     const ScatterRequest& r, T& out) {
    return run(w, self, dim, index, r, ScatterForm::kOut, out);
  }

  // scatter.src / scatter_.src / scatter.src_out
  static T src(const T& self, int64_t dim, const T& index, const T& src) {
    return functional("src_scatter", self, dim, index, req(OpCode::kScatter, &src, nullptr));
  }
  static T& src_(T& self, int64_t dim, const T& index, const T& src) {
    return in_place("src_scatter_", self, dim, index, req(OpCode::kScatter, &src, nullptr));
  }
  static T& src_out(const T& self, int64_t dim, const T& index, const T& src, T& out) {
    return out_form("src_out_scatter_out", self, dim, index, req(OpCode::kScatter, &src, nullptr),
                    out);
  }
  // scatter.value / scatter_.value / scatter.value_out
  static T value(const T& self, int64_t dim, const T& index, const S& v) {
    return functional("value_scatter", self, dim, index, req(OpCode::kScatter, nullptr, &v));
  }
  static T& value_(T& self, int64_t dim, const T& index, const S& v) {
    return in_place("value_scatter_", self, dim, index, req(OpCode::kScatter, nullptr, &v));
  }
  static T& value_out(const T& self, int64_t dim, const T& index, const S& v, T& out) {
    return out_form("value_out_scatter_out", self, dim, index, req(OpCode::kScatter, nullptr, &v),
                    out);
  }
  // scatter.reduce / scatter_.reduce / scatter.reduce_out (src with reduce="add"/"multiply")
  static T reduce(const T& self, int64_t dim, const T& index, const T& src, Str rd) {
    return functional("reduce_scatter", self, dim, index, req(OpCode::kScatter, &src, nullptr, rd));
  }
  static T& reduce_(T& self, int64_t dim, const T& index, const T& src, Str rd) {
    return in_place("reduce_scatter_", self, dim, index, req(OpCode::kScatter, &src, nullptr, rd));
  }
  static T& reduce_out(const T& self, int64_t dim, const T& index, const T& src, Str rd, T& out) {
    return out_form("reduce_out_scatter_out", self, dim, index,
                    req(OpCode::kScatter, &src, nullptr, rd), out);
  }
  // scatter.value_reduce / scatter_.value_reduce / scatter.value_reduce_out
  static T value_reduce(const T& self, int64_t dim, const T& index, const S& v, Str rd) {
    return functional("value_reduce_scatter", self, dim, index,
                      req(OpCode::kScatter, nullptr, &v, rd));
  }
  static T& value_reduce_(T& self, int64_t dim, const T& index, const S& v, Str rd) {
    return in_place("value_reduce_scatter_", self, dim, index,
                    req(OpCode::kScatter, nullptr, &v, rd));
  }
  static T& value_reduce_out(const T& self, int64_t dim, const T& index, const S& v, Str rd,
                             T& out) {
    return out_form("value_reduce_out_scatter_out", self, dim, index,
                    req(OpCode::kScatter, nullptr, &v, rd), out);
  }
  // scatter_add / scatter_add_ / scatter_add.out
  static T add(const T& self, int64_t dim, const T& index, const T& src) {
    return functional("_scatter_add", self, dim, index, req(OpCode::kScatterAdd, &src, nullptr));
  }
  static T& add_(T& self, int64_t dim, const T& index, const T& src) {
    return in_place("_scatter_add_", self, dim, index, req(OpCode::kScatterAdd, &src, nullptr));
  }
  static T& add_out(const T& self, int64_t dim, const T& index, const T& src, T& out) {
    return out_form("out_scatter_add_out", self, dim, index,
                    req(OpCode::kScatterAdd, &src, nullptr), out);
  }
  // scatter_reduce.two / scatter_reduce_.two / scatter_reduce.two_out
  static T two(const T& self, int64_t dim, const T& index, const T& src, Str rd, bool incl) {
    return functional("two_scatter_reduce", self, dim, index,
                      req(OpCode::kScatterReduce, &src, nullptr, rd, incl));
  }
  static T& two_(T& self, int64_t dim, const T& index, const T& src, Str rd, bool incl) {
    return in_place("two_scatter_reduce_", self, dim, index,
                    req(OpCode::kScatterReduce, &src, nullptr, rd, incl));
  }
  static T& two_out(const T& self, int64_t dim, const T& index, const T& src, Str rd, bool incl,
                    T& out) {
    return out_form("two_out_scatter_reduce_out", self, dim, index,
                    req(OpCode::kScatterReduce, &src, nullptr, rd, incl), out);
  }

  // The install functions of the three switchable ops (OverrideSpec::install).
  static void install_scatter(torch::Library& m) {
    m.impl("scatter.src", TORCH_FN(src));
    m.impl("scatter_.src", TORCH_FN(src_));
    m.impl("scatter.src_out", TORCH_FN(src_out));
    m.impl("scatter.value", TORCH_FN(value));
    m.impl("scatter_.value", TORCH_FN(value_));
    m.impl("scatter.value_out", TORCH_FN(value_out));
    m.impl("scatter.reduce", TORCH_FN(reduce));
    m.impl("scatter_.reduce", TORCH_FN(reduce_));
    m.impl("scatter.reduce_out", TORCH_FN(reduce_out));
    m.impl("scatter.value_reduce", TORCH_FN(value_reduce));
    m.impl("scatter_.value_reduce", TORCH_FN(value_reduce_));
    m.impl("scatter.value_reduce_out", TORCH_FN(value_reduce_out));
  }
  static void install_scatter_add(torch::Library& m) {
    m.impl("scatter_add", TORCH_FN(add));
    m.impl("scatter_add_", TORCH_FN(add_));
    m.impl("scatter_add.out", TORCH_FN(add_out));
  }
  static void install_scatter_reduce(torch::Library& m) {
    m.impl("scatter_reduce.two", TORCH_FN(two));
    m.impl("scatter_reduce_.two", TORCH_FN(two_));
    m.impl("scatter_reduce.two_out", TORCH_FN(two_out));
  }

  // Registers the three ops for `key` (the backend files' namespace-scope initializers).
  static int register_all(c10::DispatchKey key, const char* file) {
    add_override({OpCode::kScatter, key, &install_scatter, file, __LINE__});
    add_override({OpCode::kScatterAdd, key, &install_scatter_add, file, __LINE__});
    return add_override({OpCode::kScatterReduce, key, &install_scatter_reduce, file, __LINE__});
  }
};

}  // namespace stridewise::adapter
