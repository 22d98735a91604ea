// The dim-indexed ops (index_dim.h): the views, ATen's checks where the op is not structured,
// the decision between the core and ATen's kernel, ATen's CPU error wording, and the CPU
// registrations.
//
// ATen's kernel runs a call (counted "fallback") where the core cannot give ATen's result:
//  - a dtype the core has no arithmetic for (uint16/32/64, complex32, float8), and for
//    index_reduce bool and complex, which ATen refuses: ATen raises or computes its own;
//  - an empty self with a non-empty index (ATen checks or skips the range per path);
//  - a source whose shape is not self's with `dim` resized (ATen broadcasts some of these);
//  - index_add with an alpha of a kind ATen converts its own way (a floating alpha for an
//    integral self, a complex alpha for a real one);
//  - embedding_dense_backward with a grad of another shape than the index's plus D, whose
//    leading dims do not flatten with the index's (ATen reads grad as (numel, D));
//  - more than kMaxRank dims.
#include "index_dim.h"

#include <ATen/Context.h>
#include <ATen/MemoryOverlap.h>
#include <ATen/TensorUtils.h>
#include <ATen/WrapDimUtils.h>
#include <ATen/native/Resize.h>
#include <ATen/ops/embedding_dense_backward_native.h>
#include <ATen/ops/empty_strided.h>
#include <ATen/ops/index_add_native.h>
#include <ATen/ops/index_reduce_native.h>
#include <ATen/ops/index_select_native.h>
#include <ATen/ops/zeros.h>
#include <c10/util/Exception.h>

#include <vector>

#include "backends.h"

namespace stridewise::adapter {

namespace {

// The dtype rule (common.h) for op `op` on `t` with combine `c`; *dt: the core's dtype.
Fallback dtype_rule(OpCode op, const at::Tensor& t, Combine c, DType* dt) {
  (void)to_dtype(t.scalar_type(), dt);
  return adapter::dtype_rule(op, t, c);
}

bool ranks_ok(std::initializer_list<const at::Tensor*> ts, int64_t extra = 0) {
  for (const at::Tensor* t : ts)
    if (t->dim() + extra > kMaxRank) return false;
  return true;
}

// The 1-D (or 0-dim) index seen with like's sizes: it steps along `dim` only.
StridedView index_along(const at::Tensor& index, const StridedView& like, int64_t dim,
                        const char* op) {
  StridedView v = to_view(index, op, "index");
  const int64_t step = index.dim() > 0 ? index.stride(0) : 0;
  v.rank = like.rank;
  for (int d = 0; d < like.rank; ++d) {
    v.sizes[d] = like.sizes[d];
    v.strides[d] = d == dim ? step : 0;
  }
  return v;
}

// Whether a source of this shape is what the scatter over views reads: self's shape with `dim`
// resized (rank 0 and rank 1 meet as ATen's checks let them).
bool source_matches(const at::Tensor& self, int64_t dim, const at::Tensor& source) {
  if (self.dim() <= 1 && source.dim() <= 1) return true;
  if (self.dim() != source.dim()) return false;
  for (int64_t d = 0; d < self.dim(); ++d)
    if (d != dim && self.size(d) != source.size(d)) return false;
  return true;
}

bool is_one(const c10::Scalar& s) {
  return s.isBoolean() ? s.toBool() : s.equal(1);
}

// Whether the core scales by `alpha` as ATen does for this self (alpha in self's dtype, then
// alpha * src): not where ATen converts it its own way.
bool alpha_ok(const c10::Scalar* alpha, const at::Tensor& self) {
  if (alpha == nullptr || is_one(*alpha)) return true;
  if (alpha->isComplex()) return self.is_complex();
  if (alpha->isFloatingPoint()) return self.is_floating_point() || self.is_complex();
  return true;
}

// Flattens dims [0, k) of `t` into one (sizes multiply) when that is a view: every dim of size
// > 1 steps by the next one's extent. Returns false when it would need a copy.
bool flatten_leading(const at::Tensor& t, int64_t k, int64_t* size, int64_t* stride) {
  int64_t n = 1, st = 1;
  bool first = true;
  for (int64_t d = k - 1; d >= 0; --d) {
    const int64_t s = t.size(d);
    if (s == 1) continue;
    if (first) {
      st = t.stride(d);
      first = false;
    } else if (t.stride(d) != st * n) {
      return false;
    }
    n *= s;
  }
  *size = k > 0 ? n : 1;
  *stride = first ? 0 : st;
  return true;
}

}  // namespace

void set_structured_output(ScatterForm form, at::Tensor& out, at::IntArrayRef sizes,
                           at::IntArrayRef strides, const at::TensorOptions& options) {
  switch (form) {
    case ScatterForm::kFunctional:
      out =
          strides.empty() ? at::empty(sizes, options) : at::empty_strided(sizes, strides, options);
      return;
    case ScatterForm::kInPlace:
      TORCH_CHECK(options.dtype() == out.dtype(), "Bad in-place call: ", "input tensor dtype ",
                  out.dtype(), " and output tensor dtype ", options.dtype(), " should match");
      TORCH_CHECK(options.device() == out.device(), "Bad in-place call: ", "input tensor device ",
                  out.device(), " and output tensor device ", options.device(), " should match");
      TORCH_CHECK(sizes == out.sizes(), "Bad in-place call: ", "input tensor size ", out.sizes(),
                  " and output tensor size ", sizes, " should match");
      return;
    case ScatterForm::kOut:
      TORCH_CHECK(options.dtype() == out.dtype(), "Expected out tensor to have dtype ",
                  options.dtype(), ", but got ", out.dtype(), " instead");
      TORCH_CHECK(options.device() == out.device(), "Expected out tensor to have device ",
                  options.device(), ", but got ", out.device(), " instead");
      if (at::native::resize_output(out, sizes) && !strides.empty())
        out.as_strided_(sizes, strides);
      return;
  }
}

Prep prepare_index_scatter(const IndexScatter& req, ScatterForm form, const at::Tensor& self,
                           int64_t dim, const at::Tensor& index, const at::Tensor& source,
                           at::Tensor& out, ScatterCall* call) {
  OpStats& stats = op_stats(req.op);
  const bool deterministic = deterministic_call(stats);
  // ATen's impl starts with out.copy_(self) where out is not self; its partial-overlap check.
  const bool same = form == ScatterForm::kInPlace || out.is_same(self);
  if (!same) at::assert_no_partial_overlap(out, self);

  DType dt = DType::kFloat32;
  const bool reduce_dtype =
      req.op != OpCode::kIndexReduce || !(self.scalar_type() == at::kBool || self.is_complex());
  Fallback why = Fallback::kReduceDtype;
  if (reduce_dtype) {
    why = Fallback::kAlphaKind;
    if (alpha_ok(req.alpha, self)) {
      why = dtype_rule(req.op, self, req.combine, &dt);
      if (why == Fallback::kNumFallbacks) {
        why = !ranks_ok({&self, &source, &out})    ? Fallback::kRank
              : self.numel() == 0                  ? Fallback::kEmptySelf
              : !source_matches(self, dim, source) ? Fallback::kSourceShape
                                                   : Fallback::kNumFallbacks;
      }
    }
  }
  if (why != Fallback::kNumFallbacks) {
    stats.fall_back(why);
    return Prep::kFallback;
  }
  if (index.numel() == 0) {
    if (!same) out.copy_(self);  // ATen's result: self's values, nothing combined
    return Prep::kDone;
  }

  const char* name = op_name(req.op);
  ScatterArgs& a = call->args;
  a.out = to_view(out, name, "out", /*writable=*/true);
  a.self = same ? a.out : to_view(self, name, "self");
  a.src = to_view(source, name, "source");
  promote_scalar(&a.out);
  promote_scalar(&a.self);
  promote_scalar(&a.src);
  a.index = index_along(index, a.src, dim, name);
  a.dim = dim;
  a.desc = scatter_desc(req.op, req.combine, req.include_self);
  a.deterministic = deterministic;
  if (req.alpha != nullptr && !is_one(*req.alpha)) {
    scalar_bytes(*req.alpha, self.scalar_type(), a.alpha);
    a.has_alpha = true;
  }

  const Prep p = plan_call(req.op, self, call);
  if (p == Prep::kRun)
    count_layouts(stats, self, index, &source, out, !call->plan.elems.fits_int32);
  return p;
}

Prep prepare_index_select(const at::Tensor& self, int64_t dim, const at::Tensor& index,
                          at::Tensor& out, GatherCall* call) {
  // ATen's index_select_out_cpu_, in its order and wording.
  const int64_t d = at::maybe_wrap_dim(dim, self.dim());
  const int64_t numel = index.numel();
  TORCH_CHECK_INDEX(index.dim() <= 1, "index_select(): Index is supposed to be a vector");
  TORCH_CHECK(!(self.dim() == 0 && numel != 1),
              "index_select(): Index to scalar can have only 1 value, got ", numel, " value(s)");
  TORCH_CHECK(index.scalar_type() == at::kLong || index.scalar_type() == at::kInt,
              "index_select(): Expected dtype int32 or int64 for index");
  TORCH_CHECK(self.scalar_type() == out.scalar_type(),
              "index_select(): self and result must have the same scalar type");
  at::assert_no_internal_overlap(out);
  at::assert_no_overlap(out, self);
  at::assert_no_overlap(out, index);
  std::vector<int64_t> sizes = self.sizes().vec();
  if (self.dim() > 0) sizes[d] = numel;
  at::native::resize_output(out, sizes);

  OpStats& stats = op_stats(OpCode::kIndexSelect);
  DType dt = DType::kFloat32;
  Fallback why = dtype_rule(OpCode::kIndexSelect, self, Combine::kCopy, &dt);
  if (why == Fallback::kNumFallbacks)
    why = !ranks_ok({&self, &out})           ? Fallback::kRank
          : (self.numel() == 0 && numel > 0) ? Fallback::kEmptySelf
                                             : Fallback::kNumFallbacks;
  if (why != Fallback::kNumFallbacks) {
    stats.fall_back(why);
    return Prep::kFallback;
  }
  if (numel == 0) return Prep::kDone;

  GatherArgs& a = call->args;
  a.self = to_view(self, "index_select", "self");
  a.out = to_view(out, "index_select", "out", /*writable=*/true);
  promote_scalar(&a.self);
  promote_scalar(&a.out);
  a.index = index_along(index, a.out, d, "index_select");
  a.dim = d;
  a.op = OpCode::kIndexSelect;
  const Prep p = plan_call(OpCode::kIndexSelect, self, call);
  if (p == Prep::kRun) count_layouts(stats, self, index, nullptr, out, !call->plan.loop.fits_int32);
  return p;
}

Prep prepare_embedding(const at::Tensor& weight, const at::Tensor& indices, at::Tensor& out,
                       bool out_given, GatherCall* call) {
  // ATen's embedding_symint, in its order and wording.
  TORCH_CHECK(weight.dim() == 2, "'weight' must be 2-D");
  at::checkScalarTypes("embedding", at::TensorArg(indices, "indices", 1), {at::kLong, at::kInt});

  OpStats& stats = op_stats(OpCode::kEmbedding);
  DType dt = DType::kFloat32;
  // out=: ATen's composite out form computes into a new tensor and copies (casting) into out;
  // the core writes out directly where that gives the same result: one dtype, no overlap.
  const auto apart = [&](const at::Tensor& t) {
    return at::get_overlap_status(out, t) == at::MemOverlapStatus::No;
  };
  const bool out_ok =
      !out_given || (out.scalar_type() == weight.scalar_type() && apart(weight) && apart(indices) &&
                     at::has_internal_overlap(out) == at::MemOverlap::No);
  Fallback why =
      out_ok ? dtype_rule(OpCode::kEmbedding, weight, Combine::kCopy, &dt) : Fallback::kNeedsCopy;
  if (why == Fallback::kNumFallbacks)
    why = !ranks_ok({&indices}, 1) ? Fallback::kRank
          : weight.numel() == 0    ? Fallback::kEmptySelf
                                   : Fallback::kNumFallbacks;
  if (why != Fallback::kNumFallbacks) {
    stats.fall_back(why);
    return Prep::kFallback;
  }
  std::vector<int64_t> sizes = indices.sizes().vec();
  sizes.push_back(weight.size(1));
  if (out_given) {
    at::native::resize_output(out, sizes);
  } else {
    out = at::empty(sizes, weight.options());
  }
  if (indices.numel() == 0) return Prep::kDone;

  // out[p, j] = weight[indices[p], j] as gather along dim 0 of rank k + 1 (k = indices.dim(),
  // at least 1): weight seen with stride 0 along the index dims 1..k-1, the index with stride 0
  // along the row.
  const int64_t k = indices.dim();
  const int r = static_cast<int>(k > 0 ? k + 1 : 2);
  GatherArgs& a = call->args;
  a.out = to_view(out, "embedding", "out", /*writable=*/true);
  a.self = to_view(weight, "embedding", "weight");
  a.index = to_view(indices, "embedding", "indices");
  if (k == 0) {  // one row: out seen as (1, D)
    a.out.sizes[1] = a.out.sizes[0];
    a.out.strides[1] = a.out.strides[0];
    a.out.sizes[0] = 1;
    a.out.strides[0] = 0;
  }
  a.out.rank = r;
  a.index.rank = r;
  a.self.rank = r;
  const int64_t w0 = weight.stride(0), w1 = weight.stride(1);
  for (int d = 0; d < r; ++d) {
    a.index.sizes[d] = a.out.sizes[d];
    a.index.strides[d] = (d < k) ? indices.stride(d) : 0;
    a.self.sizes[d] = d == 0 ? weight.size(0) : a.out.sizes[d];
    a.self.strides[d] = d == 0 ? w0 : (d == r - 1 ? w1 : 0);
  }
  a.dim = 0;
  a.op = OpCode::kEmbedding;
  const Prep p = plan_call(OpCode::kEmbedding, weight, call);
  if (p == Prep::kRun)
    count_layouts(stats, weight, indices, nullptr, out, !call->plan.loop.fits_int32);
  return p;
}

namespace {

// out[indices[p], j] += grad[p, j] over the flattened index dims p (the padding row too: the
// entry zeroes it afterwards, which is ATen's result, as out starts at zero). m, istep, gstep:
// flatten_leading's for the index and grad.
void scatter_rows(const at::Tensor& grad, const at::Tensor& indices, at::Tensor& out, int64_t m,
                  int64_t istep, int64_t gstep, IndexedOpDesc desc, ScatterArgs* a) {
  const int64_t D = grad.size(-1);
  a->out = to_view(out, "embedding_dense_backward", "out", /*writable=*/true);
  a->self = a->out;
  a->index = to_view(indices, "embedding_dense_backward", "indices");
  a->src = to_view(grad, "embedding_dense_backward", "grad_output");
  a->index.rank = 2;
  a->index.sizes[0] = m;
  a->index.strides[0] = istep;
  a->index.sizes[1] = D;
  a->index.strides[1] = 0;
  const int64_t glast = grad.stride(-1);
  a->src.rank = 2;
  a->src.sizes[0] = m;
  a->src.strides[0] = gstep;
  a->src.sizes[1] = D;
  a->src.strides[1] = glast;
  a->dim = 0;
  a->desc = desc;
}

// The same as index_put_ accumulate with one index, over grad's shape (indices.shape + [D]):
// out restrided with stride 0 along the index's dims and out.stride(1) along D, the index with
// its own strides along its dims and 0 along D; each value v adds v * out.stride(0). Nothing is
// flattened, so no layout of the index or of grad needs a copy.
void index_k_rows(const at::Tensor& grad, const at::Tensor& indices, at::Tensor& out,
                  IndexedOpDesc desc, IndexKArgs* a) {
  const char* name = "embedding_dense_backward";
  const int r = static_cast<int>(grad.dim());  // indices.dim() + 1
  a->src = to_view(grad, name, "grad_output");
  a->target = to_view(out, name, "out", /*writable=*/true);
  a->self = a->target;
  a->index[0] = to_view(indices, name, "indices");
  a->self.rank = a->index[0].rank = r;
  for (int d = 0; d < r; ++d) {
    a->self.sizes[d] = a->index[0].sizes[d] = grad.size(d);
    a->self.strides[d] = d == r - 1 ? out.stride(1) : 0;
    a->index[0].strides[d] = d == r - 1 ? 0 : indices.stride(d);
  }
  a->k = 1;
  a->term_size[0] = out.size(0);
  a->term_stride[0] = out.stride(0);
  a->term_dim[0] = 0;
  a->desc = desc;
}

}  // namespace

Prep prepare_embedding_backward(const at::Tensor& grad, const at::Tensor& indices,
                                int64_t num_weights, int64_t padding_idx, bool scale_grad_by_freq,
                                at::Tensor& out, EmbeddingBackwardCall* call) {
  at::checkScalarTypes("embedding_backward", at::TensorArg(indices, "indices", 2),
                       {at::kLong, at::kInt});
  OpStats& stats = op_stats(OpCode::kEmbeddingBackward);
  const bool deterministic = deterministic_call(stats);
  const int64_t k = indices.dim();
  int64_t m = 0, istep = 0, gm = 0, gstep = 0;
  DType dt = DType::kFloat32;
  // scale_grad_by_freq divides each row's sum by its count: a mean without self
  const Combine comb = scale_grad_by_freq ? Combine::kMean : Combine::kAdd;
  const bool flat = grad.dim() == k + 1 && flatten_leading(indices, k, &m, &istep) &&
                    flatten_leading(grad, k, &gm, &gstep) && gm == m;
  // Otherwise the k-index core, over grad's shape, which must then be the index's plus D.
  const bool over_grad =
      !flat && grad.dim() == k + 1 && grad.sizes().slice(0, k) == indices.sizes();
  Fallback why = grad.dim() != k + 1 ? Fallback::kShapeError
                                     : dtype_rule(OpCode::kEmbeddingBackward, grad, comb, &dt);
  if (why == Fallback::kNumFallbacks)
    why = num_weights < 0                   ? Fallback::kShapeError
          : over_grad && !ranks_ok({&grad}) ? Fallback::kRank
          : !(flat || over_grad)            ? Fallback::kNeedsCopy
                                            : Fallback::kNumFallbacks;
  if (why != Fallback::kNumFallbacks) {
    stats.fall_back(why);
    return Prep::kFallback;
  }
  const int64_t D = grad.size(-1);
  out = at::zeros({num_weights, D}, grad.options());
  if (indices.numel() == 0 || D == 0) return Prep::kDone;

  const IndexedOpDesc desc{OpCode::kEmbeddingBackward, IndexRole::kWrite, comb,
                           /*include_self=*/!scale_grad_by_freq, /*wraps=*/false};
  Prep p = Prep::kRun;
  bool int64_offsets = false;
  call->index_k = !flat;
  if (flat) {
    ScatterArgs& a = call->scatter.args;
    scatter_rows(grad, indices, out, m, istep, gstep, desc, &a);
    a.deterministic = deterministic;
    p = plan_call(OpCode::kEmbeddingBackward, grad, &call->scatter);
    int64_offsets = !call->scatter.plan.elems.fits_int32;
  } else {
    IndexKArgs& a = call->k.args;
    index_k_rows(grad, indices, out, desc, &a);
    a.deterministic = deterministic;
    p = plan_call(OpCode::kEmbeddingBackward, grad, &call->k);
    int64_offsets = !call->k.plan.loop.fits_int32;
  }
  if (p == Prep::kRun) count_layouts(stats, out, indices, &grad, out, int64_offsets);
  return p;
}

void throw_index_op_cpu(OpCode op, const at::Tensor& self, const at::Tensor& index,
                        const at::Tensor& out, Status st, const ErrorDetail& e) {
  if (st == Status::kIndexOutOfRange) {
    switch (op) {
      case OpCode::kIndexSelect:
        // index_select_out_cpu_dim1_, ATen's path for dim 1 into a contiguous result
        TORCH_CHECK(!(self.dim() > 1 && e.dim == 1 && out.is_contiguous()),
                    "INDICES element is out of DATA bounds, id=", e.value, " axis_dim=", e.hi);
        TORCH_CHECK_INDEX(false, "index out of range in self");
      case OpCode::kIndexAdd:
        // ATen adds through scatter_add (its wording) from rank 2 up along the first or last
        // dim with an int64 index; slice by slice otherwise
        TORCH_CHECK_INDEX(self.dim() > 1 && (e.dim == 0 || e.dim == self.dim() - 1) &&
                              index.scalar_type() == at::kLong,
                          "index out of range in self");
        TORCH_CHECK(false, format_index_error(e));
      case OpCode::kIndexCopy:
        TORCH_CHECK_INDEX(false, "index_copy_(): ", format_index_error(e));
      case OpCode::kIndexReduce:
      case OpCode::kEmbedding:
        TORCH_CHECK_INDEX(false, "index out of range in self");
      default:
        break;
    }
  }
  throw_status(op_name(op), "cpu", st, e);
}

namespace {

// ATen's CPU kernels for the calls the core does not take.
struct CpuKernels {
  using IndexAdd = at::native::structured_index_add_cpu_out;
  using IndexReduce = at::native::structured_index_reduce_cpu_out;
  static at::Tensor& index_select_out(const at::Tensor& self, int64_t dim, const at::Tensor& index,
                                      at::Tensor& out) {
    return at::native::index_select_out_cpu_(self, dim, index, out);
  }
  static at::Tensor embedding_backward(const at::Tensor& grad, const at::Tensor& indices,
                                       int64_t num_weights, int64_t padding_idx, bool scale) {
    return at::native::embedding_dense_backward_cpu(grad, indices, num_weights, padding_idx, scale);
  }
};

using CpuIndexDim = IndexDimOverloads<CpuBackend, CpuKernels>;

[[maybe_unused]] const int kCpuIndexDim =
    CpuIndexDim::register_all(c10::DispatchKey::CPU, __FILE__);

}  // namespace
}  // namespace stridewise::adapter
