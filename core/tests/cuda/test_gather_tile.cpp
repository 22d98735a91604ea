// The tile kernel (gather_cuda_tile.h) and the kernel choice: the tile family on the GPU and
// through the host emulation (every block, every thread, shared buffer poisoned between
// tiles), every kernel forced onto random layouts of every rank bucket (the result may not
// depend on which kernel ran), and bad values through each kernel: skipped, reported with
// the position in plan order that holds them.
#include <string>
#include <vector>

#include "cuda_test_util.h"
#include "emulated_runner.h"

namespace swct {
namespace {

using stridewise::DType;
using stridewise::ErrorDetail;
using stridewise::Status;
using swt::GatherCase;
using Choice = cg::KernelChoice;

constexpr Choice kForced[] = {Choice::kTile, Choice::kElems, Choice::kPlain};

TEST(GatherEmulated, TilePathCases) {
  const uint64_t seed = swt::test_seed();
  swt::Rng rng(seed);
  tile_path_cases(rng, 150, [&](GatherCase& c, const std::string& what) {
    EmulateOpts eo;
    eo.grid_cap = swt::coin(rng, 0.3) ? unsigned(swt::rand_int(rng, 1, 3)) : 0;
    Launch l;
    EXPECT_TRUE(emulated_matches(c, 0, 0, seed, 0, eo, &l)) << what;
    EXPECT_EQ(l.kernel, "tile") << what << ": " << c.describe();
  });
}

TEST(GatherEmulated, TilePathBadValues) {
  const uint64_t seed = swt::test_seed();
  swt::Rng rng(seed);
  tile_path_cases(rng, 80, [&](GatherCase& c, const std::string& what) {
    const int64_t bad = plant_bad_value(rng, c);
    EXPECT_TRUE(emulated_matches(c, 0, 0, seed, bad)) << what;
  });
}

// Every kernel on every layout gives the reference result (rows is not forced: it needs its
// layout; misaligned data takes it whatever is asked, also covered here).
TEST(GatherEmulated, ForcedKernelsRandomLayouts) {
  const uint64_t seed = swt::test_seed();
  swt::Rng rng(seed);
  int failures = 0, tiles = 0;
  for (int rank : {1, 2, 3, 4, 5, 6, 8, 12, 25, 64}) {
    for (int i = 0; i < (rank <= 8 ? 150 : 40) && failures < 5; ++i) {
      const DType dt = kDataTypes[swt::rand_int(rng, 0, 4)];
      swt::GatherCaseOpts opts;
      opts.max_numel = 2500;
      opts.allow_empty = true;
      GatherCase c = swt::random_gather_case(
          rng, dt, swt::coin(rng, 0.5) ? DType::kInt64 : DType::kInt32, rank, opts);
      EmulateOpts eo;
      eo.choice = kForced[swt::rand_int(rng, 0, 2)];
      eo.grid_cap = swt::coin(rng, 0.2) ? unsigned(swt::rand_int(rng, 1, 3)) : 0;
      const int64_t bad = swt::coin(rng, 0.2) ? plant_bad_value(rng, c) : 0;
      const int es = stridewise::elem_size(dt);
      const size_t shift =
          es > 1 && swt::coin(rng, 0.1) ? size_t(swt::rand_int(rng, 1, es - 1)) : 0;
      Launch l;
      const auto r = emulated_matches(c, shift, 0, seed, bad, eo, &l);
      EXPECT_TRUE(r) << "rank " << rank << " iteration " << i;
      failures += r ? 0 : 1;
      tiles += l.kernel == "tile";
    }
  }
  EXPECT_GT(tiles, 60);  // the forced tile ran, not only its fallbacks
}

// The shapes of bench/bench_gather.py that take the tile kernel or a blocked walk.
TEST(GatherEmulated, TileAndBlockedDispatch) {
  for (DType dt : {DType::kFloat32, DType::kFloat16}) {
    // transposed: index (64,1024,1024).transpose(1,2) into self (64,4096,1024), dim 1.
    Launch l = dispatch_of(dt, {64, 4096, 1024}, {4096 * 1024, 1024, 1}, {64, 1024, 1024},
                           {1024 * 1024, 1, 1024}, {1024 * 1024, 1024, 1}, 1);
    EXPECT_EQ(l.kernel, "tile");
    EXPECT_TRUE(l.u32);
    EXPECT_EQ(l.walk_rank, 1);  // the rest: dim 0 (64)
    EXPECT_EQ(l.blocks, 64u * 32u * 32u);
    // scattered: self (32768,2048), index (2048,8192).t(), dim 0.
    l = dispatch_of(dt, {32768, 2048}, {2048, 1}, {8192, 2048}, {1, 8192}, {2048, 1}, 0);
    EXPECT_EQ(l.kernel, "tile");
    // rank6: index (16,16,16,16,8,16) stored in dim order (4,2,5,1,3,0), self with 32 on
    // dim 2 stored in order (3,5,0,4,2,1), out contiguous: 16 x 16 fills a quarter of a
    // tile, so the blocked elems walk: out's 16, 4 index values (a sector of int64), then
    // self's fastest dim (8 float32 or all 16 float16) ahead of the rest.
    l = dispatch_of(dt, {16, 16, 32, 16, 8, 16}, {4096, 1, 16, 1048576, 512, 65536},
                    {16, 16, 16, 16, 8, 16}, {1, 256, 65536, 16, 1048576, 4096},
                    {524288, 32768, 2048, 128, 16, 1}, 2);
    EXPECT_EQ(l.kernel, "elems");
    EXPECT_EQ(l.walk_rank, dt == DType::kFloat32 ? 8 : 7);
    EXPECT_EQ(l.dims, 12);
  }
  // clustered and contig: every operand runs along dim 0, the plain walk.
  Launch l =
      dispatch_of(DType::kFloat32, {65536, 4096}, {4096, 1}, {65536, 256}, {256, 1}, {256, 1}, 1);
  EXPECT_EQ(l.kernel, "elems");
  EXPECT_EQ(l.walk_rank, 2);
}

// ---- on the GPU ----------------------------------------------------------------------------

using GatherTile = CudaTest;

TEST_F(GatherTile, TilePathCases) {
  swt::Rng rng(seed_);
  tile_path_cases(rng, 60, [&](GatherCase& c, const std::string& what) {
    EXPECT_TRUE(gather_matches(c, stream_, seed_)) << what;
  });
}

// One bad value in a tile case: exactly its elements stay poisoned, and the record names
// the value and a plan position that holds it.
TEST_F(GatherTile, BadValueSkippedAndReported) {
  swt::Rng rng(seed_);
  int checked = 0;
  tile_path_cases(rng, 20, [&](GatherCase& c, const std::string& what) {
    const int64_t bad = plant_bad_value(rng, c);
    if (bad == 0) return;
    DeviceCase d(c);
    ASSERT_EQ(d.status(), cudaSuccess);
    ErrorDetail e;
    ASSERT_EQ(stridewise::gather_cuda(d.args(), stream_, &e), Status::kOk) << e.message;
    ASSERT_EQ(stridewise::cuda_poll_errors(device_, stream_, &e), Status::kIndexOutOfRange) << what;
    const int64_t hi = c.self.view.sizes[c.dim];
    EXPECT_TRUE(e.value < 0 || e.value >= hi) << what;
    stridewise::GatherPlan plan;
    ErrorDetail pe;
    ASSERT_EQ(stridewise::plan_gather(d.args(), &plan, &pe), Status::kOk);
    ASSERT_GE(e.position, 0);
    ASSERT_LT(e.position, plan.loop.numel);
    const int64_t off = stridewise::plan_offset(plan.loop, stridewise::kGatherIndex, e.position);
    EXPECT_EQ(swt::read_index(c.index.view, off), e.value) << what;
    int64_t n_bad = 0;
    const std::vector<unsigned char> want = reference_out(c, &n_bad);
    const std::vector<unsigned char> got = d.out.download();
    EXPECT_EQ(swt::diff_bytes(got.data(), want.data(), want.size()), "") << what;
    ++checked;
  });
  EXPECT_GT(checked, 10);
}

}  // namespace
}  // namespace swct
