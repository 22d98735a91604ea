// The CUDA gather's kernel bodies and dispatch (gather_cuda_impl.h), run on the host: the
// HostRunner executes every thread of every block of the grid gather_cuda would launch,
// sequentially. This checks the tiling, unit widths, offset types and bad-index handling
// on machines without a GPU (it needs no device and never skips), and pins down which
// kernel, unit and calculator size each benchmark shape gets.
//
// Unshifted cases run on the guarded host storages of test_util.h, so a body that reads
// past an operand's storage dies with SIGSEGV here instead of passing.
#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <vector>

#include "cuda_test_util.h"  // reference_out (host only)
#include "gather_cuda_impl.h"

namespace swct {
namespace {

namespace cg = stridewise::cuda_gather;
using stridewise::DType;
using stridewise::ErrorDetail;
using stridewise::GatherArgs;
using stridewise::GatherPlan;
using stridewise::Status;
using swt::GatherCase;

struct Launch {
  std::string kernel;  // "rows" or "elems"
  int unit = 0;        // bytes per load/store
  int dims = 0;        // OffsetCalculator capacity D
  bool u32 = false;
  bool idx64 = false;
  unsigned blocks = 0;
  int group = 0;  // rows: threads per row tile
  int64_t tiles_per_row = 0;
};

struct HostRunner {
  bool execute = true;
  Launch launch;
  cg::BadIndex first;  // first report in (block, thread) order

  // Offsets are in units, so every access is aligned iff the base pointers are: x86 would
  // not fault on a misaligned load, so check the invariant the GPU depends on directly.
  static void expect_aligned(const void* out, const void* self, size_t unit) {
    EXPECT_EQ(cg::addr(out) % unit, 0u) << "out base misaligned for " << unit << "-byte units";
    EXPECT_EQ(cg::addr(self) % unit, 0u) << "self base misaligned for " << unit << "-byte units";
  }

  template <typename U, typename IdxT, typename I, int D>
  void rows(const cg::RowsArgs<IdxT, I, D>& a, unsigned blocks) {
    launch = {"rows",
              int(sizeof(U)),
              D,
              sizeof(I) == 4,
              sizeof(IdxT) == 8,
              blocks,
              1 << a.group_shift,
              int64_t(a.tiles_per_row.divisor)};
    if (execute) expect_aligned(a.out, a.self, sizeof(U));
    for (unsigned b = 0; execute && b < blocks; ++b)
      for (unsigned t = 0; t < unsigned(cg::kThreads); ++t) {
        cg::BadIndex bad;
        cg::rows_thread<U>(a, I(b), I(t), I(blocks), bad);
        if (bad.any && !first.any) first = bad;
      }
  }
  template <typename E, typename IdxT, typename I, int D>
  void elems(const cg::ElemsArgs<IdxT, I, D>& a, unsigned blocks) {
    launch = {"elems", int(sizeof(E)), D, sizeof(I) == 4, sizeof(IdxT) == 8, blocks, 0, 0};
    if (execute) expect_aligned(a.out, a.self, sizeof(E));
    for (unsigned b = 0; execute && b < blocks; ++b)
      for (unsigned t = 0; t < unsigned(cg::kThreads); ++t) {
        cg::BadIndex bad;
        cg::elems_thread<E>(a, I(b), I(t), I(blocks), bad);
        if (bad.any && !first.any) first = bad;
      }
  }
};

// gather_cuda's host path with the HostRunner in place of the launch.
Status emulate(const GatherArgs& args, HostRunner& r, ErrorDetail* e) {
  GatherPlan plan;
  Status st = stridewise::plan_gather(args, &plan, e);
  if (st != Status::kOk || plan.loop.numel == 0) return st;
  std::string why;
  st = cg::run_gather(args, plan, {nullptr, plan.dim, plan.self_dim_size}, r, &why);
  if (st != Status::kOk) return st;
  if (!r.first.any) return Status::kOk;
  e->status = Status::kIndexOutOfRange;
  e->value = r.first.value;
  e->position = r.first.position;
  return Status::kIndexOutOfRange;
}

// A 16-byte aligned host copy of a storage, `shift` bytes in.
struct Shifted {
  Shifted(const swt::TestTensor& t, size_t shift)
      : buf(t.storage_bytes() + shift + 16), view(t.view) {
    base = buf.data() + shift;
    if (t.storage_bytes()) std::memcpy(base, t.base(), t.storage_bytes());
    view.data = base + (static_cast<const unsigned char*>(t.view.data) - t.base());
  }
  std::vector<unsigned char> buf;
  unsigned char* base;
  stridewise::StridedView view;
};

::testing::AssertionResult emulated_matches(GatherCase& c, size_t out_shift, size_t self_shift,
                                            uint64_t seed, int64_t want_bad = 0) {
  const std::string where = "\n  case: " + c.describe() + "\n  shifts " +
                            std::to_string(out_shift) + "/" + std::to_string(self_shift) +
                            "; STRIDEWISE_TEST_SEED=" + std::to_string(seed);
  int64_t bad = 0;
  const std::vector<unsigned char> want = reference_out(c, &bad);
  if (bad != want_bad)
    return ::testing::AssertionFailure() << "reference saw " << bad << " bad values" << where;
  Shifted so(c.out, out_shift), ss(c.self, self_shift);
  GatherArgs a = c.args();
  const bool shifted = out_shift || self_shift;
  if (shifted) {
    a.out = so.view;
    a.self = ss.view;
  }
  HostRunner r;
  ErrorDetail e;
  const Status st = emulate(a, r, &e);
  {  // plan_gather's vector width (pick_gather_vec) is never wider than the unit used
    GatherPlan plan;
    ErrorDetail pe;
    if (stridewise::plan_gather(a, &plan, &pe) == Status::kOk && plan.vec > 1 &&
        (r.launch.kernel != "rows" || r.launch.unit < plan.vec * c.out.esize))
      return ::testing::AssertionFailure() << "plan.vec " << plan.vec << " but " << r.launch.kernel
                                           << " with " << r.launch.unit << "-byte units" << where;
  }
  const Status want_st = bad ? Status::kIndexOutOfRange : Status::kOk;
  if (st != want_st)
    return ::testing::AssertionFailure() << "status " << stridewise::status_name(st) << where;
  const int64_t hi = c.self.view.rank > 0 ? c.self.view.sizes[c.dim] : 1;
  if (bad && e.value >= 0 && e.value < hi)
    return ::testing::AssertionFailure() << "reported value " << e.value << " is valid" << where;
  if (bad) {  // the reported position (plan order) must hold the reported value
    GatherPlan plan;
    ErrorDetail pe;
    stridewise::plan_gather(a, &plan, &pe);
    if (e.position < 0 || e.position >= plan.loop.numel)
      return ::testing::AssertionFailure() << "position " << e.position << " out of range" << where;
    const int64_t off = stridewise::plan_offset(plan.loop, stridewise::kGatherIndex, e.position);
    if (swt::read_index(a.index, off) != e.value)
      return ::testing::AssertionFailure()
             << "position " << e.position << " holds " << swt::read_index(a.index, off) << ", not "
             << e.value << where;
  }
  const unsigned char* got = shifted ? so.base : c.out.base();
  const std::string diff = swt::diff_bytes(got, want.data(), want.size());
  if (!diff.empty())
    return ::testing::AssertionFailure() << diff << " [" << r.launch.kernel << " unit "
                                         << r.launch.unit << " D " << r.launch.dims << "]" << where;
  return ::testing::AssertionSuccess();
}

constexpr DType kDataTypes[] = {DType::kUInt8, DType::kFloat16, DType::kFloat32, DType::kFloat64,
                                DType::kComplex128};

TEST(GatherEmulated, RandomLayoutsEveryRankBucket) {
  const uint64_t seed = swt::test_seed();
  swt::Rng rng(seed);
  int failures = 0;
  for (int rank : {0, 1, 2, 3, 4, 5, 6, 7, 8, 12, 25, 64}) {
    for (int i = 0; i < (rank <= 8 ? 400 : 100) && failures < 5; ++i) {
      const DType dt = kDataTypes[swt::rand_int(rng, 0, 4)];
      const int es = stridewise::elem_size(dt);
      swt::GatherCaseOpts opts;
      opts.max_numel = 3000;
      opts.allow_empty = true;
      GatherCase c = swt::random_gather_case(
          rng, dt, swt::coin(rng, 0.5) ? DType::kInt64 : DType::kInt32, rank, opts);
      const bool shift = es > 1 && swt::coin(rng, 0.3);
      const size_t os = shift ? size_t(swt::rand_int(rng, 0, es - 1)) : 0;
      const size_t ss = shift ? size_t(swt::rand_int(rng, 0, es - 1)) : 0;
      const auto r = emulated_matches(c, os, ss, seed);
      EXPECT_TRUE(r) << "rank " << rank << " iteration " << i;
      failures += r ? 0 : 1;
    }
  }
}

// One stored index value made bad: every out element that reads it keeps its poison, and
// the report names that value.
TEST(GatherEmulated, BadValueSkipsExactlyItsElements) {
  const uint64_t seed = swt::test_seed();
  swt::Rng rng(seed);
  for (int i = 0; i < 1000; ++i) {
    const DType dt = kDataTypes[swt::rand_int(rng, 0, 4)];
    GatherCase c = swt::random_gather_case(rng, dt, DType::kInt64,
                                           static_cast<int>(swt::rand_int(rng, 1, 5)), {});
    const int64_t n = static_cast<int64_t>(c.index.storage_bytes() / 8);
    if (c.index.view.numel() == 0 || n == 0) continue;
    const int64_t hi = c.self.view.sizes[c.dim];
    const int64_t value =
        swt::coin(rng, 0.5) ? -1 - swt::rand_int(rng, 0, 3) : hi + swt::rand_int(rng, 0, 3);
    stridewise::StridedView base = c.index.view;
    base.data = c.index.base();
    swt::write_index(base, swt::rand_int(rng, 0, n - 1), value);
    int64_t bad = 0;
    (void)reference_out(c, &bad);
    EXPECT_TRUE(emulated_matches(c, 0, 0, seed, bad)) << "iteration " << i;
  }
}

// Which kernel, unit, calculator and offset width the shapes of bench/bench_gather.py get.
// Views over fake, 256-byte aligned addresses: only the dispatch runs, nothing is touched.
Launch dispatch_of(DType dt, std::initializer_list<int64_t> ssz, std::initializer_list<int64_t> sst,
                   std::initializer_list<int64_t> isz, std::initializer_list<int64_t> ist,
                   std::initializer_list<int64_t> ost, int64_t dim, uintptr_t misalign = 0) {
  GatherArgs a;
  a.dim = dim;
  a.self =
      stridewise::make_view(reinterpret_cast<void*>(uintptr_t(1) << 40 | misalign), dt, ssz, sst);
  a.index =
      stridewise::make_view(reinterpret_cast<void*>(uintptr_t(2) << 40), DType::kInt64, isz, ist);
  a.out = stridewise::make_view(reinterpret_cast<void*>(uintptr_t(3) << 40), dt, isz, ost);
  HostRunner r;
  r.execute = false;
  ErrorDetail e;
  EXPECT_EQ(emulate(a, r, &e), Status::kOk) << e.message;
  return r.launch;
}

TEST(GatherEmulated, BenchmarkShapesDispatch) {
  // Seed: (4,16,384) fp16, index (4,1,1) expanded to (4,1,384): 48 units of 16 bytes a row.
  Launch l = dispatch_of(DType::kFloat16, {4, 16, 384}, {6144, 384, 1}, {4, 1, 384}, {1, 1, 0},
                         {384, 384, 1}, 1);
  EXPECT_EQ(l.kernel, "rows");
  EXPECT_EQ(l.unit, 16);
  EXPECT_EQ(l.dims, 4);
  EXPECT_TRUE(l.u32);
  EXPECT_EQ(l.group, 16);
  EXPECT_EQ(l.tiles_per_row, 1);
  // Expanded index (64,1024,1) -> (64,1024,1024) into self (64,4096,1024), dim 1.
  for (DType dt : {DType::kFloat16, DType::kBFloat16, DType::kFloat32}) {
    l = dispatch_of(dt, {64, 4096, 1024}, {4096 * 1024, 1024, 1}, {64, 1024, 1024}, {1024, 1, 0},
                    {1024 * 1024, 1024, 1}, 1);
    EXPECT_EQ(l.kernel, "rows");
    EXPECT_EQ(l.unit, 16);
    EXPECT_EQ(l.dims, 4);
    EXPECT_TRUE(l.u32);
    EXPECT_EQ(l.group, 32);
    EXPECT_EQ(l.tiles_per_row, dt == DType::kFloat32 ? 2 : 1);
  }
  // Contiguous random index (64,1024,1024) into (64,4096,1024), dim 1.
  l = dispatch_of(DType::kFloat16, {64, 4096, 1024}, {4096 * 1024, 1024, 1}, {64, 1024, 1024},
                  {1024 * 1024, 1024, 1}, {1024 * 1024, 1024, 1}, 1);
  EXPECT_EQ(l.kernel, "elems");
  EXPECT_EQ(l.unit, 2);
  EXPECT_EQ(l.dims, 4);
  EXPECT_TRUE(l.u32);
  // Top-k along the last dim: self (65536,4096), index (65536,256), dim 1.
  l = dispatch_of(DType::kBFloat16, {65536, 4096}, {4096, 1}, {65536, 256}, {256, 1}, {256, 1}, 1);
  EXPECT_EQ(l.kernel, "elems");
  EXPECT_TRUE(l.u32);
  // Transposed index: contiguous (64,1024,1024) viewed .transpose(1,2).
  l = dispatch_of(DType::kFloat32, {64, 4096, 1024}, {4096 * 1024, 1024, 1}, {64, 1024, 1024},
                  {1024 * 1024, 1, 1024}, {1024 * 1024, 1024, 1}, 1);
  EXPECT_EQ(l.kernel, "elems");
  EXPECT_EQ(l.unit, 4);
  // Misaligned fp32 data (2-byte aligned): the rows kernel with 2-byte units.
  l = dispatch_of(DType::kFloat32, {8, 16}, {16, 1}, {8, 16}, {16, 1}, {16, 1}, 1, 2);
  EXPECT_EQ(l.kernel, "rows");
  EXPECT_EQ(l.unit, 2);
  // Self rows 2^31 bytes apart: 2^27 16-byte units still fit 32-bit offsets; with 63-byte
  // rows the unit is 1 byte and the offsets need 64 bits.
  l = dispatch_of(DType::kUInt8, {3, 64}, {int64_t(1) << 31, 1}, {2, 64}, {1, 0}, {64, 1}, 0);
  EXPECT_EQ(l.kernel, "rows");
  EXPECT_EQ(l.unit, 16);
  EXPECT_TRUE(l.u32);
  l = dispatch_of(DType::kUInt8, {3, 63}, {int64_t(1) << 31, 1}, {2, 63}, {1, 0}, {63, 1}, 0);
  EXPECT_EQ(l.unit, 1);
  EXPECT_FALSE(l.u32);
  l = dispatch_of(DType::kUInt8, {3, 63}, {int64_t(1) << 31, 1}, {2, 63}, {63, 1}, {63, 1}, 0);
  EXPECT_EQ(l.kernel, "elems");
  EXPECT_FALSE(l.u32);
}

}  // namespace
}  // namespace swct
