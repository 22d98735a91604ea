// The CPU backend of the op templates (ScatterOverloads in scatter.h, IndexDimOverloads in
// index_dim.h): what one call does on the CPU around the device-independent half. The CUDA one
// is in cuda_backend.h. A backend is an RAII object built first in every call, with
//   static constexpr Counter kDevice;                        // kCpu / kCuda
//   Backend(const char* wrapper, const at::Tensor* out, self, index, src-or-null, src_name);
//   explicit Backend(const at::Tensor& self);                // advanced indexing (index_adv.h):
//                                                            // devices checked by the op
//   void begin();                                            // CUDA: raise a pending error
//   Status run(const ScatterCall&, ErrorDetail*);            // launches the core
//   Status run(const GatherCall&, ErrorDetail*);
//   Status run(const IndexKCall&, ErrorDetail*);
//   [[noreturn]] void raise(OpCode, Status, const ErrorDetail&);
#pragma once

#include <ATen/core/Tensor.h>

#include "common.h"
#include "gather.h"
#include "index_adv.h"
#include "scatter.h"

namespace stridewise::adapter {

// CPU: nothing to check or guard (the dispatcher only sends all-CPU calls here).
struct CpuBackend {
  static constexpr Counter kDevice = kCpu;
  CpuBackend(const char* /*wrapper*/, const at::Tensor* /*out*/, const at::Tensor& /*self*/,
             const at::Tensor& /*index*/, const at::Tensor* /*src*/,
             const char* /*src_name*/ = "src") {}
  explicit CpuBackend(const at::Tensor& /*self*/) {}
  void begin() {}
  Status run(const ScatterCall& call, ErrorDetail* err) {
    return scatter_cpu(call.args, call.plan, torch_cpu_executor(), err);
  }
  Status run(const GatherCall& call, ErrorDetail* err) {
    return gather_cpu(call.args, call.plan, torch_cpu_executor(), err);
  }
  Status run(const IndexKCall& call, ErrorDetail* err) {
    return index_k_cpu(call.args, call.plan, torch_cpu_executor(), err);
  }
  [[noreturn]] void raise(OpCode op, Status st, const ErrorDetail& err) {
    throw_status(op_name(op), "cpu", st, err);
  }
};

}  // namespace stridewise::adapter
