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
//  - index_put_ on a self with internal overlap (ATen warns, then writes racily), and
//    index_put_ of one CPU value through a mask without accumulate (ATen's masked_fill_);
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
#include <ATen/ops/put_cpu_dispatch.h>
#include <ATen/ops/take_cpu_dispatch.h>
#include <c10/util/Exception.h>
#include <c10/util/accumulate.h>

#include <algorithm>
#include <numeric>
#include <sstream>
#include <string>
#include <tuple>

#include "backends.h"

namespace stridewise::adapter {

OpStats& adv_stats(OpCode op) {
  static OpStats& index = register_op("index");
  static OpStats& index_put = register_op("index_put");
  static OpStats& take = register_op("take");
  static OpStats& put = register_op("put");
  switch (op) {
    case OpCode::kIndexPut:
      return index_put;
    case OpCode::kTake:
      return take;
    case OpCode::kPut:
      return put;
    default:
      return index;
  }
}

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

// Registers the four ops as supported when the library is loaded.
[[maybe_unused]] const OpStats& kAdvRegistered = adv_stats(OpCode::kIndex);

// The dtypes the core computes for these ops: those with arithmetic (as the dim-indexed ops).
bool core_dtype(const at::Tensor& t, Combine c) {
  DType dt = DType::kFloat32;
  return to_dtype(t.scalar_type(), &dt) && index_k_supports(dt, Combine::kAdd) &&
         index_k_supports(dt, c);
}

std::vector<int64_t> contiguous_strides(at::IntArrayRef sizes) {
  std::vector<int64_t> st(sizes.size());
  int64_t acc = 1;
  for (size_t d = sizes.size(); d-- > 0;) {
    st[d] = acc;
    acc *= std::max<int64_t>(sizes[d], 1);
  }
  return st;
}

// c10's non-overlapping-and-dense and contiguity rules, on sizes and strides.
bool non_overlapping_dense(at::IntArrayRef sizes, at::IntArrayRef strides) {
  std::vector<size_t> perm(sizes.size());
  std::iota(perm.begin(), perm.end(), 0);
  std::sort(perm.begin(), perm.end(), [&](size_t a, size_t b) {
    if (sizes[a] < 2) return false;
    if (sizes[b] < 2) return true;
    return strides[a] < strides[b];
  });
  int64_t expect = 1;
  for (size_t d : perm) {
    if (sizes[d] < 2) return true;
    if (strides[d] != expect) return false;
    expect *= sizes[d];
  }
  return true;
}

bool contiguous(at::IntArrayRef sizes, at::IntArrayRef strides) {
  int64_t expect = 1;
  for (size_t d = sizes.size(); d-- > 0;) {
    if (sizes[d] == 0) return true;
    if (sizes[d] == 1) continue;
    if (strides[d] != expect) return false;
    expect *= sizes[d];
  }
  return true;
}

// The strides ATen's TensorIterator gives a new output of `shape` over inputs with these
// strides (compute_strides, reorder_dimensions, then the allocation); empty: contiguous.
std::vector<int64_t> iter_out_strides(at::IntArrayRef shape,
                                      const std::vector<std::vector<int64_t>>& ops) {
  const int n = static_cast<int>(shape.size());
  if (n <= 1) return {};
  const auto stride = [&](const std::vector<int64_t>& op, int d) { return op[d]; };
  const auto should_swap = [&](int d0, int d1) {
    for (const std::vector<int64_t>& op : ops) {
      const int64_t s0 = stride(op, d0), s1 = stride(op, d1);
      if (s0 == 0 || s1 == 0) continue;
      if (s0 < s1) return -1;
      if (s0 > s1) return 1;
      if (shape[d0] > shape[d1]) return 1;
    }
    return 0;
  };
  std::vector<int> perm(n);
  for (int i = 0; i < n; ++i) perm[i] = n - 1 - i;
  for (int i = 1; i < n; ++i) {
    int d1 = i;
    for (int d0 = i - 1; d0 >= 0; --d0) {
      const int c = should_swap(perm[d0], perm[d1]);
      if (c > 0) {
        std::swap(perm[d0], perm[d1]);
        d1 = d0;
      } else if (c < 0) {
        break;
      }
    }
  }
  bool inverted = true;
  for (int i = 0; i < n; ++i) inverted = inverted && perm[i] == n - 1 - i;
  if (inverted) return {};
  std::vector<int64_t> out(n);
  int64_t acc = 1;
  for (int i = 0; i < n; ++i) {
    out[perm[i]] = acc;
    acc *= shape[perm[i]];
  }
  return out;
}

// An input's strides as TensorIterator's compute_strides sees them: 0 along a broadcast dim.
std::vector<int64_t> iter_strides(at::IntArrayRef op_sizes, at::IntArrayRef op_strides,
                                  at::IntArrayRef shape) {
  std::vector<int64_t> st(shape.size(), 0);
  const size_t off = shape.size() - op_sizes.size();
  for (size_t d = 0; d < op_sizes.size(); ++d)
    st[off + d] = (op_sizes[d] == 1 && shape[off + d] != 1) ? 0 : op_strides[d];
  return st;
}

// ---- index tensors -> views --------------------------------------------------------------------

// ATen's index list after make_info's expansion: one entry per dim of self (undefined: not
// indexed), a mask replaced by its nonzero() columns, and the broadcast shape.
struct Terms {
  std::vector<at::Tensor> per_dim;
  std::vector<int64_t> bshape;
  int k = 0;
};

// The index tensors the core would take, counted before any mask's nonzero(): a mask over m
// dims is m of them.
int count_terms(const OptTensors& indices) {
  int k = 0;
  for (const std::optional<at::Tensor>& i : indices) {
    if (!i.has_value() || !i->defined()) continue;
    const auto st = i->scalar_type();
    k += (st == at::kBool || st == at::kByte) ? static_cast<int>(i->dim()) : 1;
  }
  return k;
}

// make_info's checks in its order and wording, and the expansion. A mask's nonzero() costs the
// host synchronization ATen's own indexing pays (its result's size is data-dependent); no other
// synchronization is added.
Terms expand_terms(const at::Tensor& self, const OptTensors& indices) {
  at::native::checkIndexTensorTypes(indices, /*allow_int=*/true);
  Terms t;
  t.per_dim = at::native::expandTensors(self, indices);
  std::vector<int64_t> shape;
  bool first = true;
  try {
    for (const at::Tensor& i : t.per_dim) {
      if (!i.defined()) continue;
      shape = first ? i.sizes().vec() : at::infer_size(shape, i.sizes());
      first = false;
    }
  } catch (const std::exception&) {
    std::ostringstream os;
    bool sep = false;
    for (const at::Tensor& i : t.per_dim) {
      if (!i.defined()) continue;
      os << (sep ? ", " : "") << i.sizes();
      sep = true;
    }
    TORCH_CHECK_INDEX(false, "shape mismatch: indexing tensors could not be broadcast together",
                      " with shapes ", os.str());
  }
  t.bshape = shape;
  t.per_dim.resize(std::max<size_t>(t.per_dim.size(), self.dim()));
  for (const at::Tensor& i : t.per_dim) t.k += i.defined() ? 1 : 0;
  return t;
}

// Builds self restrided onto the result's shape, each index over it and the terms (the
// restrided views both index and index_put_ run over), and returns the result's sizes.
// ATen's placement: adjacent indexed dims -> the broadcast dims replace them in place;
// separated -> the broadcast dims first, then the other dims in order. `ops` receives the
// operands' strides as ATen's TensorIterator sees them (for the result's layout).
std::vector<int64_t> build_views(const at::Tensor& self, const Terms& t, const char* name,
                                 IndexKArgs* a, std::vector<std::vector<int64_t>>* ops) {
  const int64_t n = self.dim();
  std::vector<int64_t> dims;  // the indexed dims, in order
  for (int64_t d = 0; d < n; ++d)
    if (t.per_dim[d].defined()) dims.push_back(d);
  const bool adjacent = dims.back() - dims.front() + 1 == static_cast<int64_t>(dims.size());
  const int64_t nb = static_cast<int64_t>(t.bshape.size());
  const int64_t pos = adjacent ? dims.front() : 0;  // where the broadcast dims start
  std::vector<int64_t> sizes, self_strides;
  for (int64_t d = 0; d < n; ++d) {
    if (d == pos && adjacent) {
      sizes.insert(sizes.end(), t.bshape.begin(), t.bshape.end());
      self_strides.insert(self_strides.end(), nb, 0);
    }
    if (t.per_dim[d].defined()) continue;
    sizes.push_back(self.size(d));
    self_strides.push_back(self.stride(d));
  }
  if (!adjacent) {
    sizes.insert(sizes.begin(), t.bshape.begin(), t.bshape.end());
    self_strides.insert(self_strides.begin(), nb, 0);
  }
  const int r = static_cast<int>(sizes.size());
  if (r > kMaxRank) return sizes;  // the caller falls back
  a->self = to_view(self, name, "self");
  a->self.rank = r;
  for (int d = 0; d < r; ++d) {
    a->self.sizes[d] = sizes[d];
    a->self.strides[d] = self_strides[d];
  }
  ops->push_back(self_strides);
  a->k = static_cast<int>(dims.size());
  const bool cuda = self.is_cuda();
  std::vector<std::vector<int64_t>> index_ops;
  bool same = true;
  for (int j = 0; j < a->k; ++j) {
    const at::Tensor& idx = t.per_dim[dims[j]];
    StridedView& v = a->index[j];
    v = to_view(idx, name, "indices");
    v.rank = r;
    std::vector<int64_t> bst(nb, 0);  // idx broadcast to bshape
    for (int64_t b = 0; b < nb; ++b) {
      const int64_t od = b - (nb - idx.dim());
      bst[b] = (od < 0 || idx.size(od) == 1) ? 0 : idx.stride(od);
    }
    for (int d = 0; d < r; ++d) {
      v.sizes[d] = sizes[d];
      v.strides[d] = (d >= pos && d < pos + nb) ? bst[d - pos] : 0;
    }
    a->term_size[j] = self.size(dims[j]);
    a->term_stride[j] = self.stride(dims[j]);
    a->term_dim[j] = dims[j];
    // The strides of ATen's copy of this index (make_info, AdvancedIndex): broadcast by
    // expand(), int32 converted by to(kLong) (a dense layout kept), reshaped to the result's rank.
    auto geo = at::inferExpandGeometry_dimvector(idx.sizes(), idx.strides(), t.bshape);
    std::vector<int64_t> ist(geo.strides.begin(), geo.strides.end());
    if (idx.scalar_type() == at::kInt && !non_overlapping_dense(t.bshape, ist))
      ist = contiguous_strides(t.bshape);
    std::vector<int64_t> shape(r, 1);
    std::copy(t.bshape.begin(), t.bshape.end(), shape.begin() + pos);
    const auto viewed = at::detail::computeStride(t.bshape, ist, shape);
    ist = viewed.has_value() ? *viewed : contiguous_strides(shape);
    if (!index_ops.empty() && ist != index_ops.front()) same = false;
    index_ops.push_back(ist);
  }
  std::vector<int64_t> shape(r, 1);
  std::copy(t.bshape.begin(), t.bshape.end(), shape.begin() + pos);
  for (std::vector<int64_t>& ist : index_ops) {
    // CUDA: all made contiguous() unless their strides agree
    if (cuda && a->k >= 2 && !same && !contiguous(shape, ist)) ist = contiguous_strides(shape);
    ops->push_back(iter_strides(shape, ist, sizes));
  }
  return sizes;
}

// The index tensor stats() describes a call by: the first expanded one, else the first
// non-contiguous one, else the first.
const at::Tensor& telling_index(const Terms& t) {
  const at::Tensor* first = nullptr;
  const at::Tensor* noncontig = nullptr;
  for (const at::Tensor& i : t.per_dim) {
    if (!i.defined()) continue;
    if (is_expanded(i)) return i;
    if (first == nullptr) first = &i;
    if (noncontig == nullptr && !i.is_contiguous()) noncontig = &i;
  }
  return noncontig != nullptr ? *noncontig : *first;
}

AdvPrep make_plan(IndexKCall* call, OpStats& stats, const at::Tensor& self) {
  ErrorDetail err;
  const Status st = plan_index_k(call->args, &call->plan, &err);
  if (st == Status::kUnsupported) {
    stats.bump(kFallback);
    return AdvPrep::kFallback;
  }
  if (st != Status::kOk)
    throw_status(op_name(call->args.desc.op), self.is_cuda() ? "cuda" : "cpu", st, err);
  if (call->plan.vec > 1) stats.bump(kVectorized);
  return AdvPrep::kRun;
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

AdvPrep prepare_index(const at::Tensor& self, const OptTensors& indices, at::Tensor& out,
                      bool out_given, IndexKCall* call) {
  OpStats& stats = adv_stats(OpCode::kIndex);
  too_many(self, indices.size());
  const int k = count_terms(indices);
  if (!core_dtype(self, Combine::kCopy) || k < 1 || k > kMaxIndexTerms || self.dim() > kMaxRank) {
    stats.bump(kFallback);
    return AdvPrep::kFallback;
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
    stats.bump(kFallback);
    return AdvPrep::kFallback;
  }
  const std::vector<int64_t> strides = iter_out_strides(sizes, ops);
  if (out_given) {
    resize_like_iter(out, sizes, strides);
  } else {
    out = strides.empty() ? at::empty(sizes, self.options())
                          : at::empty_strided(sizes, strides, self.options());
  }
  if (out.numel() == 0) return AdvPrep::kDone;
  for (const at::Tensor& i : t.per_dim)
    if (i.defined()) call->keep.push_back(i);
  a.out = to_view(out, "index", "out", /*writable=*/true);
  a.desc = IndexedOpDesc{OpCode::kIndex, IndexRole::kRead, Combine::kCopy, true};
  promote_all(&a, false);
  const AdvPrep p = make_plan(call, stats, self);
  if (p == AdvPrep::kRun)
    count_layouts(stats, self, telling_index(t), nullptr, out, !call->plan.loop.fits_int32);
  return p;
}

AdvPrep prepare_index_put(const at::Tensor& self, const OptTensors& indices,
                          const at::Tensor& values, bool accumulate, IndexKCall* call) {
  OpStats& stats = adv_stats(OpCode::kIndexPut);
  const bool deterministic = at::globalContext().deterministicAlgorithms();
  if (deterministic) stats.bump(kDeterministic);
  too_many(self, indices.size());
  const int k = count_terms(indices);
  const Combine c = accumulate ? Combine::kAdd : Combine::kCopy;
  const auto fallback = [&] {
    stats.bump(kFallback);
    return AdvPrep::kFallback;
  };
  // ATen warns about an expanded self and writes it anyway: its call, its warning
  if (at::has_internal_overlap(self) == at::MemOverlap::Yes) return fallback();
  if (!accumulate && std::get<0>(at::native::canDispatchToMaskedFill(self, indices, values)))
    return fallback();  // one CPU value through a mask: ATen's masked_fill_
  if (!core_dtype(self, c) || k < 1 || k > kMaxIndexTerms || self.dim() > kMaxRank)
    return fallback();
  at::Tensor value = values;
  if (values.device() != self.device() && values.numel() == 1 && values.dim() == 0) {
    value = values.to(self.device());  // ATen's move of a Python scalar's value; one element
    stats.bump(kCopies);
    call->keep.push_back(value);
  }
  at::assert_no_overlap(self, values);
  for (const std::optional<at::Tensor>& i : indices)
    if (i.has_value() && i->defined()) at::assert_no_overlap(self, *i);

  const Terms t = expand_terms(self, indices);
  IndexKArgs& a = call->args;
  std::vector<std::vector<int64_t>> ops;
  const std::vector<int64_t> sizes = build_views(self, t, "index_put_", &a, &ops);
  for (int j = 0; j < a.k; ++j)
    TORCH_CHECK_INDEX(a.term_size[j] != 0 || c10::multiply_integers(t.bshape) == 0,
                      "index is out of bounds for dimension with size 0");
  TORCH_CHECK(at::is_expandable_to(value.sizes(), sizes), "shape mismatch: value tensor of shape ",
              value.sizes(), " cannot be broadcast to indexing result of shape ",
              at::IntArrayRef(sizes));
  TORCH_CHECK(value.scalar_type() == self.scalar_type(),
              "Index put requires the source and destination dtypes match, got ",
              self.scalar_type(), " for the destination and ", value.scalar_type(),
              " for the source.");
  if (sizes.size() > static_cast<size_t>(kMaxRank)) return fallback();
  if (c10::multiply_integers(sizes) == 0) return AdvPrep::kDone;

  const at::Tensor src = value.expand(sizes);  // a view: stride 0 along the broadcast dims
  call->keep.push_back(src);
  for (const at::Tensor& i : t.per_dim)
    if (i.defined()) call->keep.push_back(i);
  a.src = to_view(src, "index_put_", "values");
  a.target = to_view(self, "index_put_", "self", /*writable=*/true);
  a.self.data = a.target.data;
  a.desc = IndexedOpDesc{OpCode::kIndexPut, IndexRole::kWrite, c, true};
  a.deterministic = deterministic;
  promote_all(&a, true);
  const AdvPrep p = make_plan(call, stats, self);
  if (p == AdvPrep::kRun)
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

AdvPrep prepare_take(const at::Tensor& self, const at::Tensor& index, at::Tensor& out,
                     bool out_given, IndexKCall* call) {
  OpStats& stats = adv_stats(OpCode::kTake);
  if (!core_dtype(self, Combine::kCopy) || index.dim() > kMaxRank || self.dim() > kMaxRank) {
    stats.bump(kFallback);
    return AdvPrep::kFallback;
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
  if (index.numel() == 0) return AdvPrep::kDone;
  IndexKArgs& a = call->args;
  flat_views(self, index, "take", false, &a);
  a.out = to_view(out, "take", "out", /*writable=*/true);
  a.desc = IndexedOpDesc{OpCode::kTake, IndexRole::kRead, Combine::kCopy, true};
  promote_all(&a, false);
  const AdvPrep p = make_plan(call, stats, self);
  if (p == AdvPrep::kRun)
    count_layouts(stats, self, index, nullptr, out, !call->plan.loop.fits_int32);
  return p;
}

AdvPrep prepare_put(const at::Tensor& self, const at::Tensor& index, const at::Tensor& source,
                    bool accumulate, IndexKCall* call) {
  OpStats& stats = adv_stats(OpCode::kPut);
  const bool deterministic = at::globalContext().deterministicAlgorithms();
  if (deterministic) stats.bump(kDeterministic);
  const Combine c = accumulate ? Combine::kAdd : Combine::kCopy;
  if (!core_dtype(self, c) || index.dim() > kMaxRank || self.dim() > kMaxRank) {
    stats.bump(kFallback);
    return AdvPrep::kFallback;
  }
  // put_'s checks, in its order and wording
  if (!accumulate || self.is_cuda()) at::globalContext().alertNotDeterministic("put_");
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
  if (index.numel() == 0) return AdvPrep::kDone;

  // source over the index's shape: itself, or a view of it (pairs stay in row-major order)
  at::Tensor src = source;
  if (source.sizes() != index.sizes()) {
    const auto st = at::detail::computeStride(source.sizes(), source.strides(), index.sizes());
    if (!st.has_value()) {
      stats.bump(kFallback);
      return AdvPrep::kFallback;
    }
    src = source.as_strided(index.sizes(), *st, source.storage_offset());
    call->keep.push_back(src);
  }
  IndexKArgs& a = call->args;
  flat_views(self, index, "put_", true, &a);
  a.src = to_view(src, "put_", "source");
  a.desc = IndexedOpDesc{OpCode::kPut, IndexRole::kWrite, c, true};
  a.deterministic = deterministic;
  promote_all(&a, true);
  const AdvPrep p = make_plan(call, stats, self);
  if (p == AdvPrep::kRun)
    count_layouts(stats, self, index, &source, self, !call->plan.loop.fits_int32);
  return p;
}

void throw_adv_cpu(const IndexKArgs& a, Status st, const ErrorDetail& e) {
  if (st == Status::kIndexOutOfRange) {
    if (a.mode == IndexMode::kUnravel)  // cpu_take_put_kernel's wording
      TORCH_CHECK_INDEX(false, "out of range: tried to access index ", e.value, " on a tensor of ",
                        e.hi, " elements.");
    // ATen names the index tensor's place among the indexed dims, not self's dim
    int j = 0;
    while (j + 1 < a.k && a.term_dim[j] != e.dim) ++j;
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
};

using CpuAdvIndex = AdvIndexOverloads<CpuBackend, CpuKernels>;

[[maybe_unused]] const int kCpuAdvIndex =
    CpuAdvIndex::register_all(c10::DispatchKey::CPU, __FILE__);

}  // namespace
}  // namespace stridewise::adapter
