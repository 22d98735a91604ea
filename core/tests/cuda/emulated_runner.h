// The host emulation of the CUDA gather (used by test_gather_emulated*.cpp): HostRunner
// stands in for gather_cuda.cu's launches and runs the kernel bodies of gather_cuda_impl.h
// for every thread of every block of the grid gather_cuda would launch, sequentially.
// Needs no GPU.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <initializer_list>
#include <string>
#include <vector>

#include "cuda_test_util.h"  // kDataTypes, make_case
#include "gather/gather_cuda_impl.h"
#include "test_util.h"

namespace swct {

namespace cg = stridewise::cuda_gather;

struct Launch {
  std::string kernel;  // "rows", "elems" or "tile"
  int unit = 0;        // bytes per load/store
  int dims = 0;        // OffsetCalculator capacity D
  bool u32 = false;
  bool idx64 = false;
  unsigned blocks = 0;
  int group = 0;  // rows: threads per row tile
  int64_t tiles_per_row = 0;
  int walk_rank = 0;  // elems: dims of its (blocked) walk; tile: dims of the rest
};

// Offsets are in units, so every access is aligned iff the base pointers are: x86 would
// not fault on a misaligned load, so check the invariant the GPU depends on directly.
void expect_aligned(const void* out, const void* self, size_t unit);

struct HostRunner {
  bool execute = true;
  // Non-zero: run at most this many blocks and pass that as the grid size, so the bodies'
  // grid-stride loops take several rounds (as past kMaxBlocks) on small problems.
  unsigned grid_cap = 0;
  Launch launch;
  cg::BadIndex first;  // first report in (block, thread) order

  unsigned grid(unsigned blocks) const { return grid_cap && grid_cap < blocks ? grid_cap : blocks; }

  template <typename IdxT, typename I, int D>
  static Launch launch_of(const char* kernel, int unit, unsigned blocks) {
    Launch l;
    l.kernel = kernel;
    l.unit = unit;
    l.dims = D;
    l.u32 = sizeof(I) == 4;
    l.idx64 = sizeof(IdxT) == 8;
    l.blocks = blocks;
    return l;
  }

  template <typename U, typename IdxT, typename I, int D>
  void rows(const cg::RowsArgs<IdxT, I, D>& a, unsigned blocks) {
    launch = launch_of<IdxT, I, D>("rows", int(sizeof(U)), blocks);
    launch.group = 1 << a.group_shift;
    launch.tiles_per_row = int64_t(a.tiles_per_row.divisor);
    if (execute) expect_aligned(a.out, a.self, sizeof(U));
    each_thread(blocks, [&](unsigned b, unsigned t, unsigned g, cg::BadIndex& bad) {
      cg::rows_thread<U>(a, I(b), I(t), I(g), bad);
    });
  }
  template <typename E, typename IdxT, typename I, int D>
  void elems(const cg::ElemsArgs<IdxT, I, D>& a, unsigned blocks) {
    launch = launch_of<IdxT, I, D>("elems", int(sizeof(E)), blocks);
    launch.walk_rank = a.calc.rank;
    if (execute) expect_aligned(a.out, a.self, sizeof(E));
    each_thread(blocks, [&](unsigned b, unsigned t, unsigned g, cg::BadIndex& bad) {
      cg::elems_thread<E>(a, I(b), I(t), I(g), bad);
    });
  }
  // Per block: every tile of its grid-stride loop, each as the kernel does it: all threads'
  // loads into one shared buffer (poisoned first, so reading an entry no thread wrote shows),
  // then all threads' stores.
  template <typename E, typename IdxT, typename I, int D>
  void tile(const cg::TileArgs<IdxT, I, D>& a, unsigned blocks) {
    launch = launch_of<IdxT, I, D>("tile", int(sizeof(E)), blocks);
    launch.walk_rank = a.rest.rank;
    if (!execute) return;
    expect_aligned(a.out, a.self, sizeof(E));
    const unsigned g = grid(blocks);
    cg::TileBuffer buf;
    for (unsigned b = 0; b < g; ++b)
      for (I t = I(b); t < a.num_tiles; t += I(g)) {
        for (auto& row : buf.v)
          for (auto& x : row) x = int64_t(0x5a5a5a5a5a5a5a5a);
        for (unsigned th = 0; th < unsigned(cg::kThreads); ++th)
          cg::tile_load_thread(a, t, I(th), buf);
        for (unsigned th = 0; th < unsigned(cg::kThreads); ++th) {
          cg::BadIndex bad;
          cg::tile_store_thread<E>(a, t, I(th), buf, bad);
          if (bad.any && !first.any) first = bad;
        }
      }
  }

 private:
  // Runs body(block, thread, grid, bad) for every thread of the (capped) grid, in order, and
  // keeps the first bad index any thread reports.
  template <typename F>
  void each_thread(unsigned blocks, F&& body) {
    const unsigned g = grid(blocks);
    for (unsigned b = 0; execute && b < g; ++b)
      for (unsigned t = 0; t < unsigned(cg::kThreads); ++t) {
        cg::BadIndex bad;
        body(b, t, g, bad);
        if (bad.any && !first.any) first = bad;
      }
  }
};

struct EmulateOpts {
  unsigned grid_cap = 0;  // HostRunner::grid_cap
  cg::KernelChoice choice = cg::KernelChoice::kAuto;
};

// gather_cuda's host path with the HostRunner in place of the launch.
stridewise::Status emulate(const stridewise::GatherArgs& args, HostRunner& r,
                           stridewise::ErrorDetail* e, const EmulateOpts& opts = {});

// Emulates c (out/self copied `out_shift`/`self_shift` bytes into fresh aligned buffers
// when non-zero) and checks: the status, the whole out storage against reference_out, and
// for bad values (want_bad of them) that the reported value is bad and that the reported
// position (plan order) holds it. `launch` (optional) receives what ran.
::testing::AssertionResult emulated_matches(swt::GatherCase& c, size_t out_shift, size_t self_shift,
                                            uint64_t seed, int64_t want_bad = 0,
                                            const EmulateOpts& opts = {}, Launch* launch = nullptr);

// Which kernel, unit, calculator and offset width a layout gets. Views over fake, 256-byte
// aligned addresses (self `misalign` bytes off): only the dispatch runs, nothing is touched.
Launch dispatch_of(stridewise::DType dt, std::initializer_list<int64_t> ssz,
                   std::initializer_list<int64_t> sst, std::initializer_list<int64_t> isz,
                   std::initializer_list<int64_t> ist, std::initializer_list<int64_t> ost,
                   int64_t dim, uintptr_t misalign = 0,
                   stridewise::DType index_dtype = stridewise::DType::kInt64);

// The same for real views (nothing is touched either).
Launch dispatch_of(const stridewise::GatherArgs& args);

}  // namespace swct
