// swdev: a PrivateUse1 test device whose memory lives on the host (see
// docs/privateuse1_testdev.md). Shared helpers of the kernel files.
#pragma once

#include <ATen/core/Tensor.h>
#include <c10/core/Device.h>
#include <c10/core/TensorOptions.h>

#include <string>

namespace swdev {

constexpr c10::DeviceType kType = c10::DeviceType::PrivateUse1;

// The one device.
inline c10::Device device() {
  return c10::Device(kType, 0);
}

// A CPU tensor over the same memory as `t` (same sizes, strides and storage offset). A CPU
// tensor (e.g. a wrapped scalar) is returned as it is; an undefined one stays undefined.
at::Tensor host(const at::Tensor& t);

// A CPU tensor over `t`'s memory starting at `base` (a pointer inside `t`'s storage), with
// the given sizes and strides.
at::Tensor host_at(const at::Tensor& t, void* base, at::IntArrayRef sizes, at::IntArrayRef strides);

// A new contiguous device tensor holding the values of the CPU tensor `cpu`.
at::Tensor to_device(const at::Tensor& cpu);

// Options of a new device tensor of `dtype`.
inline c10::TensorOptions options(c10::ScalarType dtype) {
  return c10::TensorOptions().dtype(dtype).device(device());
}

// The seeded bugs (docs/privateuse1_testdev.md). SW_TESTDEV_BUGS is read at every call:
// unset or "all" = every bug on, "none" = all off, else a comma list of bug names.
bool bug_enabled(const char* name);

}  // namespace swdev
