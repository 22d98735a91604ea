// index_fill_ (int_Scalar, int_Tensor) on the k-index core (index_adv.h): ATen's checks in its
// order and wording, then one order-free write (index_k.h) over ATen's own operands:
//
//   self restrided onto self's shape with `dim` resized to index.numel() and stride 0 on `dim`
//   index seen with that shape: index.stride(0) on `dim`, 0 on every other dim
//   term 0: index values in [-n, n) along `dim` (n = self.size(dim)), wrapped (wraps = true)
//   the value: bytes in self's dtype (a Scalar, ATen's conversion), or a 0-dim tensor on self's
//   device read where it lies (no host synchronization)
//
// Nothing is copied, and a bad index writes nothing (ATen writes the elements before it).
// The functional and out= overloads do what ATen's composites do (a clone of self, then
// index_fill_; out= resized and copied: index_adv.h); Dimname overloads resolve the name and
// call them.
//
// ATen's kernel runs a call (counted "fallback") only where ATen's own semantics decide it:
//  - a dtype ATen's index_fill kernel does not take (uint16/32/64, float8, ...): its
//    NotImplementedError, after its own checks;
//  - an index on another device than self (AdvIndexOverloads::ours): ATen's TensorIterator
//    raises;
//  - more than kMaxRank dims.
#include <ATen/Context.h>
#include <ATen/MemoryOverlap.h>
#include <ATen/WrapDimUtils.h>
#include <c10/util/Exception.h>
#include <c10/util/accumulate.h>

#include <cstring>
#include <vector>

#include "index_adv.h"
#include "index_adv_views.h"

namespace stridewise::adapter {
namespace {

// The dtypes ATen's CPU and CUDA index_fill kernels dispatch (AT_ALL_TYPES_AND_COMPLEX, Half,
// BFloat16, Bool, ComplexHalf).
bool aten_fills(c10::ScalarType t) {
  switch (t) {
    case at::kBool:
    case at::kByte:
    case at::kChar:
    case at::kShort:
    case at::kInt:
    case at::kLong:
    case at::kHalf:
    case at::kBFloat16:
    case at::kFloat:
    case at::kDouble:
    case at::kComplexHalf:
    case at::kComplexFloat:
    case at::kComplexDouble:
      return true;
    default:
      return false;
  }
}

}  // namespace

Prep prepare_index_fill(at::Tensor& self, int64_t dim, const at::Tensor& index,
                        const FillValue& value, IndexKCall* call) {
  OpStats& stats = op_stats(OpCode::kIndexFill);
  if (!aten_fills(self.scalar_type()) || self.dim() > kMaxRank) {  // ATen's call, checks and all
    stats.fall_back(self.dim() > kMaxRank ? Fallback::kRank : Fallback::kDtypeRejected);
    return Prep::kFallback;
  }
  const bool deterministic = deterministic_call(stats);
  // index_fill_'s checks, in its order and wording
  TORCH_CHECK_INDEX(index.scalar_type() == at::kLong,
                    "index_fill_(): Expected dtype int64 for index.");
  at::assert_no_overlap(self, index);
  if (at::has_internal_overlap(self) == at::MemOverlap::Yes) {
    TORCH_WARN(
        "Use of index_fill_ on expanded tensors is deprecated. "
        "Please clone() the tensor before performing this operation. "
        "This also applies to advanced indexing e.g. tensor[mask] = scalar");
  }
  TORCH_CHECK(value.scalar == nullptr || self.is_complex() || !value.scalar->isComplex(),
              "index_fill_(): Converting complex Scalar to non-complex type is not supported");
  const bool scalar_self = self.dim() == 0;  // ATen fills self.unsqueeze(-1)
  const int64_t r = scalar_self ? 1 : self.dim();
  dim = at::maybe_wrap_dim(dim, r);
  TORCH_CHECK(index.dim() <= 1, "Index has to be a vector/scalar");

  std::vector<int64_t> sizes = scalar_self ? std::vector<int64_t>{1} : self.sizes().vec();
  std::vector<int64_t> strides = scalar_self ? std::vector<int64_t>{1} : self.strides().vec();
  const int64_t n = sizes[dim], stride = strides[dim], m = index.numel();
  sizes[dim] = m;
  strides[dim] = 0;
  // ATen restrides self with as_strided, whose storage check raises for an empty self (its
  // storage holds no element) met by a non-empty index: the same call, the same error.
  if (self.numel() == 0 && c10::multiply_integers(sizes) != 0)
    (scalar_self ? self.unsqueeze(-1) : self).as_strided(sizes, strides);

  IndexKArgs& a = call->args;
  a.desc = IndexedOpDesc{OpCode::kIndexFill, IndexRole::kWrite, Combine::kCopy, true,
                         /*wraps=*/true};
  a.deterministic = deterministic;
  if (value.scalar != nullptr) {  // ATen's Scalar::to<scalar_t>, with its overflow error
    scalar_bytes(*value.scalar, self.scalar_type(), a.value);
    a.has_value = true;
  }
  if (c10::multiply_integers(sizes) == 0) return Prep::kDone;

  a.k = 1;
  a.target = to_view(self, "index_fill_", "self", /*writable=*/true);
  promote_scalar(&a.target);
  a.self = restrided(a.target, sizes, strides);
  std::vector<int64_t> index_strides(r, 0);
  index_strides[dim] = index.dim() > 0 ? index.stride(0) : 1;
  a.index[0] = restrided(to_view(index, "index_fill_", "index"), sizes, index_strides);
  a.term_size[0] = n;
  a.term_stride[0] = stride;
  a.term_dim[0] = dim;
  const std::vector<int64_t> zeros(r, 0);
  // The value's view only gives the shape (has_value), or is the value tensor's one element
  // at every position.
  a.src = value.tensor != nullptr
              ? restrided(to_view(*value.tensor, "index_fill_", "value"), sizes, zeros)
              : restrided(a.self, sizes, zeros);
  if (value.tensor == nullptr) a.src.data = nullptr;
  const Prep p = plan_call(OpCode::kIndexFill, self, call);
  if (p == Prep::kRun) {
    count_layouts(stats, self, index, value.tensor, self, !call->plan.loop.fits_int32);
  }
  return p;
}

}  // namespace stridewise::adapter
