// swdev indexing kernels: gather, scatter_add, scatter, index_select. Each runs ATen's own CPU
// kernel on CPU tensors wrapped over the device's host memory, so results and error messages
// (an out-of-range index included) are ATen's.
//
// Two kernels carry DELIBERATE, SEEDED BUGS. They exist so that CI can prove that
// `stridewise audit --device swdev` finds layout bugs on an out-of-tree PrivateUse1 device:
// the auditor must report them, and must stay quiet when they are switched off. They are of
// the class of ../shared/seeds/000_5c38027de25b5dd3.txt (FlagGems issue 5746: an Ascend
// gather kernel read an expanded index as contiguous memory and ran past its storage).
// Switch: SW_TESTDEV_BUGS, read at every call (unset or "all": both on; "none": both off;
// or a comma list of the names below). Do not "fix" them.
#include <ATen/core/Tensor.h>
#include <ATen/native/Resize.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/gather.h>
#include <ATen/ops/index_select.h>
#include <ATen/ops/scatter.h>
#include <ATen/ops/scatter_add.h>
#include <c10/core/WrapDimMinimal.h>
#include <c10/util/irange.h>
#include <torch/library.h>

#include <vector>

#include "swdev.h"

namespace swdev {
namespace {

void check_devices(const char* op, std::initializer_list<const at::Tensor*> tensors) {
  for (const at::Tensor* t : tensors) {
    TORCH_CHECK(!t->defined() || t->device().type() == kType, op,
                ": expected all tensors to be on the same device, but found at least two "
                "devices, ",
                device(), " and ", t->device(), "!");
  }
}

std::vector<int64_t> dense_strides(at::IntArrayRef sizes) {
  std::vector<int64_t> strides(sizes.size());
  int64_t step = 1;
  for (int64_t d = static_cast<int64_t>(sizes.size()) - 1; d >= 0; --d) {
    strides[d] = step;
    step *= std::max<int64_t>(sizes[d], 1);
  }
  return strides;
}

// The index as the correct kernels hand it to ATen's CPU kernels: a dense host copy. ATen's
// CPU scatter/gather take an "expanded index" fast path for some stride-0 indexes that is
// itself wrong (known upstream: stridewise/audit/known.py, aten-cpu-expanded-index-scatter and
// aten-cpu-gather-expanded-int32-index); this device must be correct where its bugs are off.
at::Tensor dense_index(const at::Tensor& index) {
  return host(index).contiguous();
}

// SEEDED BUG (a) "gather_index_contiguous": the index is read as if it were contiguous
// memory: its data pointer (storage offset honoured) with its sizes and *contiguous*
// strides, its real strides ignored -- exactly `tl.load(index + offset)` in the seed.
// With an expanded index (stride 0) this reads past the index's storage into the
// allocator's 0xFF redzone (device.cpp), so ATen raises "index -1 is out of bounds"; with a
// transposed or step-sliced index it reads in-bounds but wrong values, silently.
// The auditor should report gather as failing for non-contiguous index layouts (expand:
// error/crash; transpose/permute/slice: wrong values) and passing for a contiguous index.
at::Tensor gather_index(const at::Tensor& index) {
  if (!bug_enabled("gather_index_contiguous") || index.device().type() != kType) {
    return dense_index(index);
  }
  char* base = static_cast<char*>(index.storage().mutable_data());
  if (base != nullptr) base += index.storage_offset() * static_cast<int64_t>(index.itemsize());
  return host_at(index, base, index.sizes(), dense_strides(index.sizes()));
}

// SEEDED BUG (b) "scatter_add_offset": the tensor written by scatter_add_ / scatter_add.out
// is wrapped from its storage's base pointer with its sizes and strides but storage offset
// 0, so a written view with a storage offset is written at the wrong place (outside the view,
// inside the same storage); the view itself keeps its old values. The functional
// scatter_add writes a fresh contiguous result (offset 0) and stays correct.
// The auditor should report scatter_add_ / scatter_add.out as failing for written views with
// a storage offset (and memory outside the view changed), passing otherwise.
at::Tensor scatter_add_target(const at::Tensor& self) {
  if (!bug_enabled("scatter_add_offset")) return host(self);
  return host_at(self, self.storage().mutable_data(), self.sizes(), self.strides());
}

// gather

at::Tensor& gather_out(const at::Tensor& self, int64_t dim, const at::Tensor& index,
                       bool sparse_grad, at::Tensor& out) {
  check_devices("gather", {&self, &index, &out});
  at::native::resize_output(out, index.sizes());
  at::Tensor target = host(out);
  at::gather_out(target, host(self), dim, gather_index(index), sparse_grad);
  return out;
}

at::Tensor gather(const at::Tensor& self, int64_t dim, const at::Tensor& index, bool sparse_grad) {
  at::Tensor out = at::empty({0}, options(self.scalar_type()));
  return gather_out(self, dim, index, sparse_grad, out);
}

// scatter_add

at::Tensor& scatter_add_(at::Tensor& self, int64_t dim, const at::Tensor& index,
                         const at::Tensor& src) {
  check_devices("scatter_add_", {&self, &index, &src});
  scatter_add_target(self).scatter_add_(dim, dense_index(index), host(src));
  return self;
}

at::Tensor& scatter_add_out(const at::Tensor& self, int64_t dim, const at::Tensor& index,
                            const at::Tensor& src, at::Tensor& out) {
  check_devices("scatter_add", {&self, &index, &src, &out});
  at::native::resize_output(out, self.sizes());
  at::Tensor target = scatter_add_target(out);
  at::scatter_add_out(target, host(self), dim, dense_index(index), host(src));
  return out;
}

at::Tensor scatter_add(const at::Tensor& self, int64_t dim, const at::Tensor& index,
                       const at::Tensor& src) {
  check_devices("scatter_add", {&self, &index, &src});
  at::Tensor out = at::empty(self.sizes(), options(self.scalar_type()));
  at::Tensor target = host(out);
  at::scatter_add_out(target, host(self), dim, dense_index(index), host(src));  // correct
  return out;
}

// scatter (src and value)

at::Tensor& scatter_src_out(const at::Tensor& self, int64_t dim, const at::Tensor& index,
                            const at::Tensor& src, at::Tensor& out) {
  check_devices("scatter", {&self, &index, &src, &out});
  at::native::resize_output(out, self.sizes());
  at::Tensor target = host(out);
  at::scatter_out(target, host(self), dim, dense_index(index), host(src));
  return out;
}

at::Tensor scatter_src(const at::Tensor& self, int64_t dim, const at::Tensor& index,
                       const at::Tensor& src) {
  at::Tensor out = at::empty(self.sizes(), options(self.scalar_type()));
  return scatter_src_out(self, dim, index, src, out);
}

at::Tensor& scatter_src_(at::Tensor& self, int64_t dim, const at::Tensor& index,
                         const at::Tensor& src) {
  check_devices("scatter_", {&self, &index, &src});
  host(self).scatter_(dim, dense_index(index), host(src));
  return self;
}

at::Tensor& scatter_value_out(const at::Tensor& self, int64_t dim, const at::Tensor& index,
                              const at::Scalar& value, at::Tensor& out) {
  check_devices("scatter", {&self, &index, &out});
  at::native::resize_output(out, self.sizes());
  at::Tensor target = host(out);
  at::scatter_out(target, host(self), dim, dense_index(index), value);
  return out;
}

at::Tensor scatter_value(const at::Tensor& self, int64_t dim, const at::Tensor& index,
                         const at::Scalar& value) {
  at::Tensor out = at::empty(self.sizes(), options(self.scalar_type()));
  return scatter_value_out(self, dim, index, value, out);
}

at::Tensor& scatter_value_(at::Tensor& self, int64_t dim, const at::Tensor& index,
                           const at::Scalar& value) {
  check_devices("scatter_", {&self, &index});
  host(self).scatter_(dim, dense_index(index), value);
  return self;
}

// index_select

at::Tensor& index_select_out(const at::Tensor& self, int64_t dim, const at::Tensor& index,
                             at::Tensor& out) {
  check_devices("index_select", {&self, &index, &out});
  std::vector<int64_t> shape = self.sizes().vec();
  if (self.dim() > 0) shape[c10::maybe_wrap_dim(dim, self.dim())] = index.numel();
  at::native::resize_output(out, shape);
  at::Tensor target = host(out);
  at::index_select_out(target, host(self), dim, host(index));
  return out;
}

at::Tensor index_select(const at::Tensor& self, int64_t dim, const at::Tensor& index) {
  at::Tensor out = at::empty({0}, options(self.scalar_type()));
  return index_select_out(self, dim, index, out);
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("gather", gather);
  m.impl("gather.out", gather_out);
  m.impl("scatter_add", scatter_add);
  m.impl("scatter_add_", scatter_add_);
  m.impl("scatter_add.out", scatter_add_out);
  m.impl("scatter.src", scatter_src);
  m.impl("scatter_.src", scatter_src_);
  m.impl("scatter.src_out", scatter_src_out);
  m.impl("scatter.value", scatter_value);
  m.impl("scatter_.value", scatter_value_);
  m.impl("scatter.value_out", scatter_value_out);
  m.impl("index_select", index_select);
  m.impl("index_select.out", index_select_out);
}

}  // namespace swdev
