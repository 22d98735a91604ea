// The dim-indexed ops as gather and scatter over views, with no kernel of their own:
//   index_select(self, d, i)        gather(self, d, i seen along out's shape)
//   index_add_(self, d, i, src)     scatter_add_(self, d, i seen along src's shape, src)
//   index_copy_(self, d, i, src)    scatter_(self, d, i seen along src's shape, src)
//   index_reduce_(self, d, i, src)  scatter_reduce_(..., prod / mean / amax / amin, include_self)
//   embedding(w, idx)               gather(w seen with stride 0 along idx's dims 1.., 0, idx
//                                   seen along out's shape)
//   embedding_dense_backward        scatter_add_ (scale_grad_by_freq: a mean) of grad's rows into
//                                   zeros(N, D); the padding_idx row cleared after. Where the
//                                   index's dims do not flatten to one as a view: out[idx] +=
//                                   grad (or its mean) on the k-index core (index_k.h), an
//                                   index_put_ with one index over grad's shape
// "Seen along" is a strided view: stride 0 on every dim the index does not step through. The
// core takes stride-0 operands natively, so nothing is copied (stats() counts copies: 0).
//
// Each op is a small entry here: ATen's argument checks (its meta function where the op is
// structured, with the output handling of its generated wrappers; its own checks where not),
// the views, and one of the two core calls. Where the core cannot give ATen's result (a case
// listed per op in index_dim.cpp), the call goes to ATen's own kernel and counts "fallback".
// index_dim.cpp (CPU) and index_dim_cuda.cpp (CUDA) instantiate IndexDimOverloads<Backend,
// Kernels> and register it: Backend as in backends.h; Kernels names ATen's kernels where they
// differ per device (IndexAdd and IndexReduce: structured impl classes; index_select_out and
// embedding_backward).
#pragma once

#include <ATen/core/Tensor.h>
#include <ATen/ops/embedding_native.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/index_add_meta.h>
#include <ATen/ops/index_copy_meta.h>
#include <ATen/ops/index_copy_native.h>
#include <ATen/ops/index_reduce_meta.h>
#include <c10/core/Scalar.h>
#include <c10/core/SymInt.h>
#include <torch/library.h>

#include <string_view>

#include "common.h"
#include "entry.h"
#include "gather.h"
#include "index_adv.h"
#include "scatter.h"

namespace stridewise::adapter {

// What the output handling of ATen's generated wrapper for a structured op does when its meta
// function sets the output: functional -> a new tensor; in place -> check_inplace's checks;
// out= -> resize_out's checks and resize. Same wording as ATen's.
void set_structured_output(ScatterForm form, at::Tensor& out, at::IntArrayRef sizes,
                           at::IntArrayRef strides, const at::TensorOptions& options);

// A structured op's meta function with that output handling around it.
template <class Meta>
struct MetaChecked final : Meta {
  MetaChecked(ScatterForm form, at::Tensor& out) : form_(form), out_(out) {}
  // The virtual's signature depends on the torch version: the H200 image's 2.11 passes the
  // output's dim names (named tensors), CI's 2.13 has none.
#if __has_include(<ATen/core/Dimname.h>)
  void set_output_raw_strided(int64_t /*output_idx*/, at::IntArrayRef sizes,
                              at::IntArrayRef strides, at::TensorOptions options,
                              at::DimnameList /*names*/) override {
    set_structured_output(form_, out_, sizes, strides, options);
  }
#else
  void set_output_raw_strided(int64_t /*output_idx*/, at::IntArrayRef sizes,
                              at::IntArrayRef strides, at::TensorOptions options) override {
    set_structured_output(form_, out_, sizes, strides, options);
  }
#endif
  const at::Tensor& maybe_get_output(int64_t /*output_idx*/) override {
    return out_;
  }

 private:
  ScatterForm form_;
  at::Tensor& out_;
};

// index_add / index_copy / index_reduce after their meta function: the scatter over views.
struct IndexScatter {
  OpCode op;
  Combine combine;
  bool include_self = true;
  const c10::Scalar* alpha = nullptr;  // index_add's (src is scaled unless it is 1)
};
Prep prepare_index_scatter(const IndexScatter& req, ScatterForm form, const at::Tensor& self,
                           int64_t dim, const at::Tensor& index, const at::Tensor& source,
                           at::Tensor& out, ScatterCall* call);

// index_select: ATen's checks (index_select_out_cpu_, which resizes `out`), then the gather.
Prep prepare_index_select(const at::Tensor& self, int64_t dim, const at::Tensor& index,
                          at::Tensor& out, GatherCall* call);

// embedding_dense_backward's one core call: the scatter where the index's dims (and grad's
// leading dims with them) flatten to one as a view; the k-index core otherwise (a transposed,
// expanded or step-sliced index of rank 2 or more, or one laid out unlike grad).
struct EmbeddingBackwardCall {
  bool index_k = false;  // which of the two below runs
  ScatterCall scatter;
  IndexKCall k;
};
template <class B>
Status run_call(B& b, const EmbeddingBackwardCall& call, ErrorDetail* err) {
  return call.index_k ? b.run(call.k, err) : b.run(call.scatter, err);
}

// embedding's forward (`out` receives the result: a new tensor, or the out= tensor resized) and
// embedding_dense_backward (`out` receives zeros(num_weights, D) when the core runs or the call
// is done).
Prep prepare_embedding(const at::Tensor& weight, const at::Tensor& indices, at::Tensor& out,
                       bool out_given, GatherCall* call);
Prep prepare_embedding_backward(const at::Tensor& grad, const at::Tensor& indices,
                                int64_t num_weights, int64_t padding_idx, bool scale_grad_by_freq,
                                at::Tensor& out, EmbeddingBackwardCall* call);

// Raises a non-ok core status of one of these ops on the CPU with ATen's wording for that op
// (its index errors differ per op, and for index_select per path).
[[noreturn]] void throw_index_op_cpu(OpCode op, const at::Tensor& self, const at::Tensor& index,
                                     const at::Tensor& out, Status st, const ErrorDetail& err);

// The fields and steps the ops below share (entry.h): the backend from the ATen wrapper's
// name and the operands it checks; a core error raised with the op's CPU wording.
template <class B>
struct IndexDimOp {
  const char* wrapper;
  OpCode op;
  const at::Tensor& self;
  const at::Tensor& index;
  const at::Tensor* src;  // null, or index_add/copy/reduce's source
  at::Tensor& out;
  bool out_given;

  bool devices(std::optional<B>& b) {
    b.emplace(wrapper, out_given ? &out : nullptr, self, index, src, "source");
    return true;
  }
  template <class Call>
  [[noreturn]] void raise(B& b, const Call& /*call*/, Status st, const ErrorDetail& err) {
    if constexpr (B::kDevice == kCpu) throw_index_op_cpu(op, self, index, out, st, err);
    b.raise(op, st, err);
  }
};

template <class B, class K>
struct IndexDimOverloads {
  using T = at::Tensor;
  using S = c10::Scalar;
  using Str = c10::string_view;
  using Op = IndexDimOp<B>;

  // ---- index_select
  struct Select : Op {
    int64_t dim;
    Prep prepare(GatherCall* call) {
      if (!this->out_given) this->out = at::empty({0}, this->self.options());
      return prepare_index_select(this->self, dim, this->index, this->out, call);
    }
    void fallback() { K::index_select_out(this->self, dim, this->index, this->out); }
  };
  static T& select_into(const char* w, const T& self, int64_t dim, const T& index, T& out,
                        bool out_given) {
    Select op{{w, OpCode::kIndexSelect, self, index, nullptr, out, out_given}, dim};
    entry<B, GatherCall>(OpCode::kIndexSelect, op);
    return out;
  }
  static T select(const T& self, int64_t dim, const T& index) {
    T out;
    return select_into("__index_select", self, dim, index, out, false);
  }
  static T& select_out(const T& self, int64_t dim, const T& index, T& out) {
    return select_into("_out_index_select_out", self, dim, index, out, true);
  }

  // ---- index_add / index_copy / index_reduce: meta, then one scatter (or ATen's impl)
  template <class Meta, class MetaFn, class AtenFn>
  struct Scatter : Op {
    ScatterForm form;
    IndexScatter req;
    MetaFn meta;
    AtenFn aten;
    int64_t dim = 0;  // wrapped by the meta function
    Prep prepare(ScatterCall* call) {
      MetaChecked<Meta> m(form, this->out);
      dim = meta(m);
      return prepare_index_scatter(req, form, this->self, dim, this->index, *this->src, this->out,
                                   call);
    }
    void fallback() { aten(dim, this->out); }
  };
  template <class Meta, class MetaFn, class AtenFn>
  static T& scatter_into(const char* w, ScatterForm form, IndexScatter req, const T& self,
                         const T& index, const T& source, T& out, MetaFn meta, AtenFn aten) {
    Scatter<Meta, MetaFn, AtenFn> op{
        {w, req.op, self, index, &source, out, form == ScatterForm::kOut}, form, req, meta, aten};
    entry<B, ScatterCall>(req.op, op);
    return out;
  }

  static T& add_entry(const char* w, ScatterForm form, const T& self, int64_t dim, const T& index,
                      const T& source, const S& alpha, T& out) {
    return scatter_into<at::meta::structured_index_add>(
        w, form, {OpCode::kIndexAdd, Combine::kAdd, true, &alpha}, self, index, source, out,
        [&](auto& m) { return m.meta(self, dim, index, source, alpha).dim; },
        [&](int64_t d, T& o) {
          AtenImpl<typename K::IndexAdd>(o).impl(self, d, index, source, alpha, o);
        });
  }
  static T add(const T& self, int64_t dim, const T& index, const T& source, const S& alpha) {
    T out;
    return add_entry("__index_add", ScatterForm::kFunctional, self, dim, index, source, alpha, out);
  }
  static T& add_(T& self, int64_t dim, const T& index, const T& source, const S& alpha) {
    return add_entry("__index_add_", ScatterForm::kInPlace, self, dim, index, source, alpha, self);
  }
  static T& add_out(const T& self, int64_t dim, const T& index, const T& source, const S& alpha,
                    T& out) {
    return add_entry("_out_index_add_out", ScatterForm::kOut, self, dim, index, source, alpha, out);
  }

  static T& copy_entry(const char* w, ScatterForm form, const T& self, int64_t dim, const T& index,
                       const T& source, T& out) {
    return scatter_into<at::meta::structured_index_copy>(
        w, form, {OpCode::kIndexCopy, Combine::kCopy}, self, index, source, out,
        [&](auto& m) { return m.meta(self, dim, index, source).dim; },
        [&](int64_t d, T& o) {
          AtenImpl<at::native::structured_index_copy_out>(o).impl(self, d, index, source, o);
        });
  }
  static T copy(const T& self, int64_t dim, const T& index, const T& source) {
    T out;
    return copy_entry("__index_copy", ScatterForm::kFunctional, self, dim, index, source, out);
  }
  static T& copy_(T& self, int64_t dim, const T& index, const T& source) {
    return copy_entry("__index_copy_", ScatterForm::kInPlace, self, dim, index, source, self);
  }
  static T& copy_out(const T& self, int64_t dim, const T& index, const T& source, T& out) {
    return copy_entry("_out_index_copy_out", ScatterForm::kOut, self, dim, index, source, out);
  }

  static T& reduce_entry(const char* w, ScatterForm form, const T& self, int64_t dim,
                         const T& index, const T& source, Str reduce, bool include_self, T& out) {
    const std::string_view r(reduce.data(), reduce.size());
    const Combine c = r == "prod"   ? Combine::kMul
                      : r == "mean" ? Combine::kMean
                      : r == "amax" ? Combine::kMax
                                    : Combine::kMin;  // the meta function refused any other
    return scatter_into<at::meta::structured_index_reduce>(
        w, form, {OpCode::kIndexReduce, c, include_self}, self, index, source, out,
        [&](auto& m) {
          const int64_t d = m.meta(self, dim, index, source, reduce, include_self).dim;
          TORCH_WARN_ONCE("index_reduce() is in beta and the API may change at any time.");
          return d;
        },
        [&](int64_t d, T& o) {
          AtenImpl<typename K::IndexReduce>(o).impl(self, d, index, source, reduce, include_self,
                                                    o);
        });
  }
  static T reduce(const T& self, int64_t dim, const T& index, const T& source, Str reduce,
                  bool include_self) {
    T out;
    return reduce_entry("__index_reduce", ScatterForm::kFunctional, self, dim, index, source,
                        reduce, include_self, out);
  }
  static T& reduce_(T& self, int64_t dim, const T& index, const T& source, Str reduce,
                    bool include_self) {
    return reduce_entry("__index_reduce_", ScatterForm::kInPlace, self, dim, index, source, reduce,
                        include_self, self);
  }
  static T& reduce_out(const T& self, int64_t dim, const T& index, const T& source, Str reduce,
                       bool include_self, T& out) {
    return reduce_entry("_out_index_reduce_out", ScatterForm::kOut, self, dim, index, source,
                        reduce, include_self, out);
  }

  // ---- embedding (forward) and embedding_dense_backward
  struct Embedding : Op {
    const c10::SymInt& padding_idx;
    bool scale_grad_by_freq, sparse;
    Prep prepare(GatherCall* call) {
      return prepare_embedding(this->self, this->index, this->out, this->out_given, call);
    }
    void fallback() {  // ATen's composite kernels (one for every device)
      const T& w = this->self;
      if (this->out_given)
        at::native::embedding_out_symint(w, this->index, padding_idx, scale_grad_by_freq, sparse,
                                         this->out);
      else
        this->out =
            at::native::embedding_symint(w, this->index, padding_idx, scale_grad_by_freq, sparse);
    }
  };
  static T& embedding_into(const T& weight, const T& indices, const c10::SymInt& padding_idx,
                           bool scale_grad_by_freq, bool sparse, T& out, bool out_given) {
    const char* w = out_given ? "_out_embedding_out" : "__embedding";
    Embedding op{{w, OpCode::kEmbedding, weight, indices, nullptr, out, out_given},
                 padding_idx,
                 scale_grad_by_freq,
                 sparse};
    entry<B, GatherCall>(OpCode::kEmbedding, op);
    return out;
  }
  static T embedding(const T& weight, const T& indices, c10::SymInt padding_idx,
                     bool scale_grad_by_freq, bool sparse) {
    T out;
    return embedding_into(weight, indices, padding_idx, scale_grad_by_freq, sparse, out, false);
  }
  static T& embedding_out(const T& weight, const T& indices, c10::SymInt padding_idx,
                          bool scale_grad_by_freq, bool sparse, T& out) {
    return embedding_into(weight, indices, padding_idx, scale_grad_by_freq, sparse, out, true);
  }

  struct EmbeddingBackward : Op {
    const c10::SymInt& num_weights;
    const c10::SymInt& padding_idx;
    bool scale_grad_by_freq;
    int64_t n = 0, pad = -1;
    Prep prepare(EmbeddingBackwardCall* call) {
      n = num_weights.guard_int(__FILE__, __LINE__);
      pad = padding_idx.guard_int(__FILE__, __LINE__);
      return prepare_embedding_backward(this->self, this->index, n, pad, scale_grad_by_freq,
                                        this->out, call);
    }
    void fallback() {
      this->out = K::embedding_backward(this->self, this->index, n, pad, scale_grad_by_freq);
    }
  };
  static T embedding_backward(const T& grad, const T& indices, c10::SymInt num_weights,
                              c10::SymInt padding_idx, bool scale_grad_by_freq) {
    T out;
    EmbeddingBackward op{{"__embedding_dense_backward", OpCode::kEmbeddingBackward, grad, indices,
                          nullptr, out, false},
                         num_weights,
                         padding_idx,
                         scale_grad_by_freq};
    // the padding row receives no gradient (ATen skips its indices; ours adds, then clears)
    if (entry<B, EmbeddingBackwardCall>(OpCode::kEmbeddingBackward, op) == Prep::kRun &&
        op.pad >= 0 && op.pad < op.n)
      out.select(0, op.pad).zero_();
    return out;
  }

  // The install functions of the switchable ops (OverrideSpec::install).
  static void install_index_select(torch::Library& m) {
    m.impl("index_select", TORCH_FN(select));
    m.impl("index_select.out", TORCH_FN(select_out));
  }
  static void install_index_add(torch::Library& m) {
    m.impl("index_add", TORCH_FN(add));
    m.impl("index_add_", TORCH_FN(add_));
    m.impl("index_add.out", TORCH_FN(add_out));
  }
  static void install_index_copy(torch::Library& m) {
    m.impl("index_copy", TORCH_FN(copy));
    m.impl("index_copy_", TORCH_FN(copy_));
    m.impl("index_copy.out", TORCH_FN(copy_out));
  }
  static void install_index_reduce(torch::Library& m) {
    m.impl("index_reduce", TORCH_FN(reduce));
    m.impl("index_reduce_", TORCH_FN(reduce_));
    m.impl("index_reduce.out", TORCH_FN(reduce_out));
  }
  static void install_embedding(torch::Library& m) {
    m.impl("embedding", TORCH_FN(embedding));
    m.impl("embedding.out", TORCH_FN(embedding_out));
  }
  static void install_embedding_backward(torch::Library& m) {
    m.impl("embedding_dense_backward", TORCH_FN(embedding_backward));
  }

  // Registers the six ops for `key` (the op files' namespace-scope initializers call this).
  static int register_all(c10::DispatchKey key, const char* file) {
    add_override({OpCode::kIndexSelect, key, &install_index_select, file, __LINE__});
    add_override({OpCode::kIndexAdd, key, &install_index_add, file, __LINE__});
    add_override({OpCode::kIndexCopy, key, &install_index_copy, file, __LINE__});
    add_override({OpCode::kIndexReduce, key, &install_index_reduce, file, __LINE__});
    add_override({OpCode::kEmbedding, key, &install_embedding, file, __LINE__});
    return add_override(
        {OpCode::kEmbeddingBackward, key, &install_embedding_backward, file, __LINE__});
  }
};

}  // namespace stridewise::adapter
