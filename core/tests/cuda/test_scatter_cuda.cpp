// scatter_cuda on the GPU against scatter_cpu on the same inputs (floating types within a
// tolerance, integers, bool and copy exactly; a racy copy may keep any of the values written
// to a position), deterministic mode bitwise equal across runs, and bad index values
// (nothing written, the record filled, the next call unaffected). The segment path
// (scatter_cuda_sorted.h, common/segments.h): repeatable bitwise, equal to the lines
// kernel where the arithmetic is exact and close to it where it rounds, with arbitrary values
// and heavy duplicates, and a bad index writes nothing. Skips without a device.
#include <algorithm>
#include <cstdio>
#include <cstring>
#include <memory>
#include <vector>

#include "cuda_test_util.h"
#include "scatter_test_util.h"

namespace swct {
namespace {

using stridewise::Combine;
using stridewise::DType;
using stridewise::ErrorDetail;
using stridewise::ScatterArgs;
using stridewise::ScatterPlan;
using stridewise::Status;

using ScatterCuda = CudaTest;

// c's operands on the device, and a workspace for its call.
struct DeviceScatter {
  explicit DeviceScatter(const ScatterCase& c)
      : out(c.out),
        index(c.index),
        self(c.in_place ? c.out : c.self),
        src(c.has_value ? c.index : c.src) {
    args = c.args();
    args.out = out.view();
    args.self = c.in_place ? out.view() : self.view();
    args.index = index.view();
    if (!c.has_value) args.src = src.view();
  }
  ~DeviceScatter() {
    if (ws) cudaFree(ws);
  }
  cudaError_t status() const {
    for (const DeviceTensor* t : {&out, &index, &self, &src})
      if (t->status() != cudaSuccess) return t->status();
    return cudaSuccess;
  }
  // Plans, allocates the workspace, runs on `stream`, synchronizes and polls. `choice`: the
  // sorted path's (scatter_cuda_sorted.h); kAuto is scatter_cuda itself.
  Status run(cudaStream_t stream, ErrorDetail* e, cs::PathChoice choice = cs::PathChoice::kAuto) {
    ScatterPlan plan;
    Status s = stridewise::plan_scatter(args, &plan, e);
    if (s != Status::kOk) return s;
    const size_t bytes = cs::scatter_cuda_workspace_bytes_with(args, plan, choice);
    if (choice == cs::PathChoice::kAuto) {
      EXPECT_EQ(bytes, stridewise::scatter_cuda_workspace_bytes(args, plan));
    }
    if (bytes > ws_bytes) {
      if (ws) cudaFree(ws);
      ws = nullptr;
      ws_bytes = 0;
      if (cudaMalloc(&ws, bytes) != cudaSuccess) return Status::kDeviceError;
      ws_bytes = bytes;
    }
    s = choice == cs::PathChoice::kAuto
            ? stridewise::scatter_cuda(args, plan, ws, bytes, stream, e)
            : cs::scatter_cuda_with(args, plan, ws, bytes, stream, e, choice);
    if (s != Status::kOk) return s;
    if (cudaStreamSynchronize(stream) != cudaSuccess) return Status::kDeviceError;
    return stridewise::cuda_poll_errors(-1, nullptr, e);
  }
  DeviceTensor out, index, self, src;
  ScatterArgs args;
  void* ws = nullptr;
  size_t ws_bytes = 0;
};

double rtol_of(DType t) {
  return t == DType::kFloat16 || t == DType::kBFloat16 ? 1e-2 : 1e-5;
}

// GPU result of c against scatter_cpu's on the same inputs (floating: within rtol_of and atol).
::testing::AssertionResult matches_cpu(ScatterCase& c, cudaStream_t stream, uint64_t seed,
                                       double atol = 1e-6,
                                       cs::PathChoice path = cs::PathChoice::kAuto) {
  const std::string where =
      "\n  case: " + c.describe() + "\n  STRIDEWISE_TEST_SEED=" + std::to_string(seed);
  int64_t bad = 0;
  Candidates cands;
  (void)reference_scatter(c, &bad, &cands);  // the candidates of a racy copy
  DeviceScatter d(c);
  if (d.status() != cudaSuccess)
    return ::testing::AssertionFailure() << "device copy failed" << where;
  ErrorDetail e;
  const Status gs = d.run(stream, &e, path);
  ErrorDetail ce;
  const Status cs_ = stridewise::scatter_cpu(c.args(), stridewise::serial_cpu_executor(), &ce);
  if (gs != cs_)
    return ::testing::AssertionFailure()
           << "cuda " << status_str(gs, e) << " cpu " << status_str(cs_, ce) << where;
  // (The value may differ: the GPU records the first bad value any thread met.)
  if (gs == Status::kIndexOutOfRange && (e.op != ce.op || e.dim != ce.dim || e.hi != ce.hi))
    return ::testing::AssertionFailure() << "record " << e.message << " vs " << ce.message << where;
  const std::vector<unsigned char> got = d.out.download();
  const std::vector<unsigned char> want(c.out.base(), c.out.base() + c.out.storage_bytes());
  const bool racy = c.desc.combine == Combine::kCopy && !c.deterministic;
  const std::string diff =
      compare_out(c, got.data(), want, racy ? &cands : nullptr, rtol_of(c.out.view.dtype), atol);
  if (!diff.empty()) return ::testing::AssertionFailure() << diff << where;
  return ::testing::AssertionSuccess();
}

// Bad values on the forced paths `paths` (in turn), deterministic as asked (-1: at random): the
// call fails with kIndexOutOfRange and out's storage is untouched.
void expect_bad_index_writes_nothing(swt::Rng& rng, cudaStream_t stream,
                                     const std::vector<cs::PathChoice>& paths, int deterministic) {
  for (int i = 0; i < 20; ++i) {
    ScatterCaseOpts o;
    o.deterministic = deterministic;
    o.rank = 2;
    o.max_size = 500;
    ScatterCase c = random_scatter_case(rng, o);
    if (c.desc.combine == Combine::kCopy || !plant_bad_index(rng, c)) continue;
    const std::vector<unsigned char> before(c.out.base(), c.out.base() + c.out.storage_bytes());
    DeviceScatter d(c);
    ASSERT_EQ(d.status(), cudaSuccess);
    ErrorDetail e;
    ASSERT_EQ(d.run(stream, &e, paths[i % paths.size()]), Status::kIndexOutOfRange) << c.describe();
    const std::vector<unsigned char> got = d.out.download();
    EXPECT_EQ(swt::diff_bytes(got.data(), before.data(), got.size()), "") << c.describe();
  }
}

TEST_F(ScatterCuda, MatchesCpuRandomLayouts) {
  swt::Rng rng(seed_);
  int failures = 0;
  for (int i = 0; i < 1500 && failures < 5; ++i) {
    ScatterCaseOpts o;
    o.max_size = swt::coin(rng, 0.1) ? 40 : 4;
    if (o.max_size > 4) o.rank = static_cast<int>(swt::rand_int(rng, 1, 3));
    o.nan = swt::coin(rng, 0.1);
    ScatterCase c = random_scatter_case(rng, o);
    const auto r = matches_cpu(c, stream_, seed_);
    EXPECT_TRUE(r) << "iteration " << i;
    failures += r ? 0 : 1;
  }
}

// Large duplicate-heavy problems: many threads on few targets (the atomics contend).
TEST_F(ScatterCuda, ContendedAtomicsEveryDtype) {
  swt::Rng rng(seed_);
  for (DType dt : kScatterTypes) {
    for (int comb = 1; comb <= 5; ++comb) {
      if (!cuda_runs(dt, static_cast<Combine>(comb))) continue;
      ScatterCaseOpts o;
      o.random_dtype = false;
      o.dtype = dt;
      o.combine = comb;
      o.rank = 2;
      o.max_size = 300;
      o.deterministic = 0;
      ScatterCase c = random_scatter_case(rng, o);
      EXPECT_TRUE(matches_cpu(c, stream_, seed_))
          << stridewise::dtype_name(dt) << " " << stridewise::combine_name(Combine(comb));
    }
  }
}

TEST_F(ScatterCuda, DeterministicIsBitwiseRepeatable) {
  swt::Rng rng(seed_);
  for (int i = 0; i < 40; ++i) {
    ScatterCaseOpts o;
    o.deterministic = 1;
    o.max_size = 64;
    o.rank = static_cast<int>(swt::rand_int(rng, 1, 3));
    ScatterCase c = random_scatter_case(rng, o);
    if (c.out.view.dtype == DType::kFloat32 && !c.has_value) {  // arbitrary floats: order shows
      float* p = reinterpret_cast<float*>(c.src.base());
      for (size_t k = 0; k < c.src.storage_bytes() / 4; ++k)
        p[k] = std::uniform_real_distribution<float>(-1, 1)(rng);
    }
    std::vector<unsigned char> first;
    for (int run = 0; run < 2; ++run) {
      DeviceScatter d(c);
      ASSERT_EQ(d.status(), cudaSuccess);
      ErrorDetail e;
      ASSERT_EQ(d.run(stream_, &e), Status::kOk) << e.message << "\n" << c.describe();
      const std::vector<unsigned char> got = d.out.download();
      if (run == 0)
        first = got;
      else
        EXPECT_EQ(swt::diff_bytes(got.data(), first.data(), got.size()), "") << c.describe();
    }
    EXPECT_TRUE(matches_cpu(c, stream_, seed_)) << "iteration " << i;
  }
}

TEST_F(ScatterCuda, BadIndexWritesNothingAndRecords) {
  swt::Rng rng(seed_);
  int planted = 0;
  for (int i = 0; i < 200; ++i) {
    ScatterCase c = random_scatter_case(rng, {});
    if (!plant_bad_index(rng, c)) continue;
    ++planted;
    const std::vector<unsigned char> before(c.out.base(), c.out.base() + c.out.storage_bytes());
    DeviceScatter d(c);
    ASSERT_EQ(d.status(), cudaSuccess);
    ErrorDetail e;
    ASSERT_EQ(d.run(stream_, &e), Status::kIndexOutOfRange) << c.describe();
    EXPECT_EQ(e.op, c.desc.op);
    EXPECT_EQ(e.dim, c.dim);
    EXPECT_EQ(e.hi, c.out.view.rank > 0 ? c.out.view.sizes[c.dim] : 1);
    EXPECT_TRUE(e.value < 0 || e.value >= e.hi) << e.message;
    const std::vector<unsigned char> got = d.out.download();
    EXPECT_EQ(swt::diff_bytes(got.data(), before.data(), got.size()), "") << c.describe();
    // The next call, on good data, runs in full (its own abort word).
    ScatterCase g = random_scatter_case(rng, {});
    EXPECT_TRUE(matches_cpu(g, stream_, seed_));
  }
  EXPECT_GT(planted, 100);
}

// The segment path against the lines kernel with arbitrary values (float sums show any
// change of order) and heavy duplicates (few targets, long lines): PyG's aggregation (few
// lines, many chunks per target), a 1-D scatter (one line), lines in 16-byte vectors, dim
// inner. Two runs are bitwise equal; integers, max/min and copy equal the lines kernel
// bitwise; floating add/multiply/mean are within a rounding bound of it (a segment that
// crosses a chunk of 64 sorted positions is folded piecewise: common/segments.h).
// And against scatter_cpu.
TEST_F(ScatterCuda, SegmentsRepeatAndMatchLines) {
  swt::Rng rng(seed_);
  struct Shape {
    std::vector<int64_t> out;
    int64_t dim, line_len;
  };
  const Shape shapes[] = {
      {{50, 128}, 0, 20000}, {{37}, 0, 30000}, {{64, 300}, 0, 3000}, {{300, 40}, 1, 2000}};
  int failures = 0;
  for (DType dt : {DType::kFloat32, DType::kFloat16, DType::kInt32}) {
    for (int comb = 0; comb <= 5; ++comb) {
      for (int form = 0; form < 4 && failures < 5; ++form) {
        const bool incl = form & 1;
        if (comb == 0 && incl) continue;  // copy ignores include_self
        const Shape& sh = shapes[form];
        ScatterCase c = shared_index_case(rng, dt, Combine(comb), incl, swt::coin(rng, 0.5),
                                          swt::coin(rng, 0.1), sh.out, sh.dim, sh.line_len, true);
        std::vector<unsigned char> got[3];
        const cs::PathChoice ch[3] = {cs::PathChoice::kAlways, cs::PathChoice::kAlways,
                                      cs::PathChoice::kNever};
        for (int k = 0; k < 3; ++k) {
          DeviceScatter d(c);
          ASSERT_EQ(d.status(), cudaSuccess);
          ErrorDetail e;
          ASSERT_EQ(d.run(stream_, &e, ch[k]), Status::kOk) << e.message << "\n" << c.describe();
          got[k] = d.out.download();
        }
        const std::string rep = swt::diff_bytes(got[0].data(), got[1].data(), got[0].size());
        EXPECT_EQ(rep, "") << "two runs differ: " << c.describe();
        const bool exact = dt == DType::kInt32 || comb == 0 || comb == int(Combine::kMax) ||
                           comb == int(Combine::kMin);
        // terms in [-1, 1]: a reordered float32 sum of n of them moves by < n * 2^-23
        const double atol = exact ? 0 : dt == DType::kFloat32 ? 1.2e-7 * double(sh.line_len) : 1e-3;
        const std::string vs =
            compare_out(c, got[0].data(), got[2], nullptr, exact ? 0 : rtol_of(dt), atol);
        EXPECT_EQ(vs, "") << (exact ? "not the lines kernel's bits: " : "too far: ")
                          << c.describe();
        const auto r = matches_cpu(c, stream_, seed_, std::max(atol, 1e-6));  // kAuto: segments
        EXPECT_TRUE(r);
        failures += rep.empty() && vs.empty() && r ? 0 : 1;
      }
    }
  }
  // The segment path is what ran: a copy needs a workspace only there.
  ScatterCase c = shared_index_case(rng, DType::kFloat32, Combine::kCopy, true, true, false,
                                    {50, 128}, 0, 2000, true);
  ScatterPlan plan;
  ErrorDetail e;
  ASSERT_EQ(stridewise::plan_scatter(c.args(), &plan, &e), Status::kOk);
  EXPECT_GT(stridewise::scatter_cuda_workspace_bytes(c.args(), plan), 0u);
  EXPECT_EQ(cs::scatter_cuda_workspace_bytes_with(c.args(), plan, cs::PathChoice::kNever), 0u);
}

// The tile path (scatter_cuda_tile.h) on the GPU, forced where it can run: shared-memory
// atomics, the dynamic shared memory opt-in above 48 KB (out's dim up to 3000), several tiles
// per block, random layouts; every accumulating combine and include_self, against
// scatter_cpu. Then bad values: nothing written, the record filled.
TEST_F(ScatterCuda, TilePathMatchesCpu) {
  swt::Rng rng(seed_);
  int failures = 0, tiled = 0;
  for (int i = 0; i < 150 && failures < 5; ++i) {
    ScatterCaseOpts o;
    o.deterministic = 0;
    o.rank = static_cast<int>(swt::rand_int(rng, 1, 3));
    o.max_size = i % 3 == 0 ? 3000 / (o.rank * o.rank) : 40;
    o.nan = swt::coin(rng, 0.1);
    ScatterCase c = random_scatter_case(rng, o);
    if (c.desc.combine == Combine::kCopy) continue;
    ScatterPlan plan;
    ErrorDetail e;
    ASSERT_EQ(stridewise::plan_scatter(c.args(), &plan, &e), Status::kOk);
    tiled += cs::call_tile(c.args(), plan, cs::PathChoice::kTile).use ? 1 : 0;
    const auto r = matches_cpu(c, stream_, seed_, 1e-6, cs::PathChoice::kTile);
    EXPECT_TRUE(r) << "iteration " << i;
    failures += r ? 0 : 1;
  }
  EXPECT_GT(tiled, 50);
  expect_bad_index_writes_nothing(rng, stream_, {cs::PathChoice::kTile}, 0);
}

// The bins path (scatter_cuda_bins.h) on the GPU, forced: whole lines (a warp per line, or
// the block for lines past 2048 steps), lines cut into chunks flushed by global atomics (into
// out or the workspace), the ordered deterministic mode, out's dim up to 6000 (bins filling
// most of the 48 KB); every accumulating combine, random layouts, against scatter_cpu. Then
// bad values: nothing written, the record filled.
TEST_F(ScatterCuda, BinsPathMatchesCpu) {
  swt::Rng rng(seed_);
  int failures = 0, binned = 0;
  for (int i = 0; i < 200 && failures < 5; ++i) {
    ScatterCaseOpts o;
    o.rank = static_cast<int>(swt::rand_int(rng, 1, 3));
    // Long lines (rank 1: out's dim up to 6000) without a CPU reference of 10^8 elements.
    o.max_size = i % 3 == 0 ? (o.rank == 1 ? 6000 : o.rank == 2 ? 700 : 100) : 40;
    o.nan = swt::coin(rng, 0.1);
    ScatterCase c = random_scatter_case(rng, o);
    if (c.desc.combine == Combine::kCopy) continue;
    const cs::PathChoice ch = i % 2 ? cs::PathChoice::kBins : cs::PathChoice::kBinsSplit;
    ScatterPlan plan;
    ErrorDetail e;
    ASSERT_EQ(stridewise::plan_scatter(c.args(), &plan, &e), Status::kOk);
    binned += cs::call_bins(c.args(), plan, ch).use ? 1 : 0;
    const auto r = matches_cpu(c, stream_, seed_, 1e-6, ch);
    EXPECT_TRUE(r) << "iteration " << i;
    failures += r ? 0 : 1;
  }
  EXPECT_GT(binned, 80);
  expect_bad_index_writes_nothing(rng, stream_, {cs::PathChoice::kBins, cs::PathChoice::kBinsSplit},
                                  -1);
}

// Fast-mode copies through a shared index over aligned contiguous lines (rows_put: no sort,
// 16-byte vectors), rows narrow and wide, heavy duplicates, the value form, a bad value now and
// then: every element ends as one of its candidates, and a bad value writes nothing.
TEST_F(ScatterCuda, RowsPutMatchesCpu) {
  swt::Rng rng(seed_);
  int failures = 0;
  for (int i = 0; i < 120 && failures < 5; ++i) {
    ScatterCase c = rows_copy_case(rng, 200);
    const auto r = matches_cpu(c, stream_, seed_);
    EXPECT_TRUE(r) << "iteration " << i;
    failures += r ? 0 : 1;
  }
}

TEST_F(ScatterCuda, SortedBadIndexWritesNothing) {
  swt::Rng rng(seed_);
  for (int i = 0; i < 40; ++i) {
    const DType dt = i % 3 == 0 ? DType::kFloat16 : DType::kFloat32;
    ScatterCase c = shared_index_case(rng, dt, Combine(i % 6), i % 2, (i / 2) % 2, false, {40, 70},
                                      0, 5000, false);
    ASSERT_TRUE(plant_bad_index(rng, c));
    const std::vector<unsigned char> before(c.out.base(), c.out.base() + c.out.storage_bytes());
    DeviceScatter d(c);
    ASSERT_EQ(d.status(), cudaSuccess);
    ErrorDetail e;
    ASSERT_EQ(d.run(stream_, &e, cs::PathChoice::kAlways), Status::kIndexOutOfRange)
        << c.describe();
    EXPECT_EQ(e.dim, 0);
    EXPECT_EQ(e.hi, 40);
    EXPECT_TRUE(e.value < 0 || e.value >= e.hi) << e.message;
    const std::vector<unsigned char> got = d.out.download();
    EXPECT_EQ(swt::diff_bytes(got.data(), before.data(), got.size()), "") << c.describe();
  }
}

// Not a check: device times of the two deterministic paths on the shapes that motivated the
// sorted one (run with --gtest_also_run_disabled_tests).
TEST_F(ScatterCuda, DISABLED_SortedPathTiming) {
  swt::Rng rng(seed_);
  struct Shape {
    const char* name;
    std::vector<int64_t> out;
    int64_t line_len;
  };
  const Shape shapes[] = {{"pyg sum (10000,128) <- (2M,128)", {10000, 128}, 2000000},
                          {"moe add (16384,4096) <- (131072,4096)", {16384, 4096}, 131072},
                          {"1-d add (100000) <- (16M)", {100000}, 16 << 20}};
  for (const Shape& sh : shapes) {
    ScatterCase c = shared_index_case(rng, DType::kFloat32, Combine::kAdd, true, true, false,
                                      sh.out, 0, sh.line_len, false);
    DeviceScatter d(c);
    ASSERT_EQ(d.status(), cudaSuccess);
    for (cs::PathChoice ch : {cs::PathChoice::kAlways, cs::PathChoice::kNever}) {
      ErrorDetail e;
      ASSERT_EQ(d.run(stream_, &e, ch), Status::kOk) << e.message;  // warm-up, workspace
      cudaEvent_t t0, t1;
      cudaEventCreate(&t0);
      cudaEventCreate(&t1);
      cudaEventRecord(t0, stream_);
      ASSERT_EQ(d.run(stream_, &e, ch), Status::kOk) << e.message;
      cudaEventRecord(t1, stream_);
      cudaEventSynchronize(t1);
      float ms = 0;
      cudaEventElapsedTime(&ms, t0, t1);
      std::printf("%-40s %-7s %10.3f ms\n", sh.name,
                  ch == cs::PathChoice::kAlways ? "sorted" : "lines", ms);
      cudaEventDestroy(t0);
      cudaEventDestroy(t1);
    }
  }
}

}  // namespace
}  // namespace swct
