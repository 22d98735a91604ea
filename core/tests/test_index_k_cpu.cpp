// index_k_cpu against an obvious reference: random layouts of every operand (expanded,
// transposed, sliced, offset storages), k = 1..kMaxIndexTerms index tensors broadcast over one
// shape with negative values, take/put's flat positions over a non-contiguous self, copy and
// add, reads and writes. The reference walks logical coordinates only (no planner).
//
// Storages are guarded (a write past the end faults) and compared whole: out's poisoned bytes
// must stay where the view does not reach, a write must touch exactly the reference's bytes,
// and a bad index must leave every byte of a written self as it was.
#include <gtest/gtest.h>

#include <cstring>
#include <vector>

#include "stridewise/index_k.h"
#include "test_util.h"

namespace swt {
namespace {

using stridewise::Combine;
using stridewise::ErrorDetail;
using stridewise::IndexKArgs;
using stridewise::IndexKPlan;
using stridewise::IndexMode;
using stridewise::IndexRole;
using stridewise::OpCode;
using stridewise::Status;

// One advanced-indexing problem and the views the adapter would build for it.
struct Case {
  TestTensor self, dense;  // dense: out (read) or src (write)
  std::vector<TestTensor> idx;
  std::vector<int64_t> dims;    // kSum: indexed dims of self (adjacent, from `first`)
  std::vector<int64_t> shape;   // iteration shape
  std::vector<int64_t> bshape;  // the index tensors' broadcast shape
  int64_t first = 0;
  IndexKArgs args;
  std::string describe() const {
    return "self " +
           shape_str(std::vector<int64_t>(self.view.sizes, self.view.sizes + self.view.rank)) +
           " iter " + shape_str(shape) + " k " + std::to_string(args.k);
  }
};

// Element offset in self that logical iteration position `linear` reaches (-1: bad value).
int64_t ref_offset(const Case& c, int64_t linear) {
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
    if (v < -n || v >= n) return -1;
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
    if (v < -n || v >= n) return -1;
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

Case make_case(Rng& rng, DType dt, IndexMode mode, IndexRole role, Combine comb) {
  Case c;
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
  IndexKArgs& a = c.args;
  a.mode = mode;
  a.desc = {write ? OpCode::kIndexPut : OpCode::kIndex, role, comb, true};
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
    fill_index(rng, c.idx[0], -n, n - 1);
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
      fill_index(rng, c.idx[j], -n, n - 1);
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
    a.src = c.dense.view;
  } else {
    poison(c.dense);
    a.out = c.dense.view;
  }
  return c;
}

// The storage bytes self (write) or out (read) must hold afterwards.
std::vector<unsigned char> reference(const Case& c) {
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
    const unsigned char* src =
        write ? c.dense.base() + (dense_off + dof) * es : c.self.base() + (self_off + so) * es;
    if (c.args.desc.combine == Combine::kAdd) {  // float32 only, in index order
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

void run_and_check(Case& c, uint64_t seed, int trial) {
  const bool write = c.args.desc.role == IndexRole::kWrite;
  const std::vector<unsigned char> want = reference(c);
  IndexKPlan plan;
  ErrorDetail err;
  ASSERT_EQ(stridewise::plan_index_k(c.args, &plan, &err), Status::kOk) << err.message;
  ChunkyExec ex(seed + trial, 7, 3);
  ASSERT_EQ(stridewise::index_k_cpu(c.args, plan, ex.exec(), &err), Status::kOk) << err.message;
  const TestTensor& t = write ? c.self : c.dense;
  EXPECT_EQ(diff_bytes(t.base(), want.data(), want.size()), "")
      << "seed " << seed << " trial " << trial << " " << c.describe();
}

TEST(IndexKCpu, MatchesReferenceOverRandomLayouts) {
  const uint64_t seed = test_seed();
  Rng rng(seed);
  const DType dts[] = {DType::kFloat32, DType::kInt8, DType::kFloat16, DType::kFloat64,
                       DType::kComplex128};
  for (int trial = 0; trial < 600; ++trial) {
    const IndexMode mode = trial % 3 == 2 ? IndexMode::kUnravel : IndexMode::kSum;
    const IndexRole role = trial % 2 ? IndexRole::kWrite : IndexRole::kRead;
    const Combine comb =
        role == IndexRole::kWrite && trial % 4 == 1 ? Combine::kAdd : Combine::kCopy;
    const DType dt = comb == Combine::kAdd ? DType::kFloat32 : dts[trial % 5];
    Case c = make_case(rng, dt, mode, role, comb);
    run_and_check(c, seed, trial);
    if (HasFailure()) return;
  }
}

TEST(IndexKCpu, BadValueIsReportedAndWritesNothing) {
  const uint64_t seed = test_seed();
  Rng rng(seed);
  int seen = 0;
  for (int trial = 0; trial < 300 && seen < 100; ++trial) {
    const IndexMode mode = trial % 2 ? IndexMode::kUnravel : IndexMode::kSum;
    const IndexRole role = trial % 3 ? IndexRole::kWrite : IndexRole::kRead;
    Case c = make_case(rng, DType::kFloat32, mode, role, Combine::kCopy);
    if (numel(c.shape) == 0) continue;
    // One element of one index tensor gets a value one past either end.
    const int j = static_cast<int>(rand_int(rng, 0, c.args.k - 1));
    TestTensor& it = c.idx[j];
    const int64_t lim = mode == IndexMode::kUnravel ? c.self.view.numel() : c.args.term_size[j];
    const int64_t bad_val = rand_int(rng, 0, 1) ? lim : -lim - 1;
    write_index(it.view, offset_of(it.view, rand_int(rng, 0, it.view.numel() - 1)), bad_val);
    const std::vector<unsigned char> before(c.self.base(), c.self.base() + c.self.storage_bytes());
    IndexKPlan plan;
    ErrorDetail err;
    ASSERT_EQ(stridewise::plan_index_k(c.args, &plan, &err), Status::kOk) << err.message;
    ChunkyExec ex(seed + trial, 5, 2);
    ASSERT_EQ(stridewise::index_k_cpu(c.args, plan, ex.exec(), &err), Status::kIndexOutOfRange)
        << c.describe();
    EXPECT_EQ(err.value, bad_val);
    EXPECT_EQ(err.hi, lim);
    EXPECT_EQ(err.dim, mode == IndexMode::kUnravel ? -1 : c.args.term_dim[j]);
    if (role == IndexRole::kWrite) {
      EXPECT_EQ(diff_bytes(c.self.base(), before.data(), before.size()), "") << c.describe();
    }
    ++seen;
    if (HasFailure()) return;
  }
  EXPECT_GE(seen, 50);
}

TEST(IndexKCpu, DuplicatesResolveInIndexOrder) {
  // x[i] = v with i = [1, 1, 1]: the last value wins; x[i] += v adds all three.
  std::vector<float> x = {10, 20, 30}, v = {1, 2, 4};
  std::vector<int64_t> i = {1, 1, -2};
  for (Combine comb : {Combine::kCopy, Combine::kAdd}) {
    std::vector<float> y = x;
    IndexKArgs a;
    a.desc = {OpCode::kIndexPut, IndexRole::kWrite, comb, true};
    a.self = stridewise::make_view(y.data(), DType::kFloat32, {3}, {0});
    a.target = stridewise::make_view(y.data(), DType::kFloat32, {3}, {1});
    a.src = stridewise::make_view(v.data(), DType::kFloat32, {3}, {1});
    a.index[0] = stridewise::make_view(i.data(), DType::kInt64, {3}, {1});
    a.term_size[0] = 3;
    a.term_stride[0] = 1;
    IndexKPlan plan;
    ErrorDetail err;
    ASSERT_EQ(stridewise::plan_index_k(a, &plan, &err), Status::kOk) << err.message;
    EXPECT_TRUE(plan.may_collide);
    ASSERT_EQ(stridewise::index_k_cpu(a, plan, stridewise::default_cpu_executor(), &err),
              Status::kOk);
    EXPECT_EQ(y[1], comb == Combine::kCopy ? 4.0f : 27.0f);
    EXPECT_EQ(y[0], 10.0f);
    EXPECT_EQ(y[2], 30.0f);
  }
}

TEST(IndexKCpu, RejectsWhatTheContractExcludes) {
  std::vector<float> x(6);
  std::vector<int64_t> i = {0};
  IndexKArgs a;
  a.desc = {OpCode::kIndexPut, IndexRole::kWrite, Combine::kCopy, true};
  a.self = stridewise::make_view(x.data(), DType::kFloat32, {1}, {0});
  a.target = stridewise::make_view(x.data(), DType::kFloat32, {2, 3}, {0, 1});  // overlapping
  a.src = stridewise::make_view(x.data() + 3, DType::kFloat32, {1}, {1});
  a.index[0] = stridewise::make_view(i.data(), DType::kInt64, {1}, {1});
  a.term_size[0] = 2;
  IndexKPlan plan;
  ErrorDetail err;
  EXPECT_EQ(stridewise::plan_index_k(a, &plan, &err), Status::kInvalidArgument);
  a.target.strides[0] = 3;
  EXPECT_EQ(stridewise::plan_index_k(a, &plan, &err), Status::kOk) << err.message;
  a.k = stridewise::kMaxIndexTerms + 1;
  EXPECT_EQ(stridewise::plan_index_k(a, &plan, &err), Status::kUnsupported);
  a.k = 1;
  a.desc.combine = Combine::kMul;
  EXPECT_EQ(stridewise::plan_index_k(a, &plan, &err), Status::kUnsupported);
}

}  // namespace
}  // namespace swt
