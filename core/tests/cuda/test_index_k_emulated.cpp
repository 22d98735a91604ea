// The CUDA advanced-indexing kernel bodies (index_k_cuda_impl.h, index_k_cuda_sorted.h), driven
// by index_k_cuda.cu's own launch sequence (index_k_cuda_launch.h) through a host runner, run on
// the host for every block and thread of their grid, over the same random cases as the CPU
// executor's test and against the same logical reference: the unit (vector) offsets, the k terms
// with their wrap, the unravel calculator, the validation pass that stops a write, the narrow
// types' workspace, and the sorted path's walks (copy, add, mean). Needs no GPU; never skips.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "index_k/index_k_cuda_launch.h"
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

// The host stand-in for index_k_cuda.cu's CudaRunner, driven by the real launch sequence
// (index_k_cuda_launch.h): every thread of every block, the grid capped at `cap` blocks so the
// grid-stride loops turn more than once. The check and keys kernels (and a read) record a bad
// value and raise a write's abort word, as with_report does; every writing kernel does nothing
// once the word is raised, as its `aborted` test does. The sort is std::stable_sort (CUB's
// radix sort is stable) into buffer 1.
struct IndexKHostRunner {
  unsigned cap = 3;
  unsigned wave = 3;   // one_wave(): the block-sorted fill's grid cap
  bool bad = false;    // some kernel met a bad value
  int vectorized = 0;  // sorted-path jobs of more than one line per thread
  int payloads = 0;    // keys passes that carried the source elements (payload keys)
  std::vector<std::string> launches;

  template <typename I, typename F>
  void each(const char* name, unsigned blocks, F&& body) {
    launches.push_back(name);
    const unsigned g = std::min(blocks, cap);
    for (unsigned b = 0; b < g; ++b)
      for (unsigned t = 0; t < unsigned(ik::kThreads); ++t) body(I(b), I(t), I(g));
  }
  void report(const ik::Bad& b, const ik::Abort& abort) {
    if (!b.b.any) return;
    bad = true;
    if (abort.word) *abort.word = abort.gen;
  }
  static bool stopped(const ik::Abort& a) { return a.word && ik::aborted(a); }

  template <typename U, typename I, int D>
  void read(const ik::Params<I, D>& p, unsigned blocks) {
    ik::Bad b;
    each<I>("read", blocks, [&](I bl, I t, I g) { ik::copy_thread<U, false>(p, bl, t, g, b); });
    report(b, p.abort);
  }
  template <typename I, int D>
  void check(const ik::Params<I, D>& p, unsigned blocks) {
    ik::Bad b;
    each<I>("check", blocks, [&](I bl, I t, I g) { ik::check_thread(p, bl, t, g, b); });
    report(b, p.abort);
  }
  template <typename U, typename I, int D>
  void put(const ik::Params<I, D>& p, unsigned blocks) {
    if (stopped(p.abort)) return;
    ik::Bad b;  // values were checked: never set
    each<I>("put", blocks, [&](I bl, I t, I g) { ik::copy_thread<U, true>(p, bl, t, g, b); });
  }
  template <typename T, typename I, int D>
  void add(const ik::Params<I, D>& p, stridewise::arith::AccOf<T>* acc, unsigned blocks) {
    if (stopped(p.abort)) return;
    ik::Bad b;
    each<I>("add", blocks, [&](I bl, I t, I g) { ik::add_thread<T>(p, acc, bl, t, g, b); });
  }
  template <typename K, typename Vt, typename I, int D>
  void keys(const ik::Params<I, D>& p, K* k, Vt* v, int payload, unsigned blocks) {
    ik::Bad b;
    if (payload) ++payloads;
    each<I>("keys", blocks,
            [&](I bl, I t, I g) { ik::keys_thread(p, k, v, payload, bl, t, g, b); });
    report(b, p.abort);
  }
  size_t sort_temp_bytes(int64_t n) const { return size_t(100 + n); }  // any size
  int sort(const ik::SortSpace& w, int64_t n, int end_bit) {
    return w.wide ? sort_as<uint64_t, int64_t>(w, n, end_bit)
                  : sort_as<uint32_t, int32_t>(w, n, end_bit);
  }
  template <typename K, typename Vt>
  int sort_as(const ik::SortSpace& w, int64_t n, int end_bit) {
    launches.push_back(w.wide ? "sort" : "sort32");
    EXPECT_GE(end_bit, 1);
    const K* k0 = static_cast<const K*>(w.keys[0]);
    const Vt* v0 = static_cast<const Vt*>(w.vals[0]);
    for (int64_t i = 0; i < n && end_bit < 64; ++i)
      EXPECT_EQ(uint64_t(k0[i]) >> end_bit, 0u) << "key past end_bit";
    std::vector<int64_t> order(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i) order[i] = i;
    std::stable_sort(order.begin(), order.end(),
                     [&](int64_t x, int64_t y) { return k0[x] < k0[y]; });
    for (int64_t i = 0; i < n; ++i) {
      static_cast<K*>(w.keys[1])[i] = k0[order[i]];
      static_cast<Vt*>(w.vals[1])[i] = v0[order[i]];
    }
    return 1;
  }
  template <typename U, typename I, int D>
  void fill_rows(const ik::FillParams<I, D>& f, const uint64_t* k, unsigned blocks) {
    if (stopped(f.abort)) return;
    each<I>("fill_rows", blocks, [&](I bl, I t, I g) { ik::fill_rows_thread<U>(f, k, bl, t, g); });
  }
  int64_t one_wave() const { return wave; }
  // fill_block_kernel: each block sorts its own shared keys (its phases run for every thread
  // before the next: the block's barriers), checking every block's keys came out sorted.
  template <typename U, typename I, int D>
  void fill_block(const ik::Params<I, D>& seq, const ik::FillParams<I, D>& f, int64_t n2,
                  unsigned blocks, size_t smem) {
    launches.push_back("fill_block");
    EXPECT_EQ(smem, size_t(n2) * sizeof(I));
    std::vector<std::vector<I>> k(blocks, std::vector<I>(size_t(n2)));
    for (unsigned bl = 0; bl < blocks; ++bl) {
      ik::Bad b;
      for (I t = 0; t < I(ik::kThreads); ++t)
        ik::fill_keys_phase(seq, k[bl].data(), n2, t, I(ik::kThreads), b);
      report(b, seq.abort);
      if (b.b.any) return;  // every block reads the same values: none writes
      for (int64_t s = 2; s <= n2; s *= 2)
        for (int64_t j = s / 2; j > 0; j /= 2)
          for (I t = 0; t < I(ik::kThreads); ++t)
            ik::bitonic_step(k[bl].data(), n2, s, j, t, I(ik::kThreads));
      EXPECT_TRUE(std::is_sorted(k[bl].begin(), k[bl].end()));
    }
    for (unsigned bl = 0; bl < blocks; ++bl)
      for (I t = 0; t < I(ik::kThreads); ++t)
        ik::fill_rows_thread<U>(f, k[bl].data(), I(bl), t, I(blocks));
  }
  // The sorted path's back half: its own launch sequence (launch_segments) over the bodies of
  // common/segments.h, every thread of the (capped) grid.
  stridewise::Status segments(const stridewise::cuda_seg::SegJob& j) {
    if (j.v > 1) ++vectorized;
    return stridewise::cuda_seg::launch_segments(j, *this);
  }
  template <typename T, int V, typename I, int D>
  void seg_acc(const stridewise::cuda_seg::SegArgs<I, D>& a, unsigned blocks) {
    if (stopped(a.abort)) return launches.push_back("seg_acc");
    each<I>("seg_acc", blocks, [&](I bl, I t, I g) {
      stridewise::cuda_seg::seg_acc_thread<T, V>(a, int64_t(bl), int64_t(t), int64_t(g));
    });
  }
  template <typename T, int V, typename I, int D>
  void seg_fix(const stridewise::cuda_seg::SegArgs<I, D>& a, unsigned blocks) {
    if (stopped(a.abort)) return launches.push_back("seg_fix");
    each<I>("seg_fix", blocks, [&](I bl, I t, I g) {
      stridewise::cuda_seg::seg_fix_thread<T, V>(a, int64_t(bl), int64_t(t), int64_t(g));
    });
  }
  template <typename U, int V, typename I, int D>
  void seg_put(const stridewise::cuda_seg::SegArgs<I, D>& a, int units, unsigned blocks) {
    if (stopped(a.abort)) return launches.push_back("seg_put");
    each<I>("seg_put", blocks, [&](I bl, I t, I g) {
      stridewise::cuda_seg::seg_put_thread<U, V>(a, units, int64_t(bl), int64_t(t), int64_t(g));
    });
  }
};

// A workspace of `bytes`, 256-byte aligned (CUB's alignment, the layout's parts').
struct Workspace {
  std::vector<unsigned char> mem;
  void* base = nullptr;
  explicit Workspace(int64_t bytes) : mem(static_cast<size_t>(bytes) + 256) {
    const uintptr_t p = reinterpret_cast<uintptr_t>(mem.data());
    base = mem.data() + (256 - p % 256) % 256;
  }
};

ik::Abort abort_of(const stridewise::IndexKArgs& a, int64_t* word) {
  *word = 0;
  return ik::writes(a) ? ik::Abort{word, 1} : ik::Abort{};  // CudaCall: a read takes none
}

// index_k_cuda's launch sequence for one case (wide: the 64-bit offsets, whatever the plan
// allows); returns whether a bad value was met.
bool emulate_any(const stridewise::IndexKArgs& a, const IndexKPlan& planned, bool wide,
                 IndexKHostRunner* seen = nullptr) {
  IndexKPlan plan = planned;
  if (wide) plan.loop.fits_int32 = false;
  IndexKHostRunner r;
  int64_t word = 0;
  Workspace ws(int64_t(ik::index_k_workspace_bytes(a, plan, ik::PathChoice::kAuto, r)));
  EXPECT_EQ(
      ik::run_index_k(a, plan, ws.base, nullptr, abort_of(a, &word), ik::PathChoice::kAuto, r),
      Status::kOk);
  if (seen) *seen = r;
  return r.bad;
}

// The sorted fill's sequence (launch_fill_rows), whether or not the call would take it: keys
// over IndexKPlan::seq (validating), the sort, then fill_rows over every (row, sorted key).
template <typename I, int D>
bool emulate_fill_rows(const stridewise::IndexKArgs& a, const IndexKPlan& plan) {
  IndexKHostRunner r;
  int64_t word = 0;
  Workspace ws(ik::sort_space(a, plan, true, nullptr, r.sort_temp_bytes(plan.seq.numel)).total);
  EXPECT_EQ((ik::launch_fill_rows<I, D>(a, plan, ws.base, nullptr, abort_of(a, &word), r)),
            Status::kOk);
  return r.bad;
}

// The block-sorted fill's sequence (launch_fill_block) with one wave of `blocks` blocks.
template <typename I, int D>
bool emulate_fill_block(const stridewise::IndexKArgs& a, const IndexKPlan& plan, unsigned blocks) {
  IndexKHostRunner r;
  r.wave = blocks;
  EXPECT_EQ((ik::launch_fill_block<I, D>(a, plan, nullptr, r)), Status::kOk);
  return r.bad;
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
      const bool bad = trial % 3 == 0 ? emulate_fill_block<int64_t, 64>(c.args, plan, 2)
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
bool emulate_sorted(const stridewise::IndexKArgs& a, const IndexKPlan& plan, int* vectorized,
                    unsigned cap = 3, std::vector<std::string>* launches = nullptr,
                    int* payloads = nullptr) {
  IndexKHostRunner r;
  r.cap = cap;
  int64_t word = 0;
  const bool wide = !ik::narrow_keys(a, plan);
  Workspace ws(ik::sort_space(a, plan, wide, nullptr, r.sort_temp_bytes(plan.seq.numel)).total);
  EXPECT_EQ((ik::launch_sorted<I, D>(a, plan, ws.base, nullptr, abort_of(a, &word), r)),
            Status::kOk);
  *vectorized += r.vectorized;
  if (launches) *launches = r.launches;
  if (payloads) *payloads += r.payloads;
  return r.bad;
}

TEST(IndexKEmulated, SortedPathResolvesDuplicatesInIndexOrder) {
  const uint64_t seed = test_seed();
  Rng rng(seed);
  int dups = 0, ran = 0, vectorized = 0, payloads = 0;
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
    const bool bad =
        small && trial % 2
            ? emulate_sorted<uint32_t, 6>(c.args, plan, &vectorized, 3, nullptr, &payloads)
            : emulate_sorted<int64_t, 64>(c.args, plan, &vectorized, 3, nullptr, &payloads);
    EXPECT_FALSE(bad);
    EXPECT_EQ(diff_bytes(c.self.base(), want.data(), want.size()), "")
        << "seed " << seed << " trial " << trial << " " << c.describe();
    if (HasFailure()) return;
  }
  EXPECT_EQ(ran, 300);
  EXPECT_GT(dups, 30);      // the cases this path exists for
  EXPECT_GT(payloads, 10);  // the adds and means of one element per position (take/put's)
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

// Element e (contiguous views) of a float32, float16 or bfloat16 tensor, as a float.
double get_float(const stridewise::StridedView& v, int64_t e) {
  namespace el = stridewise::elem;
  if (v.dtype == DType::kFloat32) return double(static_cast<const float*>(v.data)[e]);
  const uint16_t h = static_cast<const uint16_t*>(v.data)[e];
  return double(v.dtype == DType::kFloat16 ? el::f16_to_float(h) : el::bf16_to_float(h));
}
void set_float(const stridewise::StridedView& v, int64_t e, float f) {
  namespace el = stridewise::elem;
  if (v.dtype == DType::kFloat32) {
    static_cast<float*>(v.data)[e] = f;
    return;
  }
  static_cast<uint16_t*>(v.data)[e] =
      v.dtype == DType::kFloat16 ? el::float_to_f16(f) : el::float_to_bf16(f);
}

// x (8, w) of dt at rows idx: x[idx] += v (n, w), values in [-1, 1) as dt holds them. Most
// positions go to rows 2 and 5 (the hot rows of `x[i] += v`'s backward), so their runs span
// several chunks of the sorted path's back half (kSegChunk positions each).
IndexKCase hot_rows_case(Rng& rng, DType dt, int64_t n, int64_t w = 32) {
  IndexKCase c;
  c.self = make_tensor(dt, {8, w}, {w, 1}, 0);
  c.dense = make_tensor(dt, {n, w}, {w, 1}, 0);
  c.idx.push_back(make_tensor(DType::kInt64, {n}, {1}, 0));
  std::uniform_real_distribution<float> u(-1.f, 1.f);
  for (TestTensor* t : {&c.self, &c.dense})
    for (int64_t e = 0; e < t->view.numel(); ++e) set_float(t->view, e, u(rng));
  for (int64_t i = 0; i < n; ++i) {
    const int64_t r = rand_int(rng, 0, 9);
    write_index(c.idx[0].view, i, r < 7 ? 2 : r < 9 ? 5 : rand_int(rng, -8, 7));
  }
  c.shape = {n, w};
  c.bshape = {n};
  c.dims = {0};
  stridewise::IndexKArgs& a = c.args;
  a.desc = {stridewise::OpCode::kIndexPut, IndexRole::kWrite, Combine::kAdd, true, /*wraps=*/true};
  a.self = c.self.view;
  a.self.strides[0] = 0;
  a.self.sizes[0] = n;
  a.target = c.self.view;
  a.src = c.dense.view;
  a.index[0] = c.idx[0].view;
  a.index[0].rank = 2;
  a.index[0].sizes[1] = w;
  a.index[0].strides[1] = 0;
  a.term_size[0] = 8;
  a.term_stride[0] = w;
  return c;
}

// Runs that cross chunks fold in pieces (common/segments.h): the result is the same bytes on
// every schedule (grid caps 1, 3 and 7; both offset and key widths), and within float32's error of
// the float64 sum for float32, float16 and bfloat16 alike: the narrow types accumulate in float32
// and round once, so they stay within half a unit of their own precision plus that error.
TEST(IndexKEmulated, LongRunsFoldInPiecesRepeatablyAndRoundOnce) {
  const uint64_t seed = test_seed();
  Rng rng(seed);
  // w 32: rows in 16-byte units; w 1: one element per position, the values carried through
  // the sort (payload keys: 4-byte slots with 32-bit keys, 8-byte ones with 64-bit keys).
  for (int64_t w : {32, 1}) {
    for (DType dt : {DType::kFloat32, DType::kFloat16, DType::kBFloat16}) {
      const int64_t n = 300;  // row 2: ~210 positions, 4 chunks at least
      IndexKCase c = hot_rows_case(rng, dt, n, w);
      const std::vector<unsigned char> before(c.self.base(),
                                              c.self.base() + c.self.storage_bytes());
      std::vector<double> want(8 * w), mag(8 * w);
      for (int64_t e = 0; e < 8 * w; ++e) {
        want[e] = get_float(c.self.view, e);
        mag[e] = std::fabs(want[e]);
      }
      for (int64_t i = 0; i < n; ++i) {
        int64_t r = read_index(c.idx[0].view, i);
        if (r < 0) r += 8;
        for (int64_t k = 0; k < w; ++k) {
          const double x = get_float(c.dense.view, i * w + k);
          want[r * w + k] += x;
          mag[r * w + k] += std::fabs(x);
        }
      }
      IndexKPlan plan;
      ErrorDetail err;
      ASSERT_EQ(stridewise::plan_index_k(c.args, &plan, &err), Status::kOk) << err.message;
      ASSERT_TRUE(ik::sorted_path(c.args, plan) || dt == DType::kFloat32);
      std::vector<std::vector<unsigned char>> results;
      int vectorized = 0, payloads = 0;
      for (unsigned cap : {1u, 3u, 7u}) {
        for (bool wide : {false, true}) {
          std::memcpy(c.self.base(), before.data(), before.size());
          IndexKPlan p = plan;
          if (wide) p.loop.fits_int32 = p.seq.fits_int32 = false;  // 64-bit offsets and keys
          std::vector<std::string> ran;
          const bool bad =
              wide ? emulate_sorted<int64_t, 64>(c.args, p, &vectorized, cap, &ran, &payloads)
                   : emulate_sorted<uint32_t, 6>(c.args, p, &vectorized, cap, &ran, &payloads);
          EXPECT_FALSE(bad);
          EXPECT_EQ(ran, (std::vector<std::string>{"keys", wide ? "sort" : "sort32", "seg_acc",
                                                   "seg_fix"}));
          results.emplace_back(c.self.base(), c.self.base() + c.self.storage_bytes());
        }
      }
      for (size_t k = 1; k < results.size(); ++k)
        EXPECT_EQ(results[k], results[0]) << "schedule " << k << " differs, seed " << seed;
      EXPECT_EQ(vectorized, w == 32 ? 6 : 0);  // rows of 32 contiguous elements: 16-byte units
      EXPECT_EQ(payloads, w == 1 ? 6 : 0);
      const double half_ulp = dt == DType::kFloat32 ? 0 : dt == DType::kFloat16 ? 0x1p-11 : 0x1p-8;
      for (int64_t e = 0; e < 8 * w; ++e) {
        const double got = get_float(c.self.view, e);
        const double tol = std::fabs(want[e]) * half_ulp + mag[e] * n * 0x1p-24;
        EXPECT_LE(std::fabs(got - want[e]), tol)
            << "element " << e << " " << c.describe() << " seed " << seed;
      }
      if (HasFailure()) return;
    }
  }
}

// Which adds sort (sorted_path): the narrow types always; float32 over rows once the sort pays
// (seg_pays: 2^20 elements and 32-element rows, scatter's rule), else atomics; an integer add
// never in fast mode (exact in any order).
TEST(IndexKEmulated, FloatAddsOverLongRowsSort) {
  Rng rng(test_seed());
  struct Want {
    DType dt;
    int64_t n, w;
    bool sorted;
  };
  for (const Want& k :
       {Want{DType::kFloat32, 32768, 32, true}, Want{DType::kFloat32, 32767, 32, false},
        Want{DType::kFloat32, 65536, 16, false}, Want{DType::kFloat16, 100, 32, true},
        Want{DType::kBFloat16, 100, 16, true}, Want{DType::kInt32, 32768, 32, false}}) {
    IndexKCase c = hot_rows_case(rng, k.dt == DType::kInt32 ? DType::kFloat32 : k.dt, k.n, k.w);
    c.args.self.dtype = c.args.src.dtype = c.args.target.dtype = k.dt;  // the plan reads no data
    IndexKPlan plan;
    ErrorDetail err;
    ASSERT_EQ(stridewise::plan_index_k(c.args, &plan, &err), Status::kOk) << err.message;
    EXPECT_EQ(ik::sorted_path(c.args, plan), k.sorted) << c.describe();
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
    const bool bad = emulate_sorted<int64_t, 64>(c.args, plan, &vectorized);
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

// take() from a self of 30 dims that no two merge (sizes 2, every stride 1: overlapping,
// which a read allows): the unravel calculator has 30 dims, past the 25 index_k_cuda once
// refused (kUnsupported, "more than 25 dims after coalescing"); the launch now takes the
// kMaxRank capacity, as gather and scatter do. Reads and an add, both offset widths.
TEST(IndexKEmulated, TakesRanksPast25) {
  Rng rng(test_seed());
  for (int trial = 0; trial < 4; ++trial) {
    const IndexRole role = trial < 2 ? IndexRole::kRead : IndexRole::kWrite;
    const Combine comb = role == IndexRole::kWrite ? Combine::kAdd : Combine::kCopy;
    IndexKCase c = make_index_k_case(rng, DType::kFloat32, IndexMode::kUnravel, role, comb);
    if (numel(c.shape) == 0) continue;
    const int r = 30;
    c.self =
        make_tensor(DType::kFloat32, std::vector<int64_t>(r, 2), std::vector<int64_t>(r, 1), 0);
    for (int64_t e = 0; e <= r; ++e) {  // small integers: an add is exact in any order
      const float f = float(rand_int(rng, -8, 8));
      std::memcpy(static_cast<float*>(c.self.view.data) + e, &f, 4);
    }
    const int64_t n = c.self.view.numel();
    fill_index(rng, c.idx[0], c.args.desc.lowest_index(n), n - 1);
    stridewise::IndexKArgs& a = c.args;
    a.target = c.self.view;
    a.self = c.self.view;
    a.self.rank = static_cast<int>(c.shape.size());
    for (int d = 0; d < a.self.rank; ++d) {
      a.self.sizes[d] = c.shape[d];
      a.self.strides[d] = 0;
    }
    const std::vector<unsigned char> want = index_k_reference(c);
    IndexKPlan plan;
    ErrorDetail err;
    ASSERT_EQ(stridewise::plan_index_k(a, &plan, &err), Status::kOk) << err.message;
    ASSERT_EQ(plan.unravel.rank, r);
    IndexKHostRunner seen;
    EXPECT_FALSE(emulate_any(a, plan, trial % 2 == 1, &seen)) << c.describe();
    EXPECT_FALSE(seen.launches.empty());
    const TestTensor& t = role == IndexRole::kWrite ? c.self : c.dense;
    EXPECT_EQ(diff_bytes(t.base(), want.data(), want.size()), "") << c.describe();
  }
}

}  // namespace
}  // namespace swt
