// The scatter family: argument checks shared by CPU and CUDA (scatter_prepare), the hand-over to
// ATen's kernel where the core has none (scatter_fallback), and the CPU backend with its
// registrations (switchable aten:: overrides "scatter", "scatter_add", "scatter_reduce").
#include "scatter.h"

#include <ATen/Context.h>
#include <ATen/MemoryOverlap.h>
#include <ATen/WrapDimUtils.h>
#include <ATen/native/ReductionType.h>
#include <ATen/native/Resize.h>
#include <ATen/native/ScatterGatherChecks.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/scatter_add_native.h>
#include <ATen/ops/scatter_native.h>
#include <ATen/ops/scatter_reduce_native.h>
#include <c10/util/Exception.h>

#include <cstring>

#include "backends.h"

namespace stridewise::adapter {

namespace {

Combine to_combine(at::native::ReductionType r) {
  using R = at::native::ReductionType;
  switch (r) {
    case R::SUM:
      return Combine::kAdd;
    case R::PROD:
      return Combine::kMul;
    case R::MEAN:
      return Combine::kMean;
    case R::MAX:
      return Combine::kMax;
    case R::MIN:
      return Combine::kMin;
  }
  return Combine::kCopy;
}

bool is_complex_or_bool(c10::ScalarType st) {
  return st == c10::ScalarType::Bool || c10::isComplexType(st);
}

// The rule (if any) that hands this call to ATen's kernel, where the core's result or error
// would not be ATen's:
//  - a dtype the core has no entry for, or none with this combine (scatter_supports):
//    ATen's kernel raises its NotImplementedError (or runs, for what the core cannot address);
//  - complex mean on CUDA: ATen divides every position by its count in complex arithmetic,
//    also the positions no index reaches (by 1 + 0i), which turns -0 into +0 and an infinite
//    component into NaN; the CPU core does the same, the CUDA core refuses it.
//  - copy of a dtype without arithmetic: ATen's CPU kernel (and its value form on either
//    device) takes only the dtypes that have arithmetic, and raises NotImplementedError for the
//    others (uint16/32/64, complex32, float8): those go to ATen for its error.
//  - CUDA (ATen/native/cuda/ScatterGatherKernel.cu, torch 2.11-2.13): ATen's multiply, mean,
//    amax and amin kernels (and value with reduce="multiply") dispatch ALL_TYPES_AND2(Half,
//    BFloat16): neither bool nor complex, so ATen raises NotImplementedError; except where
//    deterministic mode sends a src tensor through index_put_ (copy, add, mean).
// On CPU the rest of ATen's coverage equals the core's (checked against native for every dtype
// and combine).
bool aten_rule(bool cuda, bool deterministic, c10::ScalarType st, Combine c, bool has_value,
               Fallback* why) {
  DType dt = DType::kFloat32;
  if (!to_dtype(st, &dt)) {
    *why = Fallback::kUnmappedDtype;
    return true;
  }
  *why = Fallback::kDtypeRejected;
  if (!scatter_supports(dt, c)) return true;
  if (cuda && c10::isComplexType(st) && c == Combine::kMean) {
    *why = Fallback::kComplexMean;  // the CUDA core does not visit every position (scatter.h)
    return true;
  }
  if (c == Combine::kCopy && (!cuda || has_value) && !scatter_supports(dt, Combine::kAdd))
    return true;
  if (!cuda || !is_complex_or_bool(st)) return false;
  if (c == Combine::kCopy || c == Combine::kAdd) return false;
  if (deterministic && !has_value && c == Combine::kMean) return false;
  return true;
}

bool rank_ok(const at::Tensor& t) {
  return t.dim() <= kMaxRank;
}

}  // namespace

Prep scatter_prepare(const at::Tensor& self, int64_t dim, const at::Tensor& index,
                     const ScatterRequest& req, ScatterForm form, at::Tensor& out,
                     ScatterCall* call) {
  OpStats& stats = op_stats(req.op);
  const bool deterministic = deterministic_call(stats);
  const char* name = op_name(req.op);

  // ---- ATen's meta function (scatter_meta_impl) and the structured wrapper's set_output.
  if (req.op == OpCode::kScatter && req.src != nullptr && req.reduce.has_value()) {
    TORCH_WARN_ONCE(
        "The reduce argument of torch.scatter with Tensor src is deprecated and will be removed ",
        "in a future PyTorch release. Use torch.scatter_reduce instead for more reduction "
        "options.");
  }
  const int64_t wrapped = at::maybe_wrap_dim(dim, self.dim());
  const std::optional<at::Tensor> src_opt =
      req.src != nullptr ? std::optional<at::Tensor>(*req.src) : std::nullopt;
  at::native::scatter_gather_dtype_check("scatter", self, index, src_opt);
  at::native::scatter_shape_check(self, wrapped, index, src_opt);
  if (form != ScatterForm::kFunctional) {
    at::assert_no_internal_overlap(out);
    at::assert_no_overlap(out, index);
    if (req.src != nullptr) at::assert_no_overlap(out, *req.src);
  }
  if (form == ScatterForm::kOut) {
    TORCH_CHECK(out.dtype() == self.dtype(), "Expected out tensor to have dtype ", self.dtype(),
                ", but got ", out.dtype(), " instead");
    TORCH_CHECK(out.device() == self.device(), "Expected out tensor to have device ", self.device(),
                ", but got ", out.device(), " instead");
    at::native::resize_output(out, self.sizes());
  } else if (form == ScatterForm::kFunctional) {
    out = at::empty(self.sizes(), self.options());
  }
  Combine combine = req.op == OpCode::kScatterAdd ? Combine::kAdd : Combine::kCopy;
  if (req.reduce.has_value()) {
    combine =
        to_combine(at::native::get_operator_enum(*req.reduce, req.op == OpCode::kScatterReduce));
  }

  // ---- ATen's impl: out.copy_(self) first (its TensorIterator rejects a partial overlap).
  const bool same = form == ScatterForm::kInPlace || out.is_same(self);
  if (!same) at::assert_no_partial_overlap(out, self);

  Fallback why = Fallback::kRank;
  if (aten_rule(self.is_cuda(), deterministic, self.scalar_type(), combine, req.value != nullptr,
                &why) ||
      !rank_ok(self) || !rank_ok(index) || (req.src && !rank_ok(*req.src))) {
    stats.fall_back(why);
    return Prep::kFallback;
  }
  // ATen's result for an empty index: self's values, nothing scattered (but a complex mean
  // still divides every position by 1 + 0i: the core does that)
  if (index.numel() == 0 && !(combine == Combine::kMean && self.is_complex())) {
    if (!same) out.copy_(self);
    return Prep::kDone;
  }

  // ---- The core's call. It copies self into out itself, after every index value passed.
  ScatterArgs& a = call->args;
  a.out = to_view(out, name, "out", /*writable=*/true);
  a.self = same ? a.out : to_view(self, name, "self");
  a.index = to_view(index, name, "index");
  if (req.src != nullptr) {
    a.src = to_view(*req.src, name, "src");
  } else {
    scalar_bytes(*req.value, self.scalar_type(), a.value);
    a.has_value = true;
  }
  // ATen treats rank 0 as rank 1 in the shape checks (a 0-dim operand may meet a 1-dim one).
  promote_scalar(&a.out);
  promote_scalar(&a.self);
  promote_scalar(&a.index);
  if (!a.has_value) promote_scalar(&a.src);
  if (index.numel() == 0) {
    // complex mean only (see above). ATen checks no shape for an empty index, and divides
    // every position by 1 + 0i: the core gets an empty index (and src) of out's rank.
    for (StridedView* v : {&a.index, &a.src}) {
      v->rank = a.out.rank;
      for (int d = 0; d < v->rank; ++d) v->sizes[d] = v->strides[d] = 0;
    }
  }
  a.dim = wrapped;
  a.desc = scatter_desc(req.op, combine, req.include_self);
  a.deterministic = deterministic;
  if (combine == Combine::kMul && self.is_cpu() && self.is_complex()) {
    const ProductKind k = aten_cpu_complex_product(self.scalar_type());
    if (k == ProductKind::kUnknown) {  // a build of ATen whose product is neither formula
      stats.fall_back(Fallback::kCxProduct);
      return Prep::kFallback;
    }
    a.cx_product = k == ProductKind::kFma ? ComplexProduct::kFma : ComplexProduct::kPlain;
  }

  const Prep p = plan_call(req.op, self, call);
  if (p == Prep::kRun)
    count_layouts(stats, self, index, req.src, out, !call->plan.elems.fits_int32);
  return p;
}

void scatter_aten(const at::Tensor& self, int64_t dim, const at::Tensor& index,
                  const ScatterRequest& req, const at::Tensor& out) {
  namespace n = at::native;
  switch (req.op) {
    case OpCode::kScatterAdd:
      AtenImpl<n::structured_scatter_add>(out).impl(self, dim, index, *req.src, out);
      return;
    case OpCode::kScatterReduce:
      AtenImpl<n::structured_scatter_reduce_two>(out).impl(self, dim, index, *req.src, *req.reduce,
                                                           req.include_self, out);
      return;
    default:
      break;
  }
  if (req.src != nullptr && req.reduce.has_value()) {
    AtenImpl<n::structured_scatter_reduce_out>(out).impl(self, dim, index, *req.src, *req.reduce,
                                                         out);
  } else if (req.src != nullptr) {
    AtenImpl<n::structured_scatter_src_out>(out).impl(self, dim, index, *req.src, out);
  } else if (req.reduce.has_value()) {
    AtenImpl<n::structured_scatter_value_reduce_out>(out).impl(self, dim, index, *req.value,
                                                               *req.reduce, out);
  } else {
    AtenImpl<n::structured_scatter_value_out>(out).impl(self, dim, index, *req.value, out);
  }
}

namespace {

[[maybe_unused]] const int kCpuRegistered =
    ScatterOverloads<CpuBackend>::register_all(c10::DispatchKey::CPU, __FILE__);

}  // namespace
}  // namespace stridewise::adapter
