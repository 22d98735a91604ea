// Advanced indexing on the k-index core (index_k.h), with no kernel of its own:
//   index.Tensor (x[i], x[:, i], x[i, j], x[mask])   read over the result's shape (kSum)
//   _index_put_impl_ / index_put_ / index_put         write over the result's shape (kSum):
//                                                     x[i] = v (copy), x[i] += v (add)
//   take(self, index)                                 read at flat positions (kUnravel)
//   put_(self, index, source, accumulate)             write at flat positions (kUnravel)
// Every operand is a view: the index tensors broadcast with stride 0, `self` restrided onto the
// result's shape (stride 0 along the broadcast dims), a bool/uint8 mask as the columns of its
// nonzero() (select(1, j), never copied), values expanded to the result's shape, and a CPU
// 0-dim value for a CUDA self (x[i] = 1.0) passed by value (IndexKArgs::value) where ATen copies
// it to the device. Nothing is copied (stats() counts copies: always 0).
//
// index_adv.cpp (CPU) and index_adv_cuda.cpp (CUDA) instantiate AdvIndexOverloads<Backend,
// Kernels> and register it under the routing names "index", "index_put", "take", "put" and
// "index_fill" (index_fill.cpp: index_fill_ as one order-free write on the same core).
// Backend as in backends.h (the constructor taking self alone: these ops check devices with
// ATen's own wording); Kernels names ATen's leaf kernels for the device (at::cpu:: / at::cuda::
// index, index_out, _index_put_impl_, take, take_out, put_), which run a call the core does
// not take (counted "fallback"); they are ATen's whole op, so its checks and errors are ATen's.
#pragma once

#include <ATen/MemoryOverlap.h>
#include <ATen/core/List.h>
#include <ATen/core/Tensor.h>
#include <ATen/native/Resize.h>
#include <ATen/ops/empty.h>
#include <torch/library.h>

#include <array>
#include <initializer_list>
#include <optional>
#include <vector>

#include "common.h"
#include "entry.h"
#include "stridewise/index_k.h"

namespace stridewise::adapter {

using OptTensors = c10::List<std::optional<at::Tensor>>;

// The plan is made once per call and handed as-is to the plan-taking core entry points.
// `keep` holds what the views point into and the call created (nonzero's result, a value
// moved to the device): alive until the core call returns (CUDA: freed after the launch on
// the current stream, which the caching allocator orders).
struct IndexKCall {
  IndexKArgs args;
  IndexKPlan plan;
  std::vector<at::Tensor> keep;
};

// index.Tensor: ATen's checks in its order and wording (the structured meta: too many indices,
// devices, out='s dtype and overlaps; make_info's index dtypes, masks, broadcast, size-0 dims),
// then `out`: a new tensor with the layout ATen's TensorIterator gives it, or the out= tensor
// resized as ATen's resize_out does.
Prep prepare_index(const at::Tensor& self, const OptTensors& indices, at::Tensor& out,
                   bool out_given, IndexKCall* call);

// _index_put_impl_ on `self` in place: ATen's checks in its order and wording (too many
// indices, overlaps, make_info's, value shape and dtype); expanded self, a single value through
// a mask (ATen's masked_fill_) and values on another device go to ATen.
Prep prepare_index_put(const at::Tensor& self, const OptTensors& indices, const at::Tensor& values,
                       bool accumulate, IndexKCall* call);

// take / take.out and put_: take_out's and put_'s checks in ATen's order and wording.
Prep prepare_take(const at::Tensor& self, const at::Tensor& index, at::Tensor& out, bool out_given,
                  IndexKCall* call);
Prep prepare_put(const at::Tensor& self, const at::Tensor& index, const at::Tensor& source,
                 bool accumulate, IndexKCall* call);

// index_fill_'s value: a Scalar, or a 0-dim tensor on self's device in self's dtype that the core
// reads where it lies (exactly one of the two is set).
struct FillValue {
  const c10::Scalar* scalar = nullptr;
  const at::Tensor* tensor = nullptr;
};

// index_fill_ (index_fill.cpp): ATen's checks in its order and wording, then one order-free
// write of the value along `dim` (self restrided with stride 0 on it, the index seen with
// stride 0 along every other dim, negative values wrapped).
Prep prepare_index_fill(at::Tensor& self, int64_t dim, const at::Tensor& index,
                        const FillValue& value, IndexKCall* call);

// Raises a non-ok core status on the CPU with ATen's wording: IndexError "index 5 is out of
// bounds for dimension 0 with size 5" (dimension = the index tensor's place among the indexed
// dims, as ATen counts) for index/index_put_, "out of range: tried to access index 10 on a
// tensor of 6 elements." for take/put.
[[noreturn]] void throw_adv_cpu(const IndexKArgs& args, Status st, const ErrorDetail& err);

// Whether every index tensor and every one of `others` (null entries skipped) is on self's
// device. Where not (a CPU index for a CUDA self, which ATen moves over), ATen runs the call.
bool adv_same_device(const at::Tensor& self, const OptTensors* indices,
                     std::initializer_list<const at::Tensor*> others);

// The fields and steps the ops below share (entry.h): the call is this backend's when self is
// on its device type and every index and `others` on self's device (ATen's own wording for the
// device checks these ops make); a core error raised with ATen's CPU wording.
template <class B, class Self = const at::Tensor>
struct AdvOp {
  Self& self;                               // at::Tensor for the writes in place
  const OptTensors* indices;                // null for take / put / index_fill
  std::array<const at::Tensor*, 2> others;  // null entries skipped

  bool devices(std::optional<B>& b) {
    const c10::DeviceType want = B::kDevice == kCpu ? c10::DeviceType::CPU : c10::DeviceType::CUDA;
    if (self.device().type() != want || !adv_same_device(self, indices, {others[0], others[1]}))
      return false;
    b.emplace(self);
    return true;
  }
  [[noreturn]] void raise(B& b, const IndexKCall& call, Status st, const ErrorDetail& err) {
    if constexpr (B::kDevice == kCpu) throw_adv_cpu(call.args, st, err);
    b.raise(call.args.desc.op, st, err);
  }
};

template <class B, class K>
struct AdvIndexOverloads {
  using T = at::Tensor;
  using Op = AdvOp<B>;
  using WriteOp = AdvOp<B, at::Tensor>;

  // ---- index.Tensor
  struct Index : Op {
    T& out;
    bool out_given;
    Prep prepare(IndexKCall* call) {
      return prepare_index(this->self, *this->indices, out, out_given, call);
    }
    void fallback() {
      if (out_given)
        K::index_out(out, this->self, *this->indices);
      else
        out = K::index(this->self, *this->indices);
    }
  };
  static T& index_into(const T& self, const OptTensors& indices, T& out, bool out_given) {
    Index op{{self, &indices, {out_given ? &out : nullptr, nullptr}}, out, out_given};
    entry<B, IndexKCall>(OpCode::kIndex, op);
    return out;
  }
  static T index(const T& self, const OptTensors& indices) {
    T out;
    return index_into(self, indices, out, false);
  }
  static T& index_out(const T& self, const OptTensors& indices, T& out) {
    return index_into(self, indices, out, true);
  }

  // ---- _unsafe_index / _unsafe_index_put (what torch.compile's decompositions of upsampling and
  // of index_put make): ATen's own bodies (CompositeExplicitAutograd), on ours. "Unsafe" there
  // means unchecked on some backends; ours checks every index all the same.
  static T unsafe_index(const T& self, const OptTensors& indices) {
    for (const std::optional<at::Tensor>& i : indices) {  // no mask: the result's shape is static
      if (!i.has_value() || !i->defined()) continue;
      const at::ScalarType st = i->scalar_type();
      TORCH_CHECK(st == at::kLong || st == at::kInt, "_unsafe_index found unexpected index type ",
                  st);
    }
    T out;
    return index_into(self, indices, out, false);
  }
  static T unsafe_index_put(const T& self, const OptTensors& indices, const T& values,
                            bool accumulate) {
    return index_put(self, indices, values, accumulate);
  }

  // ---- _index_put_impl_, index_put_ and the functional / out= forms (ATen's: a clone of self
  // with its layout, put into; out= resized to the result and copied, as ATen's generated
  // out= wrappers of these composite ops do)
  struct PutImpl : WriteOp {
    const T& values;
    bool accumulate, unsafe;
    Prep prepare(IndexKCall* call) {
      return prepare_index_put(this->self, *this->indices, values, accumulate, call);
    }
    void fallback() { K::index_put_(this->self, *this->indices, values, accumulate, unsafe); }
  };
  static T& put_impl_(T& self, const OptTensors& indices, const T& values, bool accumulate,
                      bool unsafe) {
    // values: a CPU 0-dim value for a CUDA self is moved over by prepare_index_put, as by ATen
    PutImpl op{{self, &indices, {values.dim() == 0 ? nullptr : &values, nullptr}},
               values,
               accumulate,
               unsafe};
    entry<B, IndexKCall>(OpCode::kIndexPut, op);
    return self;
  }
  static T& index_put_(T& self, const OptTensors& indices, const T& values, bool accumulate) {
    return put_impl_(self, indices, values, accumulate, false);
  }
  static T index_put(const T& self, const OptTensors& indices, const T& values, bool accumulate) {
    T r = self.clone(at::MemoryFormat::Preserve);
    return put_impl_(r, indices, values, accumulate, false);
  }
  static T put_impl(const T& self, const OptTensors& indices, const T& values, bool accumulate,
                    bool unsafe) {
    T r = self.clone(at::MemoryFormat::Preserve);
    return put_impl_(r, indices, values, accumulate, unsafe);
  }
  static T& copy_out(const T& result, T& out) {
    TORCH_CHECK(result.dtype() == out.dtype(), "Expected out tensor to have dtype ", result.dtype(),
                ", but got ", out.dtype(), " instead");
    TORCH_CHECK(result.device() == out.device(), "Expected out tensor to have device ",
                result.device(), ", but got ", out.device(), " instead");
    at::native::resize_output(out, result.sizes());
    out.copy_(result);
    return out;
  }
  static T& index_put_out(const T& self, const OptTensors& indices, const T& values,
                          bool accumulate, T& out) {
    return copy_out(index_put(self, indices, values, accumulate), out);
  }
  static T& put_impl_out(const T& self, const OptTensors& indices, const T& values, bool accumulate,
                         bool unsafe, T& out) {
    return copy_out(put_impl(self, indices, values, accumulate, unsafe), out);
  }

  // ---- take
  struct Take : Op {
    const T& index;
    T& out;
    bool out_given;
    Prep prepare(IndexKCall* call) { return prepare_take(this->self, index, out, out_given, call); }
    void fallback() {
      if (out_given)
        K::take_out(out, this->self, index);
      else
        out = K::take(this->self, index);
    }
  };
  static T& take_into(const T& self, const T& index, T& out, bool out_given) {
    Take op{{self, nullptr, {&index, out_given ? &out : nullptr}}, index, out, out_given};
    entry<B, IndexKCall>(OpCode::kTake, op);
    return out;
  }
  static T take(const T& self, const T& index) {
    T out;
    return take_into(self, index, out, false);
  }
  static T& take_out(const T& self, const T& index, T& out) {
    return take_into(self, index, out, true);
  }

  // ---- put_, put, put.out
  struct Put : WriteOp {
    const T& index;
    const T& source;
    bool accumulate;
    Prep prepare(IndexKCall* call) {
      return prepare_put(this->self, index, source, accumulate, call);
    }
    void fallback() { K::put_(this->self, index, source, accumulate); }
  };
  static T& put_(T& self, const T& index, const T& source, bool accumulate) {
    Put op{{self, nullptr, {&index, &source}}, index, source, accumulate};
    entry<B, IndexKCall>(OpCode::kPut, op);
    return self;
  }
  static T put(const T& self, const T& index, const T& source, bool accumulate) {
    T r = self.clone(at::MemoryFormat::Preserve);
    return put_(r, index, source, accumulate);
  }
  static T& put_out(const T& self, const T& index, const T& source, bool accumulate, T& out) {
    return copy_out(put(self, index, source, accumulate), out);
  }

  // ---- index_fill_ (int_Scalar, int_Tensor), and index_fill / its out= forms as ATen's
  // composites make them (a clone of self filled; out= resized to it and copied); the Dimname
  // overloads resolve the name and call these
  struct Fill : WriteOp {
    int64_t dim;
    const T& index;
    const FillValue& value;
    Prep prepare(IndexKCall* call) {
      return prepare_index_fill(this->self, dim, index, value, call);
    }
    void fallback() {
      if (value.tensor != nullptr)
        K::index_fill_(this->self, dim, index, *value.tensor);
      else
        K::index_fill_(this->self, dim, index, *value.scalar);
    }
  };
  static T& fill_into(T& self, int64_t dim, const T& index, const FillValue& value) {
    Fill op{{self, nullptr, {&index, value.tensor}}, dim, index, value};
    entry<B, IndexKCall>(OpCode::kIndexFill, op);
    return self;
  }
  static T& index_fill_scalar_(T& self, int64_t dim, const T& index, const c10::Scalar& value) {
    return fill_into(self, dim, index, FillValue{&value, nullptr});
  }
  static T& index_fill_tensor_(T& self, int64_t dim, const T& index, const T& value) {
    TORCH_CHECK(value.dim() == 0,
                "index_fill_ only supports a 0-dimensional value tensor, but got tensor with ",
                value.dim(), " dimension(s).");
    // ATen reads the value to the host (item(): a synchronization for a device tensor), then
    // fills through the dispatcher. A device value in self's dtype that does not overlap self
    // is the same bytes read where it lies: no synchronization, nothing to convert.
    if (!value.is_cpu() && value.device() == self.device() &&
        value.scalar_type() == self.scalar_type() &&
        at::get_overlap_status(self, value) == at::MemOverlapStatus::No)
      return fill_into(self, dim, index, FillValue{nullptr, &value});
    return self.index_fill_(dim, index, value.item());
  }
  static T index_fill_scalar(const T& self, int64_t dim, const T& index, const c10::Scalar& value) {
    T r = self.clone(at::MemoryFormat::Preserve);
    return index_fill_scalar_(r, dim, index, value);
  }
  static T index_fill_tensor(const T& self, int64_t dim, const T& index, const T& value) {
    T r = self.clone(at::MemoryFormat::Preserve);
    return index_fill_tensor_(r, dim, index, value);
  }
  static T& index_fill_scalar_out(const T& self, int64_t dim, const T& index,
                                  const c10::Scalar& value, T& out) {
    return copy_out(index_fill_scalar(self, dim, index, value), out);
  }
  static T& index_fill_tensor_out(const T& self, int64_t dim, const T& index, const T& value,
                                  T& out) {
    return copy_out(index_fill_tensor(self, dim, index, value), out);
  }

  // The install functions of the switchable ops (OverrideSpec::install).
  static void install_index(torch::Library& m) {
    m.impl("index.Tensor", TORCH_FN(index));
    m.impl("index.Tensor_out", TORCH_FN(index_out));
    m.impl("_unsafe_index.Tensor", TORCH_FN(unsafe_index));
  }
  static void install_index_put(torch::Library& m) {
    m.impl("index_put_", TORCH_FN(index_put_));
    m.impl("index_put", TORCH_FN(index_put));
    m.impl("index_put.out", TORCH_FN(index_put_out));
    m.impl("_index_put_impl_", TORCH_FN(put_impl_));
    m.impl("_index_put_impl", TORCH_FN(put_impl));
    m.impl("_index_put_impl.out", TORCH_FN(put_impl_out));
    m.impl("_unsafe_index_put", TORCH_FN(unsafe_index_put));
  }
  static void install_take(torch::Library& m) {
    m.impl("take", TORCH_FN(take));
    m.impl("take.out", TORCH_FN(take_out));
  }
  static void install_index_fill(torch::Library& m) {
    m.impl("index_fill_.int_Scalar", TORCH_FN(index_fill_scalar_));
    m.impl("index_fill_.int_Tensor", TORCH_FN(index_fill_tensor_));
    m.impl("index_fill.int_Scalar", TORCH_FN(index_fill_scalar));
    m.impl("index_fill.int_Tensor", TORCH_FN(index_fill_tensor));
    m.impl("index_fill.int_Scalar_out", TORCH_FN(index_fill_scalar_out));
    m.impl("index_fill.int_Tensor_out", TORCH_FN(index_fill_tensor_out));
  }
  static void install_put(torch::Library& m) {
    m.impl("put_", TORCH_FN(put_));
    m.impl("put", TORCH_FN(put));
    m.impl("put.out", TORCH_FN(put_out));
  }

  // Registers the five ops for `key` (the op files' namespace-scope initializers call this).
  static int register_all(c10::DispatchKey key, const char* file) {
    add_override({OpCode::kIndexFill, key, &install_index_fill, file, __LINE__});
    add_override({OpCode::kIndex, key, &install_index, file, __LINE__});
    add_override({OpCode::kIndexPut, key, &install_index_put, file, __LINE__});
    add_override({OpCode::kTake, key, &install_take, file, __LINE__});
    return add_override({OpCode::kPut, key, &install_put, file, __LINE__});
  }
};

}  // namespace stridewise::adapter
