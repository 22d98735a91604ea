// Scatter test helpers shared by test_scatter_emulated.cpp (kernel bodies on the host) and
// test_scatter_cuda.cpp (the GPU): random scatter problems over guarded storages, an obvious
// host reference (the logical walk in index order, over the element arithmetic the kernels
// share: common/elem_arith.h, whose semantics test_scatter_cpu.cpp checks against a float64
// reference and the pytest suite against ATen), the element comparison, and the host runner
// that stands in for scatter_cuda.cu's launches.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "scatter/scatter_cuda_dispatch.h"
#include "stridewise/scatter.h"
#include "test_util.h"

namespace swct {

namespace cs = stridewise::cuda_scatter;

// The dtypes with scatter arithmetic (scatter_supports), in a fixed order.
extern const stridewise::DType kScatterTypes[12];

// What the CUDA path runs: scatter_supports, but complex mean (CPU only, scatter.h).
inline bool cuda_runs(stridewise::DType t, stridewise::Combine c) {
  const bool cx = t == stridewise::DType::kComplex64 || t == stridewise::DType::kComplex128;
  return stridewise::scatter_supports(t, c) && !(cx && c == stridewise::Combine::kMean);
}

// Whether `l` (ScatterHostRunner::launches) holds the launch `name`.
inline bool launched(const std::vector<std::string>& l, const char* name) {
  return std::find(l.begin(), l.end(), name) != l.end();
}

// Whether any form of the bins path ran (whole, packed, split, ordered, ordered packed).
inline bool ran_any_bins(const std::vector<std::string>& l) {
  for (const char* n : {"bins", "bins_packed", "bins_split", "bins_ordered", "bins_ordered_packed"})
    if (launched(l, n)) return true;
  return false;
}

struct ScatterCase {
  swt::TestTensor out, self, index, src;  // in place: `self` is unused (self = out's view)
  bool in_place = false;
  bool has_value = false;
  alignas(16) unsigned char value[16] = {};
  bool has_alpha = false;  // src scaled by alpha (index_add's): add of a src only
  alignas(16) unsigned char alpha[16] = {};
  int64_t dim = 0;
  stridewise::IndexedOpDesc desc;
  bool deterministic = false;
  stridewise::ScatterArgs args() const;
  std::string describe() const;
};

struct ScatterCaseOpts {
  int rank = -1;  // -1: random 0..6
  stridewise::DType dtype = stridewise::DType::kBool;
  bool random_dtype = true;
  int combine = -1;  // -1: random; else a stridewise::Combine
  int include_self = -1;
  int in_place = -1;
  int has_value = -1;
  int deterministic = -1;
  int64_t max_size = 4;  // per dim
  bool nan = false;      // sprinkle NaNs into floating inputs
};

ScatterCase random_scatter_case(swt::Rng& rng, const ScatterCaseOpts& opts);

// A deterministic scatter whose lines share one index sequence (the sorted path's case): out
// contiguous of `out_sizes`, index of line_len values along `dim` expanded (stride 0) over
// every other dim, src contiguous of index's shape (or the value form). `arbitrary`: self
// and src hold arbitrary values (floating results then depend on the combination order;
// multiply: values near 1) instead of small integers.
ScatterCase shared_index_case(swt::Rng& rng, stridewise::DType dt, stridewise::Combine comb,
                              bool include_self, bool in_place, bool has_value,
                              const std::vector<int64_t>& out_sizes, int64_t dim, int64_t line_len,
                              bool arbitrary);

// A fast-mode copy through a shared index over contiguous rows (rows_put's calls): float32,
// float16, float64 or int8; rows narrow or, now and then, wide (several tiles of
// tile_threads * kRowsUnroll vectors each); duplicates, the value form now and then, and a
// bad value in 10% of the cases. `max_line_len`: positions along dim 0 at most.
ScatterCase rows_copy_case(swt::Rng& rng, int64_t max_line_len);

// Writes one bad value into the index storage at an element the index view reads; returns
// false when the index is empty.
bool plant_bad_index(swt::Rng& rng, ScatterCase& c);

// Expected out storage. *bad: how many index positions hold a bad value (then the whole
// storage is unchanged). *cands (optional): for copy, per out storage byte offset of an
// element written more than once, every value written there (any may win without
// `deterministic`); want holds the last one in index order.
struct Candidates {
  std::vector<int64_t> byte_offset;
  std::vector<std::vector<std::vector<unsigned char>>> values;
};
std::vector<unsigned char> reference_scatter(const ScatterCase& c, int64_t* bad, Candidates* cands);

// Compares the out storages: bytes outside out's view must be identical; inside, elements
// equal bitwise, or both NaN, or (rtol > 0, floating types) within atol + rtol * |want| per
// component, or (cands) any candidate value. Empty string when they match.
std::string compare_out(const ScatterCase& c, const unsigned char* got,
                        const std::vector<unsigned char>& want, const Candidates* cands,
                        double rtol = 0, double atol = 0);

// The host stand-in for scatter_cuda.cu's CudaRunner: every thread of every block (the grid
// capped at grid_cap blocks when non-zero, so grid-stride loops take several rounds); each
// block but validate's first checks the abort word, as the kernels do.
// The sort is std::stable_sort on bits [0, end_bit) of the keys (CUB's order), into buffer 1
// or, for odd end_bit, back into buffer 0, the other buffer and CUB's temp then poisoned.
struct ScatterHostRunner {
  unsigned grid_cap = 0;
  cs::PathChoice path = cs::PathChoice::kAuto;  // emulate_scatter's choice
  cs::BadIndex first;
  std::vector<std::string> launches;  // kernel names, in order
  int64_t blocks_skipped = 0;         // blocks that saw the abort word raised
  // Blocks, and threads within a block, last first: another legal schedule, under which a
  // write that the forward order happens to overwrite (a copy's early "last" write from the
  // wrong chunk) survives.
  bool reverse = false;

  unsigned grid(unsigned b) const { return grid_cap && grid_cap < b ? grid_cap : b; }
  template <typename F>
  void run(const char* name, const cs::Abort* abort, unsigned blocks, F&& body) {
    run_threads(name, abort, blocks, unsigned(cs::kThreads), body);
  }
  template <typename F>
  void run_threads(const char* name, const cs::Abort* abort, unsigned blocks, unsigned threads,
                   F&& body) {
    launches.push_back(name);
    const unsigned g = grid(blocks);
    for (unsigned i = 0; i < g; ++i) {
      const unsigned b = reverse ? g - 1 - i : i;
      if (abort && cs::aborted(*abort)) {
        ++blocks_skipped;
        continue;
      }
      for (unsigned j = 0; j < threads; ++j) body(b, reverse ? threads - 1 - j : j, g);
    }
  }
  int64_t sort_temp_bytes(const cs::SortShape& s) const { return 100 + s.n; }  // any size
  void sort_keys(const cs::KeysArgs& a, unsigned blocks) {
    run("sort_keys", &a.abort, blocks, [&](unsigned b, unsigned t, unsigned g) {
      cs::sort_keys_thread(a, int64_t(b), int64_t(t), int64_t(g));
    });
  }
  int sort(const cs::SortArgs& a);  // scatter_test_util.cpp
  // The sorted path's back half: its own launch sequence over the bodies below.
  stridewise::Status segments(const cs::SegJob& j) { return cs::launch_segments(j, *this); }
  template <typename T, int V, typename I, int D>
  void seg_acc(const cs::SegArgs<I, D>& a, unsigned blocks) {
    run("seg_acc", &a.abort, blocks, [&](unsigned b, unsigned t, unsigned g) {
      cs::seg_acc_thread<T, V>(a, int64_t(b), int64_t(t), int64_t(g));
    });
  }
  template <typename T, int V, typename I, int D>
  void seg_fix(const cs::SegArgs<I, D>& a, unsigned blocks) {
    run("seg_fix", &a.abort, blocks, [&](unsigned b, unsigned t, unsigned g) {
      cs::seg_fix_thread<T, V>(a, int64_t(b), int64_t(t), int64_t(g));
    });
  }
  template <typename U, int V, typename I, int D>
  void seg_put(const cs::SegArgs<I, D>& a, int units, unsigned blocks) {
    run("seg_put", &a.abort, blocks, [&](unsigned b, unsigned t, unsigned g) {
      cs::seg_put_thread<U, V>(a, units, int64_t(b), int64_t(t), int64_t(g));
    });
  }
  template <typename U, int V, typename I, int D>
  void rows_put(const cs::SegArgs<I, D>& a, int64_t index_dim_stride, unsigned blocks) {
    run("rows_put", &a.abort, blocks, [&](unsigned b, unsigned t, unsigned g) {
      cs::rows_put_thread<U, V>(a, index_dim_stride, int64_t(b), int64_t(t), int64_t(g));
    });
  }
  // Each tile of each block: the four phases in order, each for every thread (the barriers),
  // over a fresh poisoned shared memory.
  template <typename T, typename I, int D>
  void tile(const cs::TileArgs<I, D>& a, int64_t tiles, unsigned blocks, int64_t smem) {
    launches.push_back("tile");
    const unsigned g = grid(blocks);
    std::vector<unsigned char> mem(static_cast<size_t>(smem) + 16);
    void* base = mem.data() + (16 - cs::addr(mem.data()) % 16) % 16;
    for (unsigned b = 0; b < g; ++b) {
      if (cs::aborted(a.abort)) {
        ++blocks_skipped;
        continue;
      }
      for (int64_t t = b; t < tiles; t += g) {
        std::fill(mem.begin(), mem.end(), 0xEE);
        for (int phase = 0; phase < 4; ++phase)
          for (int64_t th = 0; th < cs::kTileThreads; ++th)
            cs::tile_phase<T>(a, phase, t, th, cs::kTileThreads, base);
      }
    }
  }
  // Each item of each group of each block: the phases in order (bins_item), each for every
  // thread of the group, over a fresh poisoned slab followed by a poisoned guard (an item that
  // writes past its slab_bytes fails the test). Groups are independent (own slab, own items),
  // so they run one after another.
  template <typename T, typename I, int D>
  void bins(const cs::BinsArgs<I, D>& a, unsigned blocks, int threads, int64_t smem) {
    launches.push_back(a.split      ? "bins_split"
                       : a.ordered  ? (a.pack > 1 ? "bins_ordered_packed" : "bins_ordered")
                       : a.pack > 1 ? "bins_packed"
                                    : "bins");
    const unsigned g = grid(blocks);
    const int64_t groups = threads / a.group;
    EXPECT_EQ(groups * a.slab_bytes, smem);
    constexpr size_t kGuard = 64;
    std::vector<unsigned char> mem(static_cast<size_t>(a.slab_bytes) + 16 + kGuard);
    unsigned char* slab = mem.data() + (16 - cs::addr(mem.data()) % 16) % 16;
    for (unsigned b = 0; b < g; ++b) {
      if (cs::aborted(a.abort)) {
        ++blocks_skipped;
        continue;
      }
      for (int64_t gi = 0; gi < groups; ++gi) {
        for (int64_t item = b * groups + gi; item < cs::bins_items(a); item += g * groups) {
          std::fill(mem.begin(), mem.end(), 0xEE);
          cs::bins_item(a, item, [&](int phase, int64_t k) {
            for (int64_t j = 0; j < a.group; ++j)
              cs::bins_phase<T>(a, phase, item, k, reverse ? a.group - 1 - j : j, slab);
          });
          const unsigned char* guard = slab + a.slab_bytes;
          EXPECT_TRUE(std::all_of(guard, guard + kGuard, [](unsigned char c) { return c == 0xEE; }))
              << "bins item " << item << " wrote past its " << a.slab_bytes << "-byte slab";
        }
      }
    }
  }
  template <typename I, int D>
  void validate(const cs::ValidateArgs<I, D>& a, unsigned blocks) {
    run(a.shadow ? "validate_shadow" : "validate", nullptr, blocks,
        [&](unsigned b, unsigned t, unsigned g) {
          cs::BadIndex bad;
          cs::validate_thread(a, I(b), I(t), I(g), bad);
          if (!bad.any) return;
          *a.abort.word = a.abort.gen;
          if (!first.any) first = bad;
        });
  }
  template <typename U, typename I, int D>
  void copy(const cs::CopyArgs<I, D>& a, unsigned blocks) {
    run("copy", &a.abort, blocks,
        [&](unsigned b, unsigned t, unsigned g) { cs::copy_thread<U>(a, I(b), I(t), I(g)); });
  }
  template <typename U, typename I, int D>
  void put_elems(const cs::PutArgs<I, D>& a, unsigned blocks) {
    run("put_elems", &a.abort, blocks,
        [&](unsigned b, unsigned t, unsigned g) { cs::put_elems_thread<U>(a, I(b), I(t), I(g)); });
  }
  template <typename U, typename I, int D>
  void put_lines(const cs::PutArgs<I, D>& a, unsigned blocks) {
    run("put_lines", &a.abort, blocks,
        [&](unsigned b, unsigned t, unsigned g) { cs::put_lines_thread<U>(a, I(b), I(t), I(g)); });
  }
  template <typename U, typename I, int D>
  void claim(const cs::ClaimArgs<I, D>& a, unsigned blocks) {
    run("claim", &a.abort, blocks,
        [&](unsigned b, unsigned t, unsigned g) { cs::claim_thread<U>(a, b, t, g); });
  }
  template <typename U, typename I, int D>
  void claim_final(const cs::ClaimFinalArgs<I, D>& a, unsigned blocks) {
    run("claim_final", &a.abort, blocks, [&](unsigned b, unsigned t, unsigned g) {
      cs::claim_final_thread<U>(a, I(b), I(t), I(g));
    });
  }
  void zero(void* p, int64_t bytes) {
    launches.push_back("zero");
    std::memset(p, 0, static_cast<size_t>(bytes));
  }
  template <typename T, typename I, int D>
  void acc_elems(const cs::AccArgs<I, D>& a, unsigned blocks) {
    run("acc_elems", &a.abort, blocks,
        [&](unsigned b, unsigned t, unsigned g) { cs::acc_elems_thread<T>(a, I(b), I(t), I(g)); });
  }
  template <typename T, typename I, int D>
  void acc_lines(const cs::AccArgs<I, D>& a, unsigned blocks) {
    run("acc_lines", &a.abort, blocks,
        [&](unsigned b, unsigned t, unsigned g) { cs::acc_lines_thread<T>(a, I(b), I(t), I(g)); });
  }
  template <typename T, typename I, int D>
  void ws_init(const cs::WsArgs<I, D>& a, unsigned blocks) {
    run("ws_init", &a.abort, blocks,
        [&](unsigned b, unsigned t, unsigned g) { cs::ws_init_thread<T>(a, I(b), I(t), I(g)); });
  }
  template <typename T, typename I, int D>
  void ws_final(const cs::WsArgs<I, D>& a, unsigned blocks) {
    run("ws_final", &a.abort, blocks,
        [&](unsigned b, unsigned t, unsigned g) { cs::ws_final_thread<T>(a, I(b), I(t), I(g)); });
  }
};

// scatter_cuda's host path with the host runner: plans, poisons a fresh workspace of
// scatter_cuda_workspace_bytes, starts the abort word at a stale generation, runs. A bad
// index gives kIndexOutOfRange with value and position filled from the runner's report.
stridewise::Status emulate_scatter(const stridewise::ScatterArgs& a, ScatterHostRunner& r,
                                   stridewise::ErrorDetail* e);

// Emulates c and checks status, report (value bad, position in plan order holds it) and
// the whole out storage against reference_scatter.
// `path`: the runner's choice of path (PathChoice); `ran` (optional): the launches.
::testing::AssertionResult scatter_emulated_matches(ScatterCase& c, uint64_t seed,
                                                    unsigned grid_cap = 0,
                                                    cs::PathChoice path = cs::PathChoice::kAuto,
                                                    std::vector<std::string>* ran = nullptr);

}  // namespace swct
