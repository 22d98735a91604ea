// Advanced indexing (index_adv.h): ATen's arguments turned into the k-index core's views, ATen's
// checks in its order and wording, the layout ATen gives a new result, ATen's CPU error wording,
// and the CPU registrations.
//
// ATen's kernel runs a call (counted "fallback") where the core does not give ATen's result:
//  - a dtype without arithmetic in the core (uint16/32/64, complex32, float8: ATen moves or
//    refuses them per op and device);
//  - more index tensors than kMaxIndexTerms (a mask over m dims counts m), or none (only
//    None / 0-dim masks), or more than kMaxRank dims;
//  - an index (or out=, or non-0-dim values) on another device than self: ATen moves a CPU
//    index to the device (or raises);
//  - index_put_ on a self with internal overlap (ATen warns, then writes racily), and on CUDA
//    index_put_ of one CPU value through a mask without accumulate (ATen's masked_fill_, which
//    needs no nonzero(); on the CPU the core writes it at the mask's nonzero() positions);
//  - put_ with a source whose shape does not view as the index's;
//  - the core declining at run time (CUDA: a deterministic write that may collide).
#include "index_adv.h"

#include <ATen/Context.h>
#include <ATen/ExpandUtils.h>
#include <ATen/MemoryOverlap.h>
#include <ATen/TensorUtils.h>
#include <ATen/native/IndexingUtils.h>
#include <ATen/native/TensorAdvancedIndexingUtils.h>
#include <ATen/ops/_index_put_impl_cpu_dispatch.h>
#include <ATen/ops/empty_strided.h>
#include <ATen/ops/index_cpu_dispatch.h>
#include <ATen/ops/index_fill_cpu_dispatch.h>
#include <ATen/ops/put_cpu_dispatch.h>
#include <ATen/ops/take_cpu_dispatch.h>
#include <c10/util/Exception.h>
#include <c10/util/accumulate.h>

#include <algorithm>
#include <cstring>
#include <numeric>
#include <sstream>
#include <string>
#include <tuple>

#include "backends.h"
#include "index_adv_views.h"

namespace stridewise::adapter {

bool adv_same_device(const at::Tensor& self, const OptTensors* indices,
                     std::initializer_list<const at::Tensor*> others) {
  const c10::Device d = self.device();
  for (const at::Tensor* t : others)
    if (t != nullptr && t->device() != d) return false;
  if (indices != nullptr) {
    for (const std::optional<at::Tensor>& i : *indices)
      if (i.has_value() && i->defined() && i->device() != d) return false;
  }
  return true;
}

namespace {

// Whether the core runs op on t's dtype with combine c (common.h's dtype_rule), and why not.
bool dtype_ok(OpCode op, const at::Tensor& t, Combine c, Fallback* why) {
  *why = dtype_rule(op, t, c);
  return *why == Fallback::kNumFallbacks;
}

// The rank-0 case as one element of rank 1 (ATen's result keeps its 0-dim shape).
void promote_all(IndexKArgs* a, bool write) {
  promote_scalar(write ? &a->src : &a->out);
  promote_scalar(&a->self);
  for (int j = 0; j < a->k; ++j) promote_scalar(&a->index[j]);
}

void too_many(const at::Tensor& self, size_t n) {
  TORCH_CHECK_INDEX(n <= static_cast<size_t>(self.dim()),
                    "too many indices for tensor of dimension ", self.dim(), " (got ", n, ")");
}

// The out= tensor as the structured wrapper's resize_out leaves it: resized (and restrided as
// ATen's iterator lays a new result out) when its shape is not the result's.
void resize_like_iter(at::Tensor& out, at::IntArrayRef sizes, const std::vector<int64_t>& strides) {
  if (out.sizes() == sizes) return;
  if (at::native::resize_output(out, sizes) && !strides.empty()) out.as_strided_(sizes, strides);
}

}  // namespace

Prep prepare_index(const at::Tensor& self, const OptTensors& indices, at::Tensor& out,
                   bool out_given, IndexKCall* call) {
  OpStats& stats = op_stats(OpCode::kIndex);
  too_many(self, indices.size());
  const int k = count_terms(indices);
  Fallback why = Fallback::kNumFallbacks;
  if (!dtype_ok(OpCode::kIndex, self, Combine::kCopy, &why) || k < 1 || k > kMaxIndexTerms ||
      self.dim() > kMaxRank) {
    stats.fall_back(why != Fallback::kNumFallbacks ? why
                    : k < 1                        ? Fallback::kNoIndexTerms
                    : k > kMaxIndexTerms           ? Fallback::kIndexTerms
                                                   : Fallback::kRank);
    return Prep::kFallback;
  }
  if (out_given) {  // the structured meta's checks of a given result
    TORCH_CHECK(self.scalar_type() == out.scalar_type(), "index_out: self (", self.scalar_type(),
                ") and result (", out.scalar_type(), ") must have the same scalar type");
    at::assert_no_internal_overlap(out);
    at::assert_no_overlap(out, self);
    for (const std::optional<at::Tensor>& i : indices)
      if (i.has_value() && i->defined()) at::assert_no_overlap(out, *i);
  }
  const Terms t = expand_terms(self, indices);
  IndexKArgs& a = call->args;
  std::vector<std::vector<int64_t>> ops;
  const std::vector<int64_t> sizes = build_views(self, t, "index", &a, &ops);
  for (int j = 0; j < a.k; ++j)
    TORCH_CHECK_INDEX(a.term_size[j] != 0 || c10::multiply_integers(t.bshape) == 0,
                      "index is out of bounds for dimension with size 0");
  if (sizes.size() > static_cast<size_t>(kMaxRank)) {
    stats.fall_back(Fallback::kRank);
    return Prep::kFallback;
  }
  const std::vector<int64_t> strides = iter_out_strides(sizes, ops);
  if (out_given) {
    resize_like_iter(out, sizes, strides);
  } else {
    out = strides.empty() ? at::empty(sizes, self.options())
                          : at::empty_strided(sizes, strides, self.options());
  }
  if (out.numel() == 0) return Prep::kDone;
  for (const at::Tensor& i : t.per_dim)
    if (i.defined()) call->keep.push_back(i);
  a.out = to_view(out, "index", "out", /*writable=*/true);
  a.desc = IndexedOpDesc{OpCode::kIndex, IndexRole::kRead, Combine::kCopy, true, /*wraps=*/true};
  promote_all(&a, false);
  const Prep p = plan_call(call->args.desc.op, self, call);
  if (p == Prep::kRun)
    count_layouts(stats, self, telling_index(t), nullptr, out, !call->plan.loop.fits_int32);
  return p;
}

Prep prepare_index_put(const at::Tensor& self, const OptTensors& indices, const at::Tensor& values,
                       bool accumulate, IndexKCall* call) {
  OpStats& stats = op_stats(OpCode::kIndexPut);
  const bool deterministic = deterministic_call(stats);
  too_many(self, indices.size());
  const int k = count_terms(indices);
  const Combine c = accumulate ? Combine::kAdd : Combine::kCopy;
  const auto fallback = [&](Fallback why) {
    stats.fall_back(why);
    return Prep::kFallback;
  };
  // ATen warns about an expanded self and writes it anyway: its call, its warning
  if (at::has_internal_overlap(self) == at::MemOverlap::Yes)
    return fallback(Fallback::kExpandedSelf);
  // x[mask] = v with one CPU value v, without accumulate: ATen runs self.masked_fill_(mask,
  // v.item()). The core writes that value (converted as masked_fill_ converts it) at the mask's
  // nonzero() positions on the CPU. On CUDA nonzero() would synchronize the host where ATen's
  // masked_fill_ does not: ATen runs it there.
  bool masked = false;
  at::Tensor mask;
  if (!accumulate)
    std::tie(masked, mask) = at::native::canDispatchToMaskedFill(self, indices, values);
  if (masked && !self.is_cpu()) return fallback(Fallback::kMaskedFill);
  Fallback why = Fallback::kNumFallbacks;
  if (!dtype_ok(OpCode::kIndexPut, self, c, &why)) return fallback(why);
  if (masked && at::isFloat8Type(self.scalar_type()))
    return fallback(Fallback::kDtypeRejected);  // masked_fill_ has no float8 kernel
  if (k < 1) return fallback(Fallback::kNoIndexTerms);
  if (k > kMaxIndexTerms) return fallback(Fallback::kIndexTerms);
  if (self.dim() > kMaxRank) return fallback(Fallback::kRank);
  // A Python scalar's value arrives as a 0-dim CPU tensor: the core takes its bytes
  // (IndexKArgs::value) instead of the device copy ATen makes.
  const at::Tensor& value = values;
  const bool scalar_value = values.is_cpu() && !self.is_cpu() && values.dim() == 0;
  IndexKArgs& a = call->args;
  if (masked) {  // masked_fill_'s checks and conversion, in its order and wording
    TORCH_CHECK(mask.scalar_type() == at::kBool,
                "masked_fill_ only supports boolean masks, but got mask with dtype ", mask.dtype());
    if (at::has_internal_overlap(self) == at::MemOverlap::Yes)
      TORCH_WARN(
          "Use of masked_fill_ on expanded tensors is deprecated. "
          "Please clone() the tensor before performing this operation. "
          "This also applies to advanced indexing e.g. tensor[mask] = scalar");
    at::assert_no_partial_overlap(self, mask);
    scalar_bytes(values.item(), self.scalar_type(), a.value);
    a.has_value = true;
  } else {
    at::assert_no_overlap(self, values);
    for (const std::optional<at::Tensor>& i : indices)
      if (i.has_value() && i->defined()) at::assert_no_overlap(self, *i);
  }

  const Terms t = expand_terms(self, indices);
  std::vector<std::vector<int64_t>> ops;
  const std::vector<int64_t> sizes = build_views(self, t, "index_put_", &a, &ops);
  for (int j = 0; j < a.k; ++j)
    TORCH_CHECK_INDEX(a.term_size[j] != 0 || c10::multiply_integers(t.bshape) == 0,
                      "index is out of bounds for dimension with size 0");
  if (!masked) {
    TORCH_CHECK(at::is_expandable_to(value.sizes(), sizes),
                "shape mismatch: value tensor of shape ", value.sizes(),
                " cannot be broadcast to indexing result of shape ", at::IntArrayRef(sizes));
    TORCH_CHECK(value.scalar_type() == self.scalar_type(),
                "Index put requires the source and destination dtypes match, got ",
                self.scalar_type(), " for the destination and ", value.scalar_type(),
                " for the source.");
  }
  if (sizes.size() > static_cast<size_t>(kMaxRank)) return fallback(Fallback::kRank);
  if (c10::multiply_integers(sizes) == 0) return Prep::kDone;

  for (const at::Tensor& i : t.per_dim)
    if (i.defined()) call->keep.push_back(i);
  if (masked) {  // the value's bytes are in a.value; src gives the iteration shape only
    a.src = a.target = to_view(self, "index_put_", "self", /*writable=*/true);
    a.src.rank = static_cast<int>(sizes.size());
    for (int d = 0; d < a.src.rank; ++d) {
      a.src.sizes[d] = sizes[static_cast<size_t>(d)];
      a.src.strides[d] = 0;
    }
  } else {
    const at::Tensor src = value.expand(sizes);  // a view: stride 0 along the broadcast dims
    call->keep.push_back(src);
    a.src = to_view(src, "index_put_", "values");
  }
  if (scalar_value) {
    a.has_value = true;
    std::memcpy(a.value, value.const_data_ptr(), value.element_size());
  }
  a.target = to_view(self, "index_put_", "self", /*writable=*/true);
  a.self.data = a.target.data;
  a.desc = IndexedOpDesc{OpCode::kIndexPut, IndexRole::kWrite, c, true, /*wraps=*/true};
  a.deterministic = deterministic;
  promote_all(&a, true);
  const Prep p = plan_call(call->args.desc.op, self, call);
  if (p == Prep::kRun)
    count_layouts(stats, self, telling_index(t), &values, self, !call->plan.loop.fits_int32);
  return p;
}

namespace {

// take / put: one flat index over its own shape; self seen with stride 0 everywhere (the
// position comes from the index, unravelled over `target`, self's own view).
void flat_views(const at::Tensor& self, const at::Tensor& index, const char* name, bool write,
                IndexKArgs* a) {
  a->k = 1;
  a->mode = IndexMode::kUnravel;
  a->index[0] = to_view(index, name, "index");
  a->target = to_view(self, name, "self", write);
  a->self = a->index[0];
  a->self.dtype = a->target.dtype;
  a->self.data = a->target.data;
  for (int d = 0; d < a->self.rank; ++d) a->self.strides[d] = 0;
  promote_scalar(&a->target);
}

}  // namespace

Prep prepare_take(const at::Tensor& self, const at::Tensor& index, at::Tensor& out, bool out_given,
                  IndexKCall* call) {
  OpStats& stats = op_stats(OpCode::kTake);
  Fallback why = Fallback::kNumFallbacks;
  if (!dtype_ok(OpCode::kTake, self, Combine::kCopy, &why) || index.dim() > kMaxRank ||
      self.dim() > kMaxRank) {
    stats.fall_back(why != Fallback::kNumFallbacks ? why : Fallback::kRank);
    return Prep::kFallback;
  }
  if (!out_given) out = at::empty(index.sizes(), self.options());  // ATen's take, then take_out
  // take_out's checks, in its order and wording
  TORCH_CHECK(index.scalar_type() == at::kLong,
              "take(): Expected a long tensor for index, but got ", index.scalar_type());
  TORCH_CHECK(self.scalar_type() == out.scalar_type(),
              "take(): self and out expected to have the same dtype, but got self.dtype = ",
              self.scalar_type(), " and out.dtype = ", out.scalar_type());
  TORCH_CHECK_INDEX(!(self.numel() == 0 && index.numel() != 0),
                    "take(): tried to take from an empty tensor");
  at::assert_no_internal_overlap(out);
  at::assert_no_overlap(out, index);
  at::assert_no_overlap(out, self);
  // the iterator resizes out to the index's shape, laid out as the index is
  resize_like_iter(out, index.sizes(),
                   iter_out_strides(index.sizes(),
                                    {iter_strides(index.sizes(), index.strides(), index.sizes())}));
  if (index.numel() == 0) return Prep::kDone;
  IndexKArgs& a = call->args;
  flat_views(self, index, "take", false, &a);
  a.out = to_view(out, "take", "out", /*writable=*/true);
  a.desc = IndexedOpDesc{OpCode::kTake, IndexRole::kRead, Combine::kCopy, true, /*wraps=*/true};
  promote_all(&a, false);
  const Prep p = plan_call(call->args.desc.op, self, call);
  if (p == Prep::kRun) count_layouts(stats, self, index, nullptr, out, !call->plan.loop.fits_int32);
  return p;
}

Prep prepare_put(const at::Tensor& self, const at::Tensor& index, const at::Tensor& source,
                 bool accumulate, IndexKCall* call) {
  OpStats& stats = op_stats(OpCode::kPut);
  const bool deterministic = deterministic_call(stats);
  const Combine c = accumulate ? Combine::kAdd : Combine::kCopy;
  Fallback why = Fallback::kNumFallbacks;
  if (!dtype_ok(OpCode::kPut, self, c, &why) || index.dim() > kMaxRank || self.dim() > kMaxRank) {
    stats.fall_back(why != Fallback::kNumFallbacks ? why : Fallback::kRank);
    return Prep::kFallback;
  }
  // put_'s checks, in its order and wording
  // No alert for deterministic mode where ATen raises one (put_ without accumulate, and on CUDA
  // with it): ours is deterministic on both devices (index_k.h); ATen's fallback raises its own.
  TORCH_CHECK(index.scalar_type() == at::kLong,
              "put_(): Expected a long tensor for index, but got ", index.scalar_type());
  TORCH_CHECK(self.scalar_type() == source.scalar_type(),
              "put_(): self and source expected to have the same dtype, but got self.dtype = ",
              self.scalar_type(), " and source.dtype = ", source.scalar_type());
  TORCH_CHECK_INDEX(source.numel() == index.numel(),
                    "put_(): Expected source and index to have the same number of elements, but "
                    "got source.numel() = ",
                    source.numel(), ", index.numel() = ", index.numel());
  TORCH_CHECK_INDEX(!(self.numel() == 0 && index.numel() != 0),
                    "put_(): Tried to put elements into an empty tensor");
  at::assert_no_internal_overlap(self);
  at::assert_no_overlap(self, index);
  at::assert_no_overlap(self, source);
  if (index.numel() == 0) return Prep::kDone;

  // source over the index's shape: itself, or a view of it (pairs stay in row-major order)
  at::Tensor src = source;
  if (source.sizes() != index.sizes()) {
    const auto st = at::detail::computeStride(source.sizes(), source.strides(), index.sizes());
    if (!st.has_value()) {
      stats.fall_back(Fallback::kNeedsCopy);
      return Prep::kFallback;
    }
    src = source.as_strided(index.sizes(), *st, source.storage_offset());
    call->keep.push_back(src);
  }
  IndexKArgs& a = call->args;
  flat_views(self, index, "put_", true, &a);
  a.src = to_view(src, "put_", "source");
  a.desc = IndexedOpDesc{OpCode::kPut, IndexRole::kWrite, c, true, /*wraps=*/true};
  a.deterministic = deterministic;
  promote_all(&a, true);
  const Prep p = plan_call(call->args.desc.op, self, call);
  if (p == Prep::kRun)
    count_layouts(stats, self, index, &source, self, !call->plan.loop.fits_int32);
  return p;
}

void throw_adv_cpu(const IndexKArgs& a, Status st, const ErrorDetail& e) {
  if (st == Status::kIndexOutOfRange) {
    if (a.mode == IndexMode::kUnravel)  // cpu_take_put_kernel's wording
      TORCH_CHECK_INDEX(false, "out of range: tried to access index ", e.value, " on a tensor of ",
                        e.hi, " elements.");
    // ATen names the index tensor's place among the indexed dims, not self's dim (but
    // index_fill_, whose one index addresses `dim`, names `dim`)
    int64_t j = 0;
    while (j + 1 < a.k && a.term_dim[j] != e.dim) ++j;
    if (a.desc.op == OpCode::kIndexFill) j = e.dim;
    TORCH_CHECK_INDEX(false, "index ", e.value, " is out of bounds for dimension ", j,
                      " with size ", e.hi);
  }
  throw_status(op_name(a.desc.op), "cpu", st, e);
}

namespace {

// ATen's CPU kernels for the calls the core does not take (ATen's whole op: checks included).
struct CpuKernels {
  using T = at::Tensor;
  static T index(const T& self, const OptTensors& indices) { return at::cpu::index(self, indices); }
  static T& index_out(T& out, const T& self, const OptTensors& indices) {
    return at::cpu::index_out(out, self, indices);
  }
  static T& index_put_(T& self, const OptTensors& indices, const T& values, bool accumulate,
                       bool unsafe) {
    return at::cpu::_index_put_impl_(self, indices, values, accumulate, unsafe);
  }
  static T take(const T& self, const T& index) { return at::cpu::take(self, index); }
  static T& take_out(T& out, const T& self, const T& index) {
    return at::cpu::take_out(out, self, index);
  }
  static T& put_(T& self, const T& index, const T& source, bool accumulate) {
    return at::cpu::put_(self, index, source, accumulate);
  }
  static T& index_fill_(T& self, int64_t dim, const T& index, const c10::Scalar& value) {
    return at::cpu::index_fill_(self, dim, index, value);
  }
  static T& index_fill_(T& self, int64_t dim, const T& index, const T& value) {
    return at::cpu::index_fill_(self, dim, index, value);
  }
};

using CpuAdvIndex = AdvIndexOverloads<CpuBackend, CpuKernels>;

[[maybe_unused]] const int kCpuAdvIndex =
    CpuAdvIndex::register_all(c10::DispatchKey::CPU, __FILE__);

}  // namespace
}  // namespace stridewise::adapter
