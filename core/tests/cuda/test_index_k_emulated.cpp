// The CUDA advanced-indexing kernel bodies (index_k_cuda_impl.h) run on the host for every
// block and thread of their grid, over the same random cases as the CPU executor's test and
// against the same logical reference: the unit (vector) offsets, the k terms with their
// wrap, the unravel calculator, the validation pass that stops a write, the narrow types'
// workspace, and the sorted path's walks (copy, add, mean). Needs no GPU; never skips.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <vector>

#include "index_k/index_k_cuda_sorted.h"
#include "index_k_case.h"

namespace swt {
namespace {

using stridewise::Combine;
using stridewise::ErrorDetail;
using stridewise::IndexKPlan;
using stridewise::IndexMode;
using stridewise::IndexRole;
using stridewise::Status;
namespace ik = stridewise::cuda_index_k;

template <typename I>
I grid_of(int64_t n) {  // a small grid, so the grid-stride loops turn more than once
  return I(std::max<int64_t>(1, std::min<int64_t>(3, (n + 1023) / 1024)));
}

template <typename U, typename I, int D>
void copy_all(const ik::Params<I, D>& p, bool write, ik::Bad& bad) {
  const I g = grid_of<I>(int64_t(p.numel));
  for (I b = 0; b < g; ++b)
    for (I t = 0; t < I(ik::kThreads); ++t) {
      if (write)
        ik::copy_thread<U, true>(p, b, t, g, bad);
      else
        ik::copy_thread<U, false>(p, b, t, g, bad);
    }
}

// Emulates index_k_cuda's launch sequence for one case; returns whether a bad value was met.
template <typename I, int D>
bool emulate(const stridewise::IndexKArgs& a, const IndexKPlan& plan) {
  int64_t word = 0;
  const ik::Abort abort{&word, 1};
  const ik::Params<I, D> p = ik::make_params<I, D>(a, plan, plan.loop, nullptr, abort);
  const I g = grid_of<I>(int64_t(p.numel));
  ik::Bad bad;
  if (ik::writes(a)) {
    const ik::Params<I, D> c = ik::make_params<I, D>(a, plan, plan.check, nullptr, abort);
    const I gc = grid_of<I>(int64_t(c.numel));
    for (I b = 0; b < gc; ++b)
      for (I t = 0; t < I(ik::kThreads); ++t) ik::check_thread(c, b, t, gc, bad);
    if (bad.b.any) return true;  // the abort word: nothing is written
  }
  const int bytes = stridewise::elem_size(a.self.dtype) * plan.vec;
  if (a.desc.combine == Combine::kCopy) {
    const Status s = stridewise::cuda_common::with_unit(bytes, [&](auto ut) {
      copy_all<typename decltype(ut)::type>(p, ik::writes(a), bad);
      return Status::kOk;
    });
    EXPECT_EQ(s, Status::kOk);
    return bad.b.any;
  }
  // Adds: float32 and int32 accumulate in place; the test adds no narrow type through here.
  if (a.self.dtype == DType::kInt32) {
    for (I b = 0; b < g; ++b)
      for (I t = 0; t < I(ik::kThreads); ++t)
        ik::add_thread<int32_t>(p, static_cast<int32_t*>(a.self.data), b, t, g, bad);
  } else {
    for (I b = 0; b < g; ++b)
      for (I t = 0; t < I(ik::kThreads); ++t)
        ik::add_thread<float>(p, static_cast<float*>(a.self.data), b, t, g, bad);
  }
  return bad.b.any;
}

bool emulate_any(const stridewise::IndexKArgs& a, const IndexKPlan& plan, bool wide) {
  if (!wide && plan.loop.fits_int32 && plan.loop.rank <= 6 && plan.unravel.rank <= 6)
    return emulate<uint32_t, 6>(a, plan);
  return emulate<int64_t, 25>(a, plan);
}

TEST(IndexKEmulated, BodiesMatchReference) {
  const uint64_t seed = test_seed();
  Rng rng(seed);
  const DType dts[] = {DType::kFloat32, DType::kInt8, DType::kFloat16, DType::kFloat64,
                       DType::kComplex128};
  int raced = 0;
  for (int trial = 0; trial < 300; ++trial) {
    const IndexMode mode = trial % 3 == 2 ? IndexMode::kUnravel : IndexMode::kSum;
    const IndexRole role = trial % 2 ? IndexRole::kWrite : IndexRole::kRead;
    const Combine comb =
        role == IndexRole::kWrite && trial % 4 == 1 ? Combine::kAdd : Combine::kCopy;
    // Adds in int32: exact in any order, so the threads' order cannot hide a wrong sum.
    const DType dt = comb == Combine::kAdd ? DType::kInt32 : dts[trial % 5];
    IndexKCase c = make_index_k_case(rng, dt, mode, role, comb);
    IndexKPlan plan;
    ErrorDetail err;
    ASSERT_EQ(stridewise::plan_index_k(c.args, &plan, &err), Status::kOk) << err.message;
    // Copies of values onto one element race on a GPU: any writer may win, so such cases are
    // left out (one value copied is order-free: compared).
    if (role == IndexRole::kWrite && comb == Combine::kCopy && !plan.order_free &&
        index_k_has_duplicates(c)) {
      ++raced;
      continue;
    }
    const std::vector<unsigned char> want = index_k_reference(c);
    EXPECT_FALSE(emulate_any(c.args, plan, trial % 7 == 0)) << c.describe();
    const TestTensor& t = role == IndexRole::kWrite ? c.self : c.dense;
    EXPECT_EQ(diff_bytes(t.base(), want.data(), want.size()), "")
        << "seed " << seed << " trial " << trial << " " << c.describe();
    if (HasFailure()) return;
  }
  EXPECT_LT(raced, 60);  // most write copies were compared
}

// The sorted fill's launch sequence: keys over IndexKPlan::seq (validating), a stable sort of
// the keys (CUB's on the GPU), then fill_rows_thread over every (row, sorted key). Returns
// whether a bad value was met (then nothing is written, as the abort word decides).
template <typename I, int D>
bool emulate_fill_rows(const stridewise::IndexKArgs& a, const IndexKPlan& plan) {
  int64_t word = 0;
  const ik::Abort abort{&word, 1};
  const ik::Params<I, D> p = ik::make_params<I, D>(a, plan, plan.seq, nullptr, abort);
  std::vector<uint64_t> keys(static_cast<size_t>(plan.seq.numel));
  std::vector<int64_t> vals(keys.size());
  ik::Bad bad;
  const I g = grid_of<I>(plan.seq.numel);
  for (I b = 0; b < g; ++b)
    for (I t = 0; t < I(ik::kThreads); ++t)
      ik::keys_thread(p, keys.data(), vals.data(), b, t, g, bad);
  if (bad.b.any) return true;
  std::stable_sort(keys.begin(), keys.end());
  const ik::FillParams<I, D> f = ik::make_fill_params<I, D>(a, plan, abort);
  const I gf = grid_of<I>(int64_t(f.numel));
  const Status s =
      stridewise::cuda_common::with_unit(int(stridewise::elem_size(a.self.dtype)), [&](auto ut) {
        for (I b = 0; b < gf; ++b)
          for (I t = 0; t < I(ik::kThreads); ++t)
            ik::fill_rows_thread<typename decltype(ut)::type>(f, keys.data(), b, t, gf);
        return Status::kOk;
      });
  EXPECT_EQ(s, Status::kOk);
  return false;
}

// The block-sorted fill's kernel over `blocks` blocks (a grid the fill strides over): each
// block its own shared keys, its phases run for every thread before the next (the block's
// barriers), the bitonic steps in the kernel's order. Returns whether a bad value was met (then
// no block writes). Also checks that every block's keys came out sorted.
template <typename I, int D>
bool emulate_fill_block(const stridewise::IndexKArgs& a, const IndexKPlan& plan, I blocks) {
  const ik::Params<I, D> seq = ik::make_params<I, D>(a, plan, plan.seq, nullptr, ik::Abort{});
  const ik::FillParams<I, D> f = ik::make_fill_params<I, D>(a, plan, ik::Abort{});
  const int64_t n2 = ik::fill_block_keys(plan);
  std::vector<std::vector<I>> keys(static_cast<size_t>(blocks), std::vector<I>(size_t(n2)));
  for (I b = 0; b < blocks; ++b) {
    ik::Bad bad;
    for (I t = 0; t < I(ik::kThreads); ++t)
      ik::fill_keys_phase(seq, keys[b].data(), n2, t, I(ik::kThreads), bad);
    if (bad.b.any) return true;  // every block reads the same values: none writes
    for (int64_t k = 2; k <= n2; k *= 2)
      for (int64_t j = k / 2; j > 0; j /= 2)
        for (I t = 0; t < I(ik::kThreads); ++t)
          ik::bitonic_step(keys[b].data(), n2, k, j, t, I(ik::kThreads));
    EXPECT_TRUE(std::is_sorted(keys[b].begin(), keys[b].end()));
  }
  const Status s =
      stridewise::cuda_common::with_unit(int(stridewise::elem_size(a.self.dtype)), [&](auto ut) {
        for (I b = 0; b < blocks; ++b)
          for (I t = 0; t < I(ik::kThreads); ++t)
            ik::fill_rows_thread<typename decltype(ut)::type>(f, keys[b].data(), b, t, blocks);
        return Status::kOk;
      });
  EXPECT_EQ(s, Status::kOk);
  return false;
}

// index_fill's one-value writes (duplicates, an expanded self): every writer of an element
// stores the same bytes, so the grid's order cannot show and every case is compared; a
// deterministic call stays off the sorted path (nothing to order).
TEST(IndexKEmulated, OrderFreeFillMatchesReference) {
  const uint64_t seed = test_seed();
  Rng rng(seed);
  const DType dts[] = {DType::kFloat32, DType::kInt8, DType::kBFloat16, DType::kComplex64};
  int sorted = 0;
  for (int trial = 0; trial < 200; ++trial) {
    const bool rows = trial % 8 == 0;  // a contiguous self's rows: a value in vector units
    IndexKCase c = make_fill_case(rng, dts[trial % 4], rows);
    c.args.deterministic = trial % 2 == 0;
    const std::vector<unsigned char> want = index_k_reference(c);
    IndexKPlan plan;
    ErrorDetail err;
    ASSERT_EQ(stridewise::plan_index_k(c.args, &plan, &err), Status::kOk) << err.message;
    EXPECT_FALSE(ik::sorted_path(c.args, plan)) << c.describe();
    if (rows) {
      EXPECT_GT(plan.vec, 1) << c.describe();
    }
    const std::vector<unsigned char> before(c.self.base(), c.self.base() + c.self.storage_bytes());
    EXPECT_FALSE(emulate_any(c.args, plan, trial % 5 == 0)) << c.describe();
    EXPECT_EQ(diff_bytes(c.self.base(), want.data(), want.size()), "")
        << "seed " << seed << " trial " << trial << " " << c.describe();
    if (ik::fill_rows_fits(c.args, plan) && numel(c.shape) > 0) {  // the sorted fills' bodies
      ++sorted;
      std::memcpy(c.self.base(), before.data(), before.size());
      EXPECT_FALSE((emulate_fill_rows<uint32_t, 6>(c.args, plan))) << c.describe();
      EXPECT_EQ(diff_bytes(c.self.base(), want.data(), want.size()), "")
          << "sorted fill, seed " << seed << " trial " << trial << " " << c.describe();
      std::memcpy(c.self.base(), before.data(), before.size());
      const bool bad = trial % 3 == 0 ? emulate_fill_block<int64_t, 25>(c.args, plan, 2)
                                      : emulate_fill_block<uint32_t, 6>(c.args, plan, 3);
      EXPECT_FALSE(bad) << c.describe();
      EXPECT_EQ(diff_bytes(c.self.base(), want.data(), want.size()), "")
          << "block-sorted fill, seed " << seed << " trial " << trial << " " << c.describe();
    }
    if (HasFailure()) return;
  }
  EXPECT_GT(sorted, 40);
}

// The sorted fill is chosen for index_fill's column shape (many rows sharing many index values
// along self's unit-stride dim) and not for its row shape (the index along the outer dim: the
// plain kernel stores whole rows in vector units, its fastest planned dim self's unit stride,
// also for a transposed self); a bad value in the sorted fill writes nothing.
TEST(IndexKEmulated, SortedFillIsChosenForColumnsAndStopsOnABadValue) {
  Rng rng(test_seed());
  struct Shape {
    std::vector<int64_t> sizes, strides;
    int64_t dim;
    bool sorted;
  };
  const Shape shapes[] = {{{64, 1024}, {1024, 1}, 1, true},
                          {{64, 1024}, {1024, 1}, 0, false},
                          {{1024, 64}, {1, 1024}, 0, true},  // a transposed self
                          {{1024, 64}, {1, 1024}, 1, false}};
  for (const Shape& sh : shapes) {
    IndexKCase c;
    c.self = make_tensor(DType::kFloat32, sh.sizes, sh.strides, 0);
    const int64_t d = sh.dim, m = 300, n = sh.sizes[d];
    c.idx.push_back(make_tensor(DType::kInt64, {m}, {1}, 0));
    fill_index(rng, c.idx[0], -n, n - 1);
    stridewise::IndexKArgs& a = c.args;
    a.desc = {stridewise::OpCode::kIndexFill, IndexRole::kWrite, Combine::kCopy, true, true};
    c.shape = sh.sizes;
    c.shape[d] = m;
    a.self = c.self.view;
    a.self.sizes[d] = m;
    a.self.strides[d] = 0;
    a.target = c.self.view;
    a.index[0] = c.idx[0].view;
    a.index[0].rank = 2;
    a.index[0].sizes[0] = c.shape[0];
    a.index[0].sizes[1] = c.shape[1];
    a.index[0].strides[d] = 1;
    a.index[0].strides[1 - d] = 0;
    a.term_size[0] = n;
    a.term_stride[0] = sh.strides[d];
    a.term_dim[0] = d;
    a.src = a.self;
    a.src.data = nullptr;
    a.src.strides[0] = a.src.strides[1] = 0;
    a.has_value = true;
    const float v = 2.5f;
    std::memcpy(a.value, &v, 4);
    IndexKPlan plan;
    ErrorDetail err;
    ASSERT_EQ(stridewise::plan_index_k(a, &plan, &err), Status::kOk) << err.message;
    EXPECT_EQ(ik::fill_block_path(a, plan), sh.sorted) << "dim " << d;
    EXPECT_FALSE(ik::fill_rows_path(a, plan)) << "dim " << d;  // 300 keys: sorted in the block
    EXPECT_EQ(plan.loop.strides[stridewise::kIkWritten][0], sh.sorted ? 0 : 1) << "dim " << d;
    EXPECT_EQ(plan.vec, sh.sorted ? 1 : 4) << "dim " << d;
    if (!sh.sorted) continue;
    plant_bad_index(rng, c, 0, true);
    const std::vector<unsigned char> before(c.self.base(), c.self.base() + c.self.storage_bytes());
    EXPECT_TRUE((emulate_fill_rows<uint32_t, 6>(a, plan)));
    EXPECT_EQ(diff_bytes(c.self.base(), before.data(), before.size()), "");
    EXPECT_TRUE((emulate_fill_block<uint32_t, 6>(a, plan, 2)));
    EXPECT_EQ(diff_bytes(c.self.base(), before.data(), before.size()), "");
    // Past kFillBlockKeys keys the sort is CUB's (the plan alone: the shapes are what matter).
    a.self.sizes[d] = a.src.sizes[d] = a.index[0].sizes[d] = ik::kFillBlockKeys + 1;
    a.index[0].strides[d] = 0;  // any index values: the path is chosen before they are read
    ASSERT_EQ(stridewise::plan_index_k(a, &plan, &err), Status::kOk) << err.message;
    EXPECT_FALSE(ik::fill_block_path(a, plan));
    EXPECT_TRUE(ik::fill_rows_path(a, plan));
  }
}

// x (8, 16) float32 at a 16-byte aligned offset, read or written at rows vals[0..n) (n <= 6):
// x[i] or x[i] (+)= v with contiguous rows, the layouts the unit paths take. Values are small
// integers, so sums are exact in any order.
IndexKCase row_case(Rng& rng, const std::vector<int64_t>& vals, IndexRole role, Combine comb) {
  const int64_t n = static_cast<int64_t>(vals.size());
  IndexKCase c;
  c.self = make_tensor(DType::kFloat32, {8, 16}, {16, 1}, 4);
  c.dense = make_tensor(DType::kFloat32, {n, 16}, {16, 1}, 0);
  c.idx.push_back(make_tensor(DType::kInt64, {n}, {1}, 0));
  for (TestTensor* t : {&c.self, &c.dense})
    for (int64_t e = 0; e < t->view.numel(); ++e) {
      const float f = float(rand_int(rng, -8, 8));
      std::memcpy(static_cast<float*>(t->view.data) + e, &f, 4);
    }
  for (int64_t i = 0; i < n; ++i) write_index(c.idx[0].view, i, vals[i]);
  c.shape = {n, 16};
  c.bshape = {n};
  c.dims = {0};
  stridewise::IndexKArgs& a = c.args;
  a.desc = {stridewise::OpCode::kIndex, role, comb, true, /*wraps=*/true};  // x[i]: -5 is row 3
  a.self = c.self.view;
  a.self.strides[0] = 0;
  a.self.sizes[0] = n;
  a.target = c.self.view;
  (role == IndexRole::kWrite ? a.src : a.out) = c.dense.view;
  a.index[0] = c.idx[0].view;
  a.index[0].rank = 2;
  a.index[0].sizes[1] = 16;
  a.index[0].strides[1] = 0;
  a.term_size[0] = 8;
  a.term_stride[0] = 16;
  return c;
}

// x[i] and x[i] = v over contiguous rows: the unit (vector) path, 16-byte units.
TEST(IndexKEmulated, RowsMoveInVectorUnits) {
  Rng rng(test_seed());
  for (IndexRole role : {IndexRole::kRead, IndexRole::kWrite}) {
    // distinct rows: a write has one winner each
    IndexKCase c = row_case(rng, {3, -1, 0, -8, 6}, role, Combine::kCopy);
    const std::vector<unsigned char> want = index_k_reference(c);
    IndexKPlan plan;
    ErrorDetail err;
    ASSERT_EQ(stridewise::plan_index_k(c.args, &plan, &err), Status::kOk) << err.message;
    EXPECT_EQ(plan.vec, 4);  // offset 4 floats: 16-byte aligned in a fresh buffer
    EXPECT_FALSE(emulate_any(c.args, plan, false));
    const TestTensor& t = role == IndexRole::kWrite ? c.self : c.dense;
    EXPECT_EQ(diff_bytes(t.base(), want.data(), want.size()), "");
  }
}

// The sorted path: keys, a stable sort (CUB's on the device), then the segment walk. Duplicates
// resolve in index order, so copies (last writer), sums (in order, in the accumulation type)
// and means (those sums from +0, divided once) equal the reference bitwise.
template <typename I, int D>
bool emulate_sorted(const stridewise::IndexKArgs& a, const IndexKPlan& plan, int* vectorized) {
  int64_t word = 0;
  const ik::Abort abort{&word, 1};
  const ik::Params<I, D> p = ik::make_params<I, D>(a, plan, plan.seq, nullptr, abort);
  const int64_t n = plan.seq.numel;
  std::vector<uint64_t> keys(n);
  std::vector<int64_t> vals(n);
  const I g = grid_of<I>(n);
  ik::Bad bad;
  for (I b = 0; b < g; ++b)
    for (I t = 0; t < I(ik::kThreads); ++t)
      ik::keys_thread(p, keys.data(), vals.data(), b, t, g, bad);
  if (bad.b.any) return true;
  std::vector<int64_t> order(n);
  for (int64_t i = 0; i < n; ++i) order[i] = i;
  std::stable_sort(order.begin(), order.end(),
                   [&](int64_t x, int64_t y) { return keys[x] < keys[y]; });
  std::vector<uint64_t> sk(n);
  std::vector<int64_t> sv(n);
  for (int64_t i = 0; i < n; ++i) sk[i] = keys[order[i]], sv[i] = vals[order[i]];
  const ik::SegParams<I, D> s = ik::make_seg_params<I, D>(a, plan, sk.data(), sv.data(), abort);
  const int vec = ik::seg_vec_width(a, plan);
  const int es = stridewise::elem_size(a.self.dtype);
  // Adds and means (SegParams::mean) walk per element type; copies per unit of its size.
  const bool acc = a.desc.accumulates();
  if (vec > 1 && vec == 16 / es) {  // the unit walk, as seg_rows_vec_kernel runs it
    for (int64_t i = 0; i < n; ++i) {
      int64_t end = 0;
      if (!ik::seg_head(s, i, &end)) continue;
      for (int64_t u = 0; u < plan.row.numel / vec; ++u) {
        if (acc)
          stridewise::elem::with_type(a.self.dtype, [&](auto tag) {
            using T = typename decltype(tag)::type;
            if constexpr (sizeof(T) <= 8)
              ik::seg_walk_vec<T, true, 16 / sizeof(T)>(s, i, end, I(u));
            return Status::kOk;
          });
        else
          stridewise::cuda_common::with_unit(es, [&](auto ut) {
            using T = typename decltype(ut)::type;
            if constexpr (sizeof(T) <= 8)
              ik::seg_walk_vec<T, false, 16 / sizeof(T)>(s, i, end, I(u));
            return Status::kOk;
          });
      }
    }
    ++*vectorized;
    return false;
  }
  for (int64_t i = 0; i < n; ++i)
    for (int64_t r = 0; r < plan.row.numel; ++r) {
      if (acc)
        stridewise::elem::with_type(a.self.dtype, [&](auto tag) {
          ik::seg_at<typename decltype(tag)::type, true>(s, i, I(r));
          return Status::kOk;
        });
      else
        stridewise::cuda_common::with_unit(stridewise::elem_size(a.self.dtype), [&](auto ut) {
          ik::seg_at<typename decltype(ut)::type, false>(s, i, I(r));
          return Status::kOk;
        });
    }
  return false;
}

TEST(IndexKEmulated, SortedPathResolvesDuplicatesInIndexOrder) {
  const uint64_t seed = test_seed();
  Rng rng(seed);
  int dups = 0, ran = 0, vectorized = 0;
  for (int trial = 0; trial < 300; ++trial) {
    const IndexMode mode = trial % 3 == 2 ? IndexMode::kUnravel : IndexMode::kSum;
    const Combine comb = trial % 4 == 3 ? Combine::kMean
                         : trial % 2    ? Combine::kAdd
                                        : Combine::kCopy;
    const DType dt = comb == Combine::kMean  ? (trial % 8 == 3 ? DType::kInt32 : DType::kFloat32)
                     : comb == Combine::kAdd ? DType::kFloat32
                     : trial % 4             ? DType::kInt16
                                             : DType::kComplex128;
    IndexKCase c = make_index_k_case(rng, dt, mode, IndexRole::kWrite, comb);
    IndexKPlan plan;
    ErrorDetail err;
    ASSERT_EQ(stridewise::plan_index_k(c.args, &plan, &err), Status::kOk) << err.message;
    ++ran;
    dups += index_k_has_duplicates(c);
    const std::vector<unsigned char> want = index_k_reference(c);
    const bool small = plan.seq.fits_int32 && plan.seq.rank <= 6 && plan.row.rank <= 6;
    const bool bad = small && trial % 2 ? emulate_sorted<uint32_t, 6>(c.args, plan, &vectorized)
                                        : emulate_sorted<int64_t, 25>(c.args, plan, &vectorized);
    EXPECT_FALSE(bad);
    EXPECT_EQ(diff_bytes(c.self.base(), want.data(), want.size()), "")
        << "seed " << seed << " trial " << trial << " " << c.describe();
    if (HasFailure()) return;
  }
  EXPECT_EQ(ran, 300);
  EXPECT_GT(dups, 30);  // the cases this path exists for
}

// x[i] += v, x[i] = v and the mean over contiguous rows with duplicates: the sorted path's
// unit walk.
TEST(IndexKEmulated, SortedRowsMoveInVectorUnits) {
  Rng rng(test_seed());
  for (Combine comb : {Combine::kAdd, Combine::kCopy, Combine::kMean}) {
    IndexKCase c = row_case(rng, {3, -5, 0, 3, 6, 3}, IndexRole::kWrite, comb);  // row 3 thrice
    c.args.desc.op = stridewise::OpCode::kIndexPut;
    c.args.desc.include_self = comb != Combine::kMean;
    c.args.deterministic = true;
    const std::vector<unsigned char> want = index_k_reference(c);
    IndexKPlan plan;
    ErrorDetail err;
    ASSERT_EQ(stridewise::plan_index_k(c.args, &plan, &err), Status::kOk) << err.message;
    EXPECT_EQ(ik::seg_vec_width(c.args, plan), 4);
    int vectorized = 0;
    const bool bad = emulate_sorted<uint32_t, 6>(c.args, plan, &vectorized);
    EXPECT_FALSE(bad);
    EXPECT_EQ(vectorized, 1);
    EXPECT_EQ(diff_bytes(c.self.base(), want.data(), want.size()), "");
  }
}

// The directed means of the CPU test (test_index_k_cpu.cpp), through the sorted path's walk:
// the same values, so CPU and CUDA agree bitwise on them.
TEST(IndexKEmulated, MeanSumsInIndexOrderInTheAccumulationTypeAndDividesOnce) {
  for (const DirectedMean& w : directed_means()) {
    IndexKCase c = mean_case(w.dt, static_cast<int64_t>(w.out.size()), w.src, w.idx);
    IndexKPlan plan;
    ErrorDetail err;
    ASSERT_EQ(stridewise::plan_index_k(c.args, &plan, &err), Status::kOk) << err.message;
    int vectorized = 0;
    const bool bad = emulate_sorted<uint32_t, 6>(c.args, plan, &vectorized);
    EXPECT_FALSE(bad);
    for (size_t e = 0; e < w.out.size(); ++e)
      EXPECT_EQ(mean_case_at(c, static_cast<int64_t>(e)), w.out[e]) << c.describe() << " " << e;
  }
}

// num_weights 0 (test_index_k_cpu.cpp's case): an empty target without data; the keys pass
// reports a value and nothing is addressed.
TEST(IndexKEmulated, EmptyTargetWithoutDataStopsTheMean) {
  IndexKCase c = mean_case(DType::kFloat32, 0, {1, 2}, {3, 0});
  c.args.self.data = c.args.target.data = nullptr;
  IndexKPlan plan;
  ErrorDetail err;
  ASSERT_EQ(stridewise::plan_index_k(c.args, &plan, &err), Status::kOk) << err.message;
  int vectorized = 0;
  const bool bad = emulate_sorted<uint32_t, 6>(c.args, plan, &vectorized);
  EXPECT_TRUE(bad);
}

// A mean's keys pass validates as the check pass does: a bad value stops every write.
TEST(IndexKEmulated, BadValueStopsEveryMean) {
  const uint64_t seed = test_seed();
  Rng rng(seed);
  int seen = 0;
  for (int trial = 0; trial < 100; ++trial) {
    const IndexMode mode = trial % 2 ? IndexMode::kUnravel : IndexMode::kSum;
    IndexKCase c = make_index_k_case(rng, DType::kFloat32, mode, IndexRole::kWrite, Combine::kMean);
    if (numel(c.shape) == 0) continue;
    plant_bad_index(rng, c, static_cast<int>(rand_int(rng, 0, c.args.k - 1)), trial % 4 < 2);
    const std::vector<unsigned char> before(c.self.base(), c.self.base() + c.self.storage_bytes());
    IndexKPlan plan;
    ErrorDetail err;
    ASSERT_EQ(stridewise::plan_index_k(c.args, &plan, &err), Status::kOk) << err.message;
    int vectorized = 0;
    const bool bad = emulate_sorted<int64_t, 25>(c.args, plan, &vectorized);
    EXPECT_TRUE(bad) << c.describe();
    EXPECT_EQ(diff_bytes(c.self.base(), before.data(), before.size()), "") << c.describe();
    ++seen;
    if (HasFailure()) return;
  }
  EXPECT_GE(seen, 50);
}

TEST(IndexKEmulated, BadValueStopsEveryWrite) {
  const uint64_t seed = test_seed();
  Rng rng(seed);
  int seen = 0;
  for (int trial = 0; trial < 200; ++trial) {
    const IndexMode mode = trial % 2 ? IndexMode::kUnravel : IndexMode::kSum;
    const Combine comb = trial % 3 ? Combine::kCopy : Combine::kAdd;
    IndexKCase c = make_index_k_case(rng, DType::kInt32, mode, IndexRole::kWrite, comb);
    if (numel(c.shape) == 0) continue;
    plant_bad_index(rng, c, static_cast<int>(rand_int(rng, 0, c.args.k - 1)), trial % 4 < 2);
    const std::vector<unsigned char> before(c.self.base(), c.self.base() + c.self.storage_bytes());
    IndexKPlan plan;
    ErrorDetail err;
    ASSERT_EQ(stridewise::plan_index_k(c.args, &plan, &err), Status::kOk) << err.message;
    EXPECT_TRUE(emulate_any(c.args, plan, false)) << c.describe();
    EXPECT_EQ(diff_bytes(c.self.base(), before.data(), before.size()), "") << c.describe();
    ++seen;
    if (HasFailure()) return;
  }
  EXPECT_GE(seen, 100);
}

}  // namespace
}  // namespace swt
