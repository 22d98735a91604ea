// See index_k_case.h.
#include "index_k_case.h"

#include <algorithm>
#include <cstring>
#include <map>
#include <utility>

#include "../src/common/elem_types.h"

namespace swt {

using stridewise::Combine;
using stridewise::IndexKArgs;
using stridewise::IndexMode;
using stridewise::IndexRole;
using stridewise::OpCode;

// Element offset in self that logical iteration position `linear` reaches (-1: bad value).
namespace {

// Sums compare bitwise only when they are exact and NaN-free (a NaN's payload depends on the
// operand order): small integers, in float32 or int32.
void fill_small(Rng& rng, TestTensor& t) {
  for (size_t b = 0; b + 4 <= t.storage_bytes(); b += 4) {
    const int32_t i = static_cast<int32_t>(rand_int(rng, -8, 8));
    const float f = static_cast<float>(i);
    if (t.view.dtype == DType::kInt32)
      std::memcpy(t.base() + b, &i, 4);
    else
      std::memcpy(t.base() + b, &f, 4);
  }
}

int64_t ref_offset(const IndexKCase& c, int64_t linear) {
  std::vector<int64_t> coord(c.shape.size());
  for (int64_t d = static_cast<int64_t>(c.shape.size()) - 1; d >= 0; --d) {
    coord[d] = linear % c.shape[d];
    linear /= c.shape[d];
  }
  const StridedView& s = c.self.view;
  if (c.args.mode == IndexMode::kUnravel) {
    int64_t off = 0;
    for (size_t d = 0; d < coord.size(); ++d) off += coord[d] * c.idx[0].view.strides[d];
    int64_t v = read_index(c.idx[0].view, off);
    const int64_t n = s.numel();
    if (v < c.args.desc.lowest_index(n) || v >= n) return -1;
    return offset_of(s, v < 0 ? v + n : v);
  }
  const int64_t nb = static_cast<int64_t>(c.bshape.size()), k = c.args.k;
  int64_t off = 0;
  for (int64_t d = 0; d < c.first; ++d) off += coord[d] * s.strides[d];
  for (int64_t d = c.first + k; d < s.rank; ++d) off += coord[d - k + nb] * s.strides[d];
  for (int64_t j = 0; j < k; ++j) {
    const StridedView& iv = c.idx[j].view;  // shape bshape, broadcast dims have size 1
    int64_t io = 0;
    for (int64_t b = 0; b < nb; ++b)
      io += (iv.sizes[b] == 1 ? 0 : coord[c.first + b]) * iv.strides[b];
    int64_t v = read_index(iv, io);
    const int64_t n = s.sizes[c.dims[j]];
    if (v < c.args.desc.lowest_index(n) || v >= n) return -1;
    off += (v < 0 ? v + n : v) * s.strides[c.dims[j]];
  }
  return off;
}

StridedView over(const StridedView& v, const std::vector<int64_t>& shape,
                 const std::vector<int64_t>& strides) {
  StridedView o = v;
  o.rank = static_cast<int>(shape.size());
  for (int d = 0; d < o.rank; ++d) {
    o.sizes[d] = shape[d];
    o.strides[d] = strides[d];
  }
  return o;
}

}  // namespace

IndexKCase make_index_k_case(Rng& rng, DType dt, IndexMode mode, IndexRole role, Combine comb) {
  IndexKCase c;
  const bool write = role == IndexRole::kWrite;
  LayoutOpts in;
  LayoutOpts no_expand;
  no_expand.allow_expand = false;
  no_expand.allow_overlap = false;
  const int r = static_cast<int>(rand_int(rng, 1, 4));
  std::vector<int64_t> ss(r);
  for (auto& x : ss) x = rand_int(rng, 1, 5);
  c.self = make_random_tensor(rng, dt, ss, write ? no_expand : in);
  fill_random_bytes(rng, c.self);
  const bool sums = comb == Combine::kAdd || comb == Combine::kMean;
  if (sums) fill_small(rng, c.self);
  IndexKArgs& a = c.args;
  a.mode = mode;
  // Most cases wrap (ATen's index / take / put); some take [0, n) (embedding's backward).
  a.desc = {write ? OpCode::kIndexPut : OpCode::kIndex, role, comb,
            /*include_self=*/comb != Combine::kMean, rand_int(rng, 0, 3) != 0};
  a.target = c.self.view;
  const int nb = static_cast<int>(rand_int(rng, 1, 2));
  c.bshape.resize(nb);
  for (auto& x : c.bshape) x = rand_int(rng, 0, 4) == 0 ? 1 : rand_int(rng, 1, 6);
  if (mode == IndexMode::kUnravel) {
    a.k = 1;
    c.shape = c.bshape;
    c.idx.push_back(
        make_random_tensor(rng, rand_int(rng, 0, 1) ? DType::kInt64 : DType::kInt32, c.shape, in));
    const int64_t n = c.self.view.numel();
    fill_index(rng, c.idx[0], a.desc.lowest_index(n), n - 1);
    a.index[0] = c.idx[0].view;
    a.self = over(c.self.view, c.shape, std::vector<int64_t>(c.shape.size(), 0));
  } else {
    a.k = static_cast<int>(rand_int(rng, 1, std::min(r, stridewise::kMaxIndexTerms)));
    c.first = rand_int(rng, 0, r - a.k);
    for (int j = 0; j < a.k; ++j) c.dims.push_back(c.first + j);
    c.shape.assign(ss.begin(), ss.begin() + c.first);
    c.shape.insert(c.shape.end(), c.bshape.begin(), c.bshape.end());
    c.shape.insert(c.shape.end(), ss.begin() + c.first + a.k, ss.end());
    std::vector<int64_t> self_str;
    for (int64_t d = 0; d < c.first; ++d) self_str.push_back(c.self.view.strides[d]);
    for (int b = 0; b < nb; ++b) self_str.push_back(0);
    for (int64_t d = c.first + a.k; d < r; ++d) self_str.push_back(c.self.view.strides[d]);
    a.self = over(c.self.view, c.shape, self_str);
    for (int j = 0; j < a.k; ++j) {
      std::vector<int64_t> is = c.bshape;  // some dims broadcast from size 1
      for (auto& x : is)
        if (rand_int(rng, 0, 3) == 0) x = 1;
      c.idx.push_back(
          make_random_tensor(rng, rand_int(rng, 0, 1) ? DType::kInt64 : DType::kInt32, is, in));
      const int64_t n = ss[c.dims[j]];
      fill_index(rng, c.idx[j], a.desc.lowest_index(n), n - 1);
      std::vector<int64_t> st(c.shape.size(), 0);
      for (int b = 0; b < nb; ++b) st[c.first + b] = is[b] == 1 ? 0 : c.idx[j].view.strides[b];
      a.index[j] = over(c.idx[j].view, c.shape, st);
      a.term_size[j] = n;
      a.term_stride[j] = c.self.view.strides[c.dims[j]];
      a.term_dim[j] = c.dims[j];
    }
  }
  c.dense = make_random_tensor(rng, dt, c.shape, write ? in : no_expand);
  if (write) {
    fill_random_bytes(rng, c.dense);
    if (sums) fill_small(rng, c.dense);
    a.src = c.dense.view;
    if (comb != Combine::kMean && rand_int(rng, 0, 4) == 0) {  // one value (a Python scalar's)
      a.has_value = true;
      std::memcpy(a.value, c.dense.base(), static_cast<size_t>(elem_size(dt)));
    }
  } else {
    poison(c.dense);
    a.out = c.dense.view;
  }
  return c;
}

IndexKCase make_fill_case(Rng& rng, DType dt, bool rows) {
  IndexKCase c;
  LayoutOpts opts;
  opts.allow_overlap = false;  // stride-0 dims (an expanded self) stay
  const int r = rows ? 2 : static_cast<int>(rand_int(rng, 1, 4));
  std::vector<int64_t> ss(r);
  for (auto& x : ss) x = rand_int(rng, 1, 5);
  if (rows) ss = {rand_int(rng, 2, 5), 16};
  c.self =
      rows ? make_tensor(dt, ss, contiguous_strides(ss), 0) : make_random_tensor(rng, dt, ss, opts);
  fill_random_bytes(rng, c.self);
  const int64_t d = rows ? 0 : rand_int(rng, 0, r - 1), n = ss[d];
  const int64_t m = rows ? rand_int(rng, 1, 7) : rand_int(rng, 0, 7);
  c.first = d;
  c.dims = {d};
  c.bshape = {m};
  c.shape = ss;
  c.shape[d] = m;
  c.idx.push_back(make_random_tensor(rng, rand_int(rng, 0, 1) ? DType::kInt64 : DType::kInt32, {m},
                                     LayoutOpts{}));
  IndexKArgs& a = c.args;
  a.desc = {OpCode::kIndexFill, IndexRole::kWrite, Combine::kCopy, true, /*wraps=*/true};
  fill_index(rng, c.idx[0], -n, n - 1);
  std::vector<int64_t> self_str(c.self.view.strides, c.self.view.strides + r);
  self_str[d] = 0;
  a.self = over(c.self.view, c.shape, self_str);
  a.target = c.self.view;
  std::vector<int64_t> idx_str(r, 0);
  idx_str[d] = c.idx[0].view.strides[0];
  a.index[0] = over(c.idx[0].view, c.shape, idx_str);
  a.term_size[0] = n;
  a.term_stride[0] = c.self.view.strides[d];
  a.term_dim[0] = d;
  for (int b = 0; b < 16; ++b) a.value[b] = static_cast<unsigned char>(rand_int(rng, 1, 255));
  a.src = a.self;  // the iteration shape
  for (int d = 0; d < r; ++d) a.src.strides[d] = 0;
  if (rows || coin(rng, 0.5)) {  // the value as bytes (a Python scalar's)
    a.has_value = true;
    a.src.data = nullptr;
  } else {  // one element every position reads (a 0-dim device tensor's, never synchronized)
    c.dense = make_tensor(dt, {1}, {1}, rand_int(rng, 0, 2));
    std::memcpy(c.dense.view.data, a.value, static_cast<size_t>(elem_size(dt)));
    a.src.data = c.dense.view.data;
  }
  return c;
}

namespace {

// A mean's reference: per element reached, the sum of its writers in index order from +0 (exact:
// small integers), then one division (floor division for int32).
std::vector<unsigned char> mean_reference(const IndexKCase& c) {
  const TestTensor& t = c.self;
  std::vector<unsigned char> want(t.base(), t.base() + t.storage_bytes());
  const bool i32 = c.self.view.dtype == DType::kInt32;
  std::map<int64_t, std::pair<int64_t, int64_t>> acc;  // element -> (sum, count)
  for (int64_t p = 0; p < numel(c.shape); ++p) {
    const unsigned char* s = c.dense.base() + (c.dense.offset + offset_of(c.dense.view, p)) * 4;
    int32_t i;
    float f;
    std::memcpy(&i, s, 4);
    std::memcpy(&f, s, 4);
    auto& e = acc[ref_offset(c, p)];
    e.first += i32 ? i : static_cast<int64_t>(f);
    ++e.second;
  }
  for (const auto& [off, e] : acc) {
    unsigned char* dst = want.data() + (c.self.offset + off) * 4;
    if (i32) {
      int64_t q = e.first / e.second;
      if (e.first % e.second != 0 && e.first < 0) --q;
      const int32_t v = static_cast<int32_t>(q);
      std::memcpy(dst, &v, 4);
    } else {
      const float v = static_cast<float>(e.first) / static_cast<float>(e.second);
      std::memcpy(dst, &v, 4);
    }
  }
  return want;
}

}  // namespace

// The storage bytes self (write) or out (read) must hold afterwards.
std::vector<unsigned char> index_k_reference(const IndexKCase& c) {
  if (c.args.desc.combine == Combine::kMean) return mean_reference(c);
  const bool write = c.args.desc.role == IndexRole::kWrite;
  const TestTensor& t = write ? c.self : c.dense;
  std::vector<unsigned char> want(t.base(), t.base() + t.storage_bytes());
  const int64_t es = elem_size(c.self.view.dtype);
  const int64_t n = numel(c.shape);
  const int64_t dense_off = c.dense.offset;
  const int64_t self_off = c.self.offset;
  for (int64_t p = 0; p < n; ++p) {
    const int64_t so = ref_offset(c, p), dof = offset_of(c.dense.view, p);
    unsigned char* dst = want.data() + (write ? self_off + so : dense_off + dof) * es;
    const unsigned char* src = write && c.args.has_value ? c.args.value
                               : write                   ? c.dense.base() + (dense_off + dof) * es
                                                         : c.self.base() + (self_off + so) * es;
    if (c.args.desc.combine == Combine::kAdd && c.self.view.dtype == DType::kInt32) {
      int32_t d, s;  // wraps, as every sum of the core does
      std::memcpy(&d, dst, 4);
      std::memcpy(&s, src, 4);
      d = static_cast<int32_t>(static_cast<uint32_t>(d) + static_cast<uint32_t>(s));
      std::memcpy(dst, &d, 4);
    } else if (c.args.desc.combine == Combine::kAdd) {  // float32, in index order
      float d, s;
      std::memcpy(&d, dst, 4);
      std::memcpy(&s, src, 4);
      d += s;
      std::memcpy(dst, &d, 4);
    } else {
      std::memcpy(dst, src, static_cast<size_t>(es));
    }
  }
  return want;
}

bool index_k_has_duplicates(const IndexKCase& c) {
  std::vector<int64_t> offs;
  for (int64_t p = 0; p < numel(c.shape); ++p) offs.push_back(ref_offset(c, p));
  std::sort(offs.begin(), offs.end());
  return std::adjacent_find(offs.begin(), offs.end()) != offs.end();
}

std::string IndexKCase::describe() const {
  return "self " +
         shape_str(std::vector<int64_t>(self.view.sizes, self.view.sizes + self.view.rank)) +
         " iter " + shape_str(shape) + " k " + std::to_string(args.k) +
         (args.mode == IndexMode::kUnravel ? " flat" : "");
}

namespace {

void put_float(TestTensor& t, int64_t e, float f) {
  unsigned char* p = static_cast<unsigned char*>(t.view.data) + e * elem_size(t.view.dtype);
  if (t.view.dtype == DType::kFloat16) {
    const uint16_t h = stridewise::elem::float_to_f16(f);
    std::memcpy(p, &h, 2);
  } else {
    std::memcpy(p, &f, 4);
  }
}

}  // namespace

IndexKCase mean_case(DType dt, int64_t n, const std::vector<float>& src,
                     const std::vector<int64_t>& idx) {
  const int64_t m = static_cast<int64_t>(idx.size());
  IndexKCase c;
  c.self = make_tensor(dt, {n}, {1}, 0);
  c.dense = make_tensor(dt, {m}, {1}, 0);
  c.idx.push_back(make_tensor(DType::kInt64, {m}, {1}, 0));
  for (int64_t e = 0; e < n; ++e) put_float(c.self, e, static_cast<float>(5 + 2 * e));
  for (int64_t i = 0; i < m; ++i) {
    put_float(c.dense, i, src[i]);
    write_index(c.idx[0].view, i, idx[i]);
  }
  c.shape = c.bshape = {m};
  c.dims = {0};
  IndexKArgs& a = c.args;
  a.desc = {OpCode::kEmbeddingBackward, IndexRole::kWrite, Combine::kMean, false, false};
  a.self = c.self.view;
  a.self.sizes[0] = m;
  a.self.strides[0] = 0;
  a.target = c.self.view;
  a.src = c.dense.view;
  a.index[0] = c.idx[0].view;
  a.term_size[0] = n;
  a.term_stride[0] = 1;
  return c;
}

std::vector<DirectedMean> directed_means() {
  return {
      {DType::kFloat16, {2048, -3, 1, 1}, {2, 0, 2, 2}, {-3, 7, 683.5f}},
      {DType::kFloat32, {1, 4, 1e8f, -1e8f}, {1, 0, 1, 1}, {4, 0}},
  };
}

float mean_case_at(const IndexKCase& c, int64_t e) {
  const unsigned char* p =
      static_cast<const unsigned char*>(c.self.view.data) + e * elem_size(c.self.view.dtype);
  if (c.self.view.dtype == DType::kFloat16) {
    uint16_t h;
    std::memcpy(&h, p, 2);
    return stridewise::elem::f16_to_float(h);
  }
  float f;
  std::memcpy(&f, p, 4);
  return f;
}

int64_t plant_bad_index(Rng& rng, IndexKCase& c, int j, bool high) {
  TestTensor& it = c.idx[j];
  const int64_t lim =
      c.args.mode == IndexMode::kUnravel ? c.self.view.numel() : c.args.term_size[j];
  const int64_t bad = high ? lim : c.args.desc.lowest_index(lim) - 1;
  write_index(it.view, offset_of(it.view, rand_int(rng, 0, it.view.numel() - 1)), bad);
  return bad;
}

}  // namespace swt
