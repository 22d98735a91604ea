// gather: argument checks shared by CPU and CUDA, the CPU kernels, autograd for
// stridewise::gather, Meta kernels, and the CPU registrations (stridewise:: and the switchable
// aten:: override).
#include "gather.h"

#include <ATen/MemoryOverlap.h>
#include <ATen/WrapDimUtils.h>
#include <ATen/core/dispatch/Dispatcher.h>
#include <ATen/core/grad_mode.h>
#include <ATen/native/Resize.h>
#include <ATen/native/ScatterGatherChecks.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/gather.h>
#include <ATen/ops/gather_backward.h>
#include <ATen/ops/gather_native.h>
#include <c10/core/impl/LocalDispatchKeySet.h>
#include <torch/csrc/autograd/custom_function.h>
#include <torch/csrc/autograd/variable.h>
#include <torch/library.h>

#include "backends.h"

namespace stridewise::adapter {

namespace {

// out='s dtype and device checks: what ATen's structured out= wrapper (resize_out) does.
void check_out_dtype_device(const at::Tensor& self, const at::Tensor& out) {
  TORCH_CHECK(out.dtype() == self.dtype(), "Expected out tensor to have dtype ", self.dtype(),
              ", but got ", out.dtype(), " instead");
  TORCH_CHECK(out.device() == self.device(), "Expected out tensor to have device ", self.device(),
              ", but got ", out.device(), " instead");
}

// out='s overlap checks, after the resize: what gather's meta function does.
void check_out_overlap(const at::Tensor& self, const at::Tensor& index, const at::Tensor& out) {
  at::assert_no_internal_overlap(out);
  at::assert_no_overlap(out, self);
  at::assert_no_partial_overlap(out, index);
}

}  // namespace

Prep gather_prepare(const at::Tensor& self, int64_t dim, const at::Tensor& index, at::Tensor& out,
                    bool out_given, GatherCall* call) {
  const int64_t wrapped = at::maybe_wrap_dim(dim, self.dim());

  if (out_given) {
    check_out_dtype_device(self, out);
    at::native::resize_output(out, index.sizes());
    check_out_overlap(self, index, out);
  } else {
    out = at::empty(index.sizes(), self.options());
  }

  at::native::scatter_gather_dtype_check("gather", self, index, std::nullopt);
  if (index.numel() == 0) return Prep::kDone;
  at::native::gather_shape_check(self, wrapped, index);

  GatherArgs& a = call->args;
  a.self = to_view(self, "gather", "self");
  a.index = to_view(index, "gather", "index");
  a.out = to_view(out, "gather", "out", /*writable=*/true);
  if (self.dim() == 0 || index.dim() == 0) {
    promote_scalar(&a.self);
    promote_scalar(&a.index);
    promote_scalar(&a.out);
  }
  a.dim = wrapped;

  const Prep p = plan_call(OpCode::kGather, self, call);
  if (p == Prep::kRun)
    count_layouts(op_stats(OpCode::kGather), self, index, nullptr, out,
                  !call->plan.loop.fits_int32);
  return p;
}

void gather_aten(const at::Tensor& self, int64_t dim, const at::Tensor& index, bool sparse_grad,
                 at::Tensor& out) {
  AtenImpl<at::native::structured_gather_out>(out).impl(self, dim, index, sparse_grad, out);
}

namespace {

using CpuGather = GatherOverloads<CpuBackend>;

// Meta kernels (shape inference for FakeTensor, torch.compile, torch.export). Contract, checked
// by torch.library.opcheck (tests/test_custom_op.py): same checks in the same order as the real
// kernels, and the same output sizes and strides (a new result is contiguous, like the
// at::empty in gather_prepare). ATen's meta gather applies the same checks and output rule.
at::Tensor meta_gather(const at::Tensor& self, int64_t dim, const at::Tensor& index,
                       bool sparse_grad) {
  return at::gather(self, dim, index, sparse_grad);
}

bool has_symbolic_shape(const at::Tensor& t) {
  return t.unsafeGetTensorImpl()->has_symbolic_sizes_strides();
}

// Not at::gather_out: its overlap checks read concrete sizes (numel()) and throw on the symbolic
// sizes of dynamic-shape tracing. So: the real kernel's order with the SymInt resize; the overlap
// checks only when every size is concrete (torch's own Python meta functions for out= ops skip
// them too); then the functional meta gather for the index dtype and shape checks.
at::Tensor& meta_gather_out(const at::Tensor& self, int64_t dim, const at::Tensor& index,
                            bool sparse_grad, at::Tensor& out) {
  (void)at::maybe_wrap_dim(dim, self.dim());
  check_out_dtype_device(self, out);
  at::native::resize_output_symint(out, index.sym_sizes());
  if (!has_symbolic_shape(out) && !has_symbolic_shape(self) && !has_symbolic_shape(index))
    check_out_overlap(self, index, out);
  (void)at::gather(self, dim, index, sparse_grad);
  return out;
}

// Autograd for stridewise::gather uses ATen's formula (gather_backward: scatter_add, or the
// sparse variant), so gradients match torch.gather's. The aten:: overrides do not need this:
// they replace only the CPU/CUDA kernels and keep ATen's autograd kernel.
using GatherSig = at::Tensor(const at::Tensor&, int64_t, const at::Tensor&, bool);

class GatherFunction : public torch::autograd::Function<GatherFunction> {
 public:
  static at::Tensor forward(torch::autograd::AutogradContext* ctx, const at::Tensor& self,
                            int64_t dim, const at::Tensor& index, bool sparse_grad) {
    static const auto op =
        c10::Dispatcher::singleton().findSchemaOrThrow("stridewise::gather", "").typed<GatherSig>();
    ctx->save_for_backward({self, index});
    ctx->saved_data["dim"] = dim;
    ctx->saved_data["sparse_grad"] = sparse_grad;
    at::AutoDispatchBelowADInplaceOrView guard;
    return op.call(self, dim, index, sparse_grad);
  }

  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                 torch::autograd::variable_list grads) {
    const auto saved = ctx->get_saved_variables();
    const int64_t dim = ctx->saved_data["dim"].toInt();
    const bool sparse_grad = ctx->saved_data["sparse_grad"].toBool();
    at::Tensor grad_self = at::gather_backward(grads[0], saved[0], dim, saved[1], sparse_grad);
    return {grad_self, at::Tensor(), at::Tensor(), at::Tensor()};
  }
};

at::Tensor autograd_gather(const at::Tensor& self, int64_t dim, const at::Tensor& index,
                           bool sparse_grad) {
  // No graph to record (the index is integral and never requires grad): skip
  // Function::apply's node bookkeeping, which costs microseconds on small launches.
  if (!at::GradMode::is_enabled() || !self.requires_grad()) {
    static const auto op =
        c10::Dispatcher::singleton().findSchemaOrThrow("stridewise::gather", "").typed<GatherSig>();
    at::AutoDispatchBelowADInplaceOrView guard;
    return op.call(self, dim, index, sparse_grad);
  }
  return GatherFunction::apply(self, dim, index, sparse_grad);
}

// out= is not differentiable, as in ATen (same check and wording as its autograd kernel);
// the write bumps out's version counter like ATen's ADInplaceOrView kernel.
using GatherOutSig = at::Tensor&(const at::Tensor&, int64_t, const at::Tensor&, bool, at::Tensor&);

at::Tensor& autograd_gather_out(const at::Tensor& self, int64_t dim, const at::Tensor& index,
                                bool sparse_grad, at::Tensor& out) {
  static const auto op = c10::Dispatcher::singleton()
                             .findSchemaOrThrow("stridewise::gather", "out")
                             .typed<GatherOutSig>();
  const bool grad = at::GradMode::is_enabled();
  TORCH_CHECK(!(grad && self.requires_grad()) && !(grad && out.requires_grad()),
              "gather(): functions with out=... arguments don't support automatic "
              "differentiation, but one of the arguments requires grad.");
  {
    at::AutoDispatchBelowADInplaceOrView guard;
    op.call(self, dim, index, sparse_grad, out);
  }
  torch::autograd::impl::bump_version(out);
  return out;
}

[[maybe_unused]] const int kCpuRegistered =
    CpuGather::register_all(c10::DispatchKey::CPU, __FILE__);

}  // namespace
}  // namespace stridewise::adapter

TORCH_LIBRARY_IMPL(stridewise, CPU, m) {
  m.impl("gather", TORCH_FN(stridewise::adapter::CpuGather::gather));
  m.impl("gather.out", TORCH_FN(stridewise::adapter::CpuGather::gather_out));
}

TORCH_LIBRARY_IMPL(stridewise, Meta, m) {
  m.impl("gather", TORCH_FN(stridewise::adapter::meta_gather));
  m.impl("gather.out", TORCH_FN(stridewise::adapter::meta_gather_out));
}

TORCH_LIBRARY_IMPL(stridewise, Autograd, m) {
  m.impl("gather", TORCH_FN(stridewise::adapter::autograd_gather));
  m.impl("gather.out", TORCH_FN(stridewise::adapter::autograd_gather_out));
}
