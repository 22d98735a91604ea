// Advanced indexing's views (index_adv_views.h): ATen's index list turned into the k-index
// core's restrided views, and the layout ATen's TensorIterator gives a new result.
#include "index_adv_views.h"

#include <ATen/ExpandUtils.h>
#include <ATen/TensorUtils.h>
#include <ATen/native/IndexingUtils.h>
#include <c10/util/Exception.h>

#include <algorithm>
#include <numeric>
#include <sstream>
#include <string>

namespace stridewise::adapter {
namespace {

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

}  // namespace

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

std::vector<int64_t> iter_strides(at::IntArrayRef op_sizes, at::IntArrayRef op_strides,
                                  at::IntArrayRef shape) {
  std::vector<int64_t> st(shape.size(), 0);
  const size_t off = shape.size() - op_sizes.size();
  for (size_t d = 0; d < op_sizes.size(); ++d)
    st[off + d] = (op_sizes[d] == 1 && shape[off + d] != 1) ? 0 : op_strides[d];
  return st;
}

// ---- index tensors -> views --------------------------------------------------------------------

int count_terms(const OptTensors& indices) {
  int k = 0;
  for (const std::optional<at::Tensor>& i : indices) {
    if (!i.has_value() || !i->defined()) continue;
    const auto st = i->scalar_type();
    k += (st == at::kBool || st == at::kByte) ? static_cast<int>(i->dim()) : 1;
  }
  return k;
}

// A mask's nonzero() (in expandTensors) costs the host synchronization ATen's own indexing
// pays: its result's size is data-dependent. No other synchronization is added.
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

StridedView restrided(StridedView v, const std::vector<int64_t>& sizes,
                      const std::vector<int64_t>& strides) {
  v.rank = static_cast<int>(sizes.size());
  for (int d = 0; d < v.rank; ++d) {
    v.sizes[d] = sizes[d];
    v.strides[d] = strides[d];
  }
  return v;
}

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
  a->self = restrided(to_view(self, name, "self"), sizes, self_strides);
  ops->push_back(self_strides);
  a->k = static_cast<int>(dims.size());
  const bool cuda = self.is_cuda();
  std::vector<std::vector<int64_t>> index_ops;
  bool same = true;
  for (int j = 0; j < a->k; ++j) {
    const at::Tensor& idx = t.per_dim[dims[j]];
    std::vector<int64_t> vst(r, 0);  // idx broadcast to bshape, placed at pos
    for (int64_t b = 0; b < nb; ++b) {
      const int64_t od = b - (nb - idx.dim());
      vst[pos + b] = (od < 0 || idx.size(od) == 1) ? 0 : idx.stride(od);
    }
    a->index[j] = restrided(to_view(idx, name, "indices"), sizes, vst);
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

}  // namespace stridewise::adapter
