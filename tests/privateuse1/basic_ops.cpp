// swdev aten kernels other than indexing: factories, views, copies, fills, storage setters and
// the arithmetic autograd needs. Compute runs on CPU tensors wrapped over the device's host
// memory (swdev::host); nothing here falls back to CPU for ops that are not registered.
#include <ATen/EmptyTensor.h>
#include <ATen/core/Tensor.h>
#include <ATen/native/Resize.h>
#include <ATen/ops/_local_scalar_dense.h>
#include <ATen/ops/_reshape_alias_native.h>
#include <ATen/ops/add.h>
#include <ATen/ops/as_strided_native.h>
#include <ATen/ops/mul.h>
#include <ATen/ops/set_native.h>
#include <ATen/ops/view_native.h>
#include <c10/core/Allocator.h>
#include <c10/util/irange.h>
#include <torch/library.h>

#include "swdev.h"

namespace swdev {
namespace {

void check_index(std::optional<c10::Device> dev) {
  if (dev.has_value()) {
    TORCH_CHECK(dev->type() == kType, "swdev: expected a PrivateUse1 device, got ", *dev);
    TORCH_CHECK(!dev->has_index() || dev->index() == 0, "swdev has one device (index 0), got ",
                *dev);
  }
}

// Every defined tensor must be on swdev; a 0-dim CPU tensor passes where ATen's elementwise
// ops accept one (a wrapped scalar).
void check_devices(const char* op, std::initializer_list<const at::Tensor*> tensors,
                   bool allow_cpu_scalar) {
  for (const at::Tensor* t : tensors) {
    if (!t->defined() || t->device().type() == kType) continue;
    if (allow_cpu_scalar && t->device().is_cpu() && t->dim() == 0) continue;
    TORCH_CHECK(false, op,
                ": expected all tensors to be on the same device, but found at least "
                "two devices, ",
                device(), " and ", t->device(), "!");
  }
}

at::Tensor empty_memory_format(at::IntArrayRef size, std::optional<at::ScalarType> dtype,
                               std::optional<at::Layout> layout, std::optional<at::Device> dev,
                               std::optional<bool> /*pin_memory*/,
                               std::optional<at::MemoryFormat> memory_format) {
  check_index(dev);
  TORCH_CHECK(!layout.has_value() || *layout == at::kStrided, "swdev: only strided tensors");
  return at::detail::empty_generic(
      size, c10::GetAllocator(kType), c10::DispatchKeySet(c10::DispatchKey::PrivateUse1),
      dtype.value_or(at::get_default_dtype_as_scalartype()), memory_format);
}

at::Tensor empty_strided(at::IntArrayRef size, at::IntArrayRef stride,
                         std::optional<at::ScalarType> dtype, std::optional<at::Layout> layout,
                         std::optional<at::Device> dev, std::optional<bool> /*pin_memory*/) {
  check_index(dev);
  TORCH_CHECK(!layout.has_value() || *layout == at::kStrided, "swdev: only strided tensors");
  return at::detail::empty_strided_generic(size, stride, c10::GetAllocator(kType),
                                           c10::DispatchKeySet(c10::DispatchKey::PrivateUse1),
                                           dtype.value_or(at::get_default_dtype_as_scalartype()));
}

const at::Tensor& resize_(const at::Tensor& self, at::IntArrayRef size,
                          std::optional<at::MemoryFormat> memory_format) {
  // The CPU resize works on any host-memory storage: it grows the storage through the
  // storage's own allocator (ours) when the new size needs more bytes.
  at::native::resize_impl_cpu_(self.unsafeGetTensorImpl(), size, /*stride=*/std::nullopt);
  if (memory_format.has_value()) {
    TORCH_CHECK(*memory_format != at::MemoryFormat::Preserve, "Unsupported memory format ",
                *memory_format);
    self.unsafeGetTensorImpl()->empty_tensor_restride(*memory_format);
  }
  return self;
}

at::Tensor copy_from(const at::Tensor& self, const at::Tensor& dst, bool /*non_blocking*/) {
  // Either side may be CPU, the other swdev (or both swdev); the CPU copy handles strides,
  // dtype conversion and broadcasting.
  TORCH_CHECK(self.device().type() == kType || self.device().is_cpu(), "swdev: copy from ",
              self.device(), " is not supported");
  TORCH_CHECK(dst.device().type() == kType || dst.device().is_cpu(), "swdev: copy to ",
              dst.device(), " is not supported");
  host(dst).copy_(host(self));
  return dst;
}

at::Tensor copy_from_and_resize(const at::Tensor& self, const at::Tensor& dst) {
  at::native::resize_output(dst, self.sizes());
  return copy_from(self, dst, false);
}

at::Tensor& fill_scalar(at::Tensor& self, const at::Scalar& value) {
  host(self).fill_(value);
  return self;
}

at::Tensor& fill_tensor(at::Tensor& self, const at::Tensor& value) {
  check_devices("fill_", {&value}, /*allow_cpu_scalar=*/true);
  host(self).fill_(host(value));
  return self;
}

at::Tensor& zero_(at::Tensor& self) {
  host(self).zero_();
  return self;
}

at::Tensor& set_storage(at::Tensor& self, at::Storage source, int64_t storage_offset,
                        at::IntArrayRef size, at::IntArrayRef stride) {
  return at::native::set_storage_cpu_(self, std::move(source), storage_offset, size, stride);
}

at::Scalar local_scalar_dense(const at::Tensor& self) {
  return at::_local_scalar_dense(host(self));
}

// add / mul: the autograd engine accumulates gradients with add; ones_like/mul appear in
// simple backward graphs.
at::Tensor add(const at::Tensor& self, const at::Tensor& other, const at::Scalar& alpha) {
  check_devices("add", {&self, &other}, true);
  return to_device(at::add(host(self), host(other), alpha));
}

at::Tensor& add_(at::Tensor& self, const at::Tensor& other, const at::Scalar& alpha) {
  check_devices("add_", {&self, &other}, true);
  TORCH_CHECK(self.device().type() == kType, "add_: self must be on ", device());
  host(self).add_(host(other), alpha);
  return self;
}

at::Tensor& add_out(const at::Tensor& self, const at::Tensor& other, const at::Scalar& alpha,
                    at::Tensor& out) {
  check_devices("add.out", {&self, &other, &out}, true);
  TORCH_CHECK(out.device().type() == kType, "add.out: out must be on ", device());
  at::Tensor result = at::add(host(self), host(other), alpha);
  at::native::resize_output(out, result.sizes());
  host(out).copy_(result);
  return out;
}

at::Tensor mul(const at::Tensor& self, const at::Tensor& other) {
  check_devices("mul", {&self, &other}, true);
  return to_device(at::mul(host(self), host(other)));
}

at::Tensor& mul_(at::Tensor& self, const at::Tensor& other) {
  check_devices("mul_", {&self, &other}, true);
  TORCH_CHECK(self.device().type() == kType, "mul_: self must be on ", device());
  host(self).mul_(host(other));
  return self;
}

at::Tensor& mul_out(const at::Tensor& self, const at::Tensor& other, at::Tensor& out) {
  check_devices("mul.out", {&self, &other, &out}, true);
  TORCH_CHECK(out.device().type() == kType, "mul.out: out must be on ", device());
  at::Tensor result = at::mul(host(self), host(other));
  at::native::resize_output(out, result.sizes());
  host(out).copy_(result);
  return out;
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("empty.memory_format", empty_memory_format);
  m.impl("empty_strided", empty_strided);
  m.impl("as_strided", at::native::as_strided_tensorimpl);
  m.impl("view", at::native::view);
  m.impl("_reshape_alias", at::native::_reshape_alias);
  m.impl("resize_", resize_);
  m.impl("_copy_from", copy_from);
  m.impl("_copy_from_and_resize", copy_from_and_resize);
  m.impl("fill_.Scalar", fill_scalar);
  m.impl("fill_.Tensor", fill_tensor);
  m.impl("zero_", zero_);
  m.impl("set_.source_Storage",
         static_cast<at::Tensor& (*)(at::Tensor&, at::Storage)>(at::native::set_));
  m.impl("set_.source_Storage_storage_offset", set_storage);
  m.impl("set_.source_Tensor", at::native::set_tensor_);
  m.impl("_local_scalar_dense", local_scalar_dense);
  m.impl("add.Tensor", add);
  m.impl("add_.Tensor", add_);
  m.impl("add.out", add_out);
  m.impl("mul.Tensor", mul);
  m.impl("mul_.Tensor", mul_);
  m.impl("mul.out", mul_out);
}

}  // namespace swdev
