// The CUDA scatter's bins path: accumulating combines whose lines (scatter.h: every coordinate
// but dim fixed) each land in a short out column, with the index walked along dim in memory
// order (a last-dim scatter into tens to thousands of bins per row; a 1-D histogram). A group
// of threads (a warp, or a block of kBinsThreads) owns one item -- `pack` consecutive whole
// lines, one line, or a chunk of a long line -- and holds each line's out column as n =
// out.size(dim) accumulators ("bins", plus an int32 count each for mean and include_self =
// false) in shared memory:
//  lines: the item's line offsets into a table (one OffsetCalculator walk per line);
//  init:  the bins from out (include_self, whole lines) or the combine's neutral value;
//  acc:   every step of the item, consecutive steps on consecutive threads (contiguous index
//         rows are read coalesced, across the item's lines too), combined into its bin by a
//         shared-memory atomic; or, in deterministic mode, ordered: each warp of the group owns
//         the item's lines j = warp (mod warps) and stages kBinsDepth rounds of kBinsWarp of
//         their steps at a time (all loads in flight together), then round by round each run
//         of staged steps with one bin is combined in step order by its first lane
//         (__match_any_sync finds the run; no atomics: each bin sees its values in index
//         order, as the CPU combines them);
//  done:  a whole line writes its column once (finish_acc, as the tile path); a chunk combines
//         its bins into the target by global atomics (out itself for 4-/8-byte types without
//         counts, else the workspace's accumulator and counts, which ws_init / ws_final wrap).
// Against the atomics kernel this replaces one global atomic per element (contended in a
// short row, or across a histogram's few thousand bins) by a shared-memory one, and touches
// out once per line; against the tile path it walks lines whose index is contiguous along dim
// (the tile path reads lines fastest: there, a contiguous row's steps would be a line apart).
// Only the bins' memory depends on n, so the rule (bins_shape) keeps n small. Packing short lines
// into one block's item (pack > 1) puts a block's worth of loads in flight per wait: a warp per
// 128-step line waited on memory twice per line with 4 KB in flight per SM warp slot, and ran
// at 1.5 TB/s (last_add_64, docs/bench_scatter.md).
//
// Host and device compilable (the host emulation runs each phase for every thread of a group
// before the next, as the group's barrier orders them); no __global__ code.
#pragma once

#include <cstdint>
#include <cstring>

#include "scatter/scatter_cuda_impl.h"
#include "scatter/scatter_cuda_launch.h"  // WsLayout, ws_layout, align256
#include "scatter/scatter_cuda_sorted.h"  // PathChoice, index_shared, kSegMinLines
#include "stridewise/scatter.h"

namespace stridewise {
namespace cuda_scatter {

constexpr int kBinsThreads = 256;  // threads per block (a group: 32 threads, or all of them)
constexpr int kBinsWarp = 32;      // threads per group when lines are short; ordered mode's
constexpr int kBinsUnroll = 4;     // independent index/src loads in flight per thread (acc)
constexpr int kBinsDepth = 4;      // ordered: rounds of kBinsWarp steps staged per warp at once
constexpr int kBinsStageSteps = kBinsWarp * kBinsDepth;
constexpr int64_t kBinsSmemBytes = 48 * 1024;  // per block: no opt-in above the default
// Items wanted over the call (the H200: 132 SMs x 8 blocks of 256 threads = 1056 groups of a
// block): a call with fewer lines cuts them into chunks (flushed by atomics) to reach it, but
// chunks of at least max(4 n, 2048) steps, so that the flush (n atomics per chunk) stays a
// quarter of the elements' at most.
constexpr int64_t kBinsItems = 2048;
constexpr int64_t kBinsMinElems = int64_t(1) << 14;  // below (kAuto): the atomics kernel
// Index elements between consecutive steps at most (kAuto, many lines): farther apart, a
// group's loads each touch a sector of their own; the tile path reads those lines fastest.
constexpr int64_t kBinsMaxStepStride = 4;

// Packed items (kAuto): about kBinsPackSteps steps (8 per thread of a block), at most
// kBinsMaxPack lines and kBinsPackBytes of bins, and at least kBinsItems items over the call.
constexpr int64_t kBinsPackSteps = 2048;
constexpr int64_t kBinsMaxPack = 32;
constexpr int64_t kBinsPackBytes = 16 * 1024;
constexpr int64_t kBinsLineBytes = 24;  // a line's table entry: Offsets<3, I> of 4- or 8-byte I

enum BinsPhase : int {
  kBinsLines = 0,
  kBinsInit = 1,
  kBinsAcc = 2,
  kBinsStage = 3,
  kBinsScan = 4,
  kBinsDone = 5
};

struct BinsShape {
  bool use = false;
  bool split = false;    // lines cut into `chunks` items, flushed into the target by atomics
  bool ordered = false;  // deterministic: the staged, in-order combine (never split)
  bool counts = false;   // an int32 count per bin (mean, include_self = false)
  int group = kBinsWarp;
  int threads = kBinsThreads;  // per block: groups of `group` threads
  int64_t chunk = 0;           // steps per item (line_len when not split)
  int64_t chunks = 1;          // items per line
  int64_t pack = 1;            // whole lines per item (> 1: not split)
  int64_t slab_bytes = 0;      // shared memory per group (bins, counts, stage), 16-aligned
  int64_t smem_bytes = 0;      // per block
};

SW_HOST_DEVICE SW_INLINE int64_t align16(int64_t b) {
  return (b + 15) / 16 * 16;
}

// The index shadow (ValidateArgs::shadow) holds values below 256; its bytes: the index storage's
// extent in elements (offsets are non-negative), 0 when the bins path does not take the call.
constexpr int64_t kBinsShadowMax = 256;
inline int64_t bins_shadow_bytes(const ScatterArgs& a, const BinsShape& s, int64_t n) {
  if (!s.use || n > kBinsShadowMax || a.index.numel() == 0) return 0;
  int64_t extent = 1;
  for (int d = 0; d < a.index.rank; ++d) extent += (a.index.sizes[d] - 1) * a.index.strides[d];
  return extent;
}

// The bins path's workspace: whole lines need only the shadow; chunks the accumulator too
// (ws_layout), with the shadow after it.
inline WsLayout bins_layout(const ScatterArgs& a, const ScatterPlan& p, const BinsShape& b) {
  WsLayout w = b.split ? ws_layout(a) : WsLayout{};
  w.shadow_bytes = bins_shadow_bytes(a, b, p.out_dim_size);
  if (w.shadow_bytes > 0) {
    w.needed = true;
    w.shadow_at = w.total;
    w.total += align256(w.shadow_bytes);
  }
  return w;
}

// Shared memory per group: pack x n bins of `acc` bytes, pack x n counts, (ordered) each warp's
// stage: kBinsStageSteps bin numbers (int32) and values, and the item's line table.
SW_HOST_DEVICE SW_INLINE int64_t bins_slab_bytes(int64_t n, int acc, bool counts, bool ordered,
                                                 int64_t pack = 1, int64_t warps = 1) {
  const int64_t bins = align16(pack * n * acc);
  const int64_t cnt = counts ? align16(pack * n * 4) : 0;
  const int64_t stage =
      ordered ? align16(warps * kBinsStageSteps * 4) + align16(warps * kBinsStageSteps * acc) : 0;
  return bins + cnt + stage + align16(pack * kBinsLineBytes);
}

// Selection. kBins (tests): whenever it can run (kBinsSplit: in chunks of 3 steps); kAuto: besides,
// at least kBinsMinElems positions, steps at most kBinsMaxStepStride apart in the index (or fewer
// lines than the segment path's minimum: then nothing else spreads the work), the index not shared
// by many lines (that is the segment path's), and lines long against n (4 x line_len >= n whole, a
// chunk of at least n steps split: else most bins are initialized and written back for
// nothing; the atomics kernel touches only what it adds to). The rest, always:
//  - an accumulating combine, not a complex multiply;
//  - deterministic: whole lines only, ordered (a warp per line, lines packed as below);
//  - the bins of one group fit kBinsSmemBytes.
// Shape: as many chunks per line as reach kBinsItems items (chunks of at least max(4 n, 2048)
// steps; deterministic: 1); whole lines packed `pack` to an item (kBinsPack* above;
// forced kBins: without the kBinsItems bound, but at most half the lines, so that one line is
// a warp's item again); a group of kBinsWarp threads for unpacked items of at most 2048 steps,
// else the whole block.
inline BinsShape bins_shape(const ScatterArgs& a, const ScatterPlan& p, PathChoice choice,
                            int acc_bytes) {
  BinsShape s;
  const bool forced_split = choice == PathChoice::kBinsSplit;
  if (choice != PathChoice::kAuto && choice != PathChoice::kBins && !forced_split) return s;
  if (!a.desc.accumulates() || p.elems.numel == 0 || p.lines.numel == 0 || p.line_len == 0)
    return s;
  // A complex product regrouped (a chunk's bins, then the target) may change a zero's sign.
  const bool cx = a.out.dtype == DType::kComplex64 || a.out.dtype == DType::kComplex128;
  if (cx && a.desc.combine == Combine::kMul) return s;
  const int64_t n = p.out_dim_size, lines = p.lines.numel;
  if (choice == PathChoice::kAuto) {
    const bool few = lines < kSegMinLines;
    if (p.elems.numel < kBinsMinElems || (!few && index_shared(a))) return s;
    if (!few && (p.index_dim_stride > kBinsMaxStepStride || p.index_dim_stride < 0)) return s;
    // amax / amin accumulating in out's own type go straight into out by atomics: their CAS
    // reads first and skips the write where out already holds the winner, so few steps write
    // (last_amax_64 float32 on the H200, 2026-12-03: atomics 1134 us, bins 1586 us; bfloat16,
    // whose accumulator is float32 in a workspace: atomics 1691 us, bins 1428 us).
    const bool minmax = a.desc.combine == Combine::kMax || a.desc.combine == Combine::kMin;
    if (minmax && acc_bytes == elem_size(a.out.dtype)) return s;
  }
  s.ordered = a.deterministic;
  s.counts = a.desc.combine == Combine::kMean || !a.desc.include_self;
  if (!s.ordered && (lines < kBinsItems || forced_split)) {
    const int64_t min_chunk = forced_split ? 3 : 4 * n > 2048 ? 4 * n : 2048;
    int64_t c = forced_split ? p.line_len : ceil_div(kBinsItems, lines);
    const int64_t most = ceil_div(p.line_len, min_chunk);
    if (c > most) c = most;
    if (c > 1) {
      s.chunk = ceil_div(p.line_len, c);
      s.chunks = ceil_div(p.line_len, s.chunk);
      s.split = s.chunks > 1;
    }
  }
  if (!s.split) s.chunk = p.line_len, s.chunks = 1;
  if (choice == PathChoice::kAuto && (s.split ? s.chunk < n : 4 * p.line_len < n)) return s;
  if (!s.split) {
    const int64_t line_bytes = n * acc_bytes + (s.counts ? n * 4 : 0);
    int64_t pack = kBinsPackSteps / p.line_len;
    pack = pack < kBinsMaxPack ? pack : kBinsMaxPack;
    if (pack * line_bytes > kBinsPackBytes) pack = kBinsPackBytes / line_bytes;
    const int64_t fill = choice == PathChoice::kAuto ? lines / kBinsItems : lines / 2;
    if (pack > fill) pack = fill;
    if (pack > 1) s.pack = pack;
  }
  s.group = s.pack == 1 && (s.ordered || s.chunk <= 2048) ? kBinsWarp : kBinsThreads;
  s.slab_bytes = bins_slab_bytes(n, acc_bytes, s.counts, s.ordered, s.pack, s.group / kBinsWarp);
  int64_t groups = kBinsThreads / s.group;
  while (groups > 1 && groups * s.slab_bytes > kBinsSmemBytes) groups /= 2;
  if (groups * s.slab_bytes > kBinsSmemBytes) return s;
  s.threads = static_cast<int>(groups) * s.group;
  s.smem_bytes = groups * s.slab_bytes;
  s.use = true;
  return s;
}

template <typename I, int D>
struct BinsArgs : Operands {  // out: the target (out itself, or the workspace's accumulator)
  int32_t* count;             // split with counts: the workspace's counts (the target's offsets)
  OffsetCalculator<3, I, D> calc;  // lines: (target, index, src); ScatterPlan::lines or the ws's
  int64_t lines;
  int64_t line_len;
  int64_t chunk;
  int64_t chunks;
  int64_t pack;  // whole lines per item (BinsShape::pack)
  int64_t n;     // bins per line; valid index values are [0, n)
  I target_dim_stride;
  I index_dim_stride;
  I src_dim_stride;
  int group;
  int64_t slab_bytes;
  bool counts;
  bool ordered;
  bool split;
  bool lines_fastest;     // init/done walk an item's lines fastest (out's bins are not adjacent)
  const uint8_t* shadow;  // null, or validation's index shadow (ValidateArgs::shadow): read here
  Abort abort;
};

// Items over the call: ceil(lines / pack) packs, each cut into `chunks` items.
template <typename I, int D>
SW_HOST_DEVICE SW_INLINE int64_t bins_items(const BinsArgs<I, D>& a) {
  return (a.lines + a.pack - 1) / a.pack * a.chunks;
}

// A split item's starting bins: combining them into anything leaves it as it was (-0.0 for a
// floating add: x + -0.0 is x for every x, +0.0 included), so untouched bins may be flushed.
template <typename A>
SW_HOST_DEVICE SW_INLINE A bins_neutral(Combine c) {
  A v = Ops<A>::identity(c);
  if (c == Combine::kAdd || c == Combine::kMean) {
    if constexpr (std::is_floating_point<A>::value) v = -A(0);
    if constexpr (!std::is_integral<A>::value && !std::is_floating_point<A>::value)
      v = A{-decltype(v.re)(0), -decltype(v.im)(0)};
  }
  return v;
}

template <typename A>
SW_HOST_DEVICE SW_INLINE bool same_bits(const A& x, const A& y) {
  unsigned char bx[sizeof(A)], by[sizeof(A)];
  memcpy(bx, &x, sizeof(A));
  memcpy(by, &y, sizeof(A));
  for (size_t i = 0; i < sizeof(A); ++i)
    if (bx[i] != by[i]) return false;
  return true;
}

SW_HOST_DEVICE SW_INLINE void atomic_count_add(int32_t* p, int32_t k) {
#if defined(__CUDA_ARCH__)
  atomicAdd(reinterpret_cast<int*>(p), k);
#else
  *p += k;
#endif
}

// The group's shared memory: bins and counts (or null) of line j at j * n, stage bin numbers
// and values (ordered), the line table.
template <typename A, typename I>
struct BinsSmem {
  A* bins;
  int32_t* cnt;
  int32_t* stage_v;
  A* stage_x;
  Offsets<3, I>* line;
};

template <typename A, typename I, int D>
SW_HOST_DEVICE SW_INLINE BinsSmem<A, I> bins_smem(const BinsArgs<I, D>& a, void* slab) {
  static_assert(sizeof(Offsets<3, I>) <= kBinsLineBytes, "kBinsLineBytes holds a line's offsets");
  unsigned char* p = static_cast<unsigned char*>(slab);
  BinsSmem<A, I> m;
  m.bins = reinterpret_cast<A*>(p);
  p += align16(a.pack * a.n * int64_t(sizeof(A)));
  m.cnt = a.counts ? reinterpret_cast<int32_t*>(p) : nullptr;
  p += a.counts ? align16(a.pack * a.n * 4) : 0;
  const int64_t staged = a.group / kBinsWarp * kBinsStageSteps;  // every warp's stage
  m.stage_v = reinterpret_cast<int32_t*>(p);
  m.stage_x = reinterpret_cast<A*>(p + align16(staged * 4));
  p += a.ordered ? align16(staged * 4) + align16(staged * int64_t(sizeof(A))) : 0;
  m.line = reinterpret_cast<Offsets<3, I>*>(p);
  return m;
}

// Lane t's run in a round of kBinsWarp staged bins: the mask of lanes whose staged bin equals
// its own (on the device __match_any_sync, which every lane of the warp reaches: the scan phase
// is uniform).
SW_HOST_DEVICE SW_INLINE uint32_t stage_peers(const int32_t* round, int64_t t) {
#if defined(__CUDA_ARCH__)
  (void)round;
  return __match_any_sync(0xffffffffu, round[t]);
#else
  uint32_t m = 0;
  for (int j = 0; j < kBinsWarp; ++j) m |= round[j] == round[t] ? uint32_t(1) << j : 0u;
  return m;
#endif
}

// Positions p, p + g, p + 2g, ... of a grid of rows of n as (row j, column s), without a
// division per position: the two at the start are 32-bit where the values allow (a 64-bit
// division is a long subroutine on the GPU; per position in the init and done phases, and per
// phase for the item's geometry, they cost more instructions than the loads: ncu on the H100,
// 2026-12-07, 1002 M warp instructions for 134 M steps, 64 registers).
struct BinsWalk {
  int64_t j, s, dj, ds, len;
  SW_HOST_DEVICE SW_INLINE BinsWalk(int64_t p, int64_t g, int64_t n) : len(n) {
    if (((p | g | n) >> 31) == 0) {
      const uint32_t p32 = uint32_t(p), g32 = uint32_t(g), n32 = uint32_t(n);
      j = p32 / n32, s = p32 - uint32_t(j) * n32, dj = g32 / n32, ds = g32 - uint32_t(dj) * n32;
    } else {
      j = p / n, s = p % n, dj = g / n, ds = g % n;
    }
  }
  SW_HOST_DEVICE SW_INLINE void next() {
    j += dj;
    s += ds;
    if (s >= len) s -= len, ++j;
  }
};

// Phase `phase` of `item` (lines item / chunks * pack on, chunk item % chunks) for thread t of
// the group (a.group threads), sub-chunk k of the ordered phases. The group's barrier separates
// phases.
template <typename T, typename I, int D>
SW_HOST_DEVICE SW_INLINE void bins_phase(const BinsArgs<I, D>& a, int phase, int64_t item,
                                         int64_t k, int64_t t, void* slab) {
  using A = AccOf<T>;
  const BinsSmem<A, I> m = bins_smem<A>(a, slab);
  const int64_t pk = a.chunks == 1 ? item : item / a.chunks;  // whole lines: no division
  const int64_t line0 = pk * a.pack;
  const int64_t cnt = a.lines - line0 < a.pack ? a.lines - line0 : a.pack;
  const int64_t s0 = (item - pk * a.chunks) * a.chunk;
  const int64_t s1 = s0 + a.chunk < a.line_len ? s0 + a.chunk : a.line_len;
  const int64_t g = a.group, n = a.n;
  const T* const src = static_cast<const T*>(a.src);
  const A val = a.has_value ? Conv<T>::load(value_as<T>(a.value)) : A{};
  const SrcScale<T> scale = src_scale<T>(a);
  auto load = [&](int64_t j, int64_t s, A* x) {  // the bin of line j's step s (-1: bad), *x
    const Offsets<3, I>& o = m.line[j];
    const I at = o.v[kScatterIndex] + I(s) * a.index_dim_stride;
    const int64_t v = a.shadow ? int64_t(a.shadow[at]) : load_index(a.index, at, a.idx64);
    *x = a.has_value ? val : scale(Conv<T>::load(src[o.v[kScatterSrc] + I(s) * a.src_dim_stride]));
    return v < 0 || v >= n ? int64_t(-1) : v;
  };
  // The item's (line j, bin v) positions of thread t: bins at j * n + v, out at line j's offset
  // + v * tds; rows of n bins, or (lines_fastest) rows of cnt lines.
  auto each_bin = [&](auto&& f) {
    const int64_t row = a.lines_fastest ? cnt : n;
    BinsWalk w(t, g, row);
    for (int64_t p = t; p < cnt * n; p += g, w.next()) {
      if (a.lines_fastest)
        f(w.s, w.j);
      else
        f(w.j, w.s);
    }
  };
  if (phase == kBinsLines) {
    for (int64_t j = t; j < cnt; j += g) m.line[j] = a.calc.get(I(line0 + j));
  } else if (phase == kBinsInit) {
    const T* const out = static_cast<const T*>(a.out);
    const A start = a.split ? bins_neutral<A>(a.combine) : Ops<A>::identity(a.combine);
    each_bin([&](int64_t j, int64_t v) {
      m.bins[j * n + v] =
          !a.split && a.include_self
              ? Conv<T>::load(out[m.line[j].v[kScatterOut] + I(v) * a.target_dim_stride])
              : start;
      if (m.cnt) m.cnt[j * n + v] = 0;
    });
  } else if (phase == kBinsAcc) {
    const int64_t len = s1 - s0, total = cnt * len;
    BinsWalk w(t, g, len);
    for (int64_t p = t; p < total; p += g * kBinsUnroll) {
      int64_t v[kBinsUnroll];
      A x[kBinsUnroll];
      SW_HOST_ZERO(x);
      for (int u = 0; u < kBinsUnroll; ++u, w.next()) {
        const int64_t bin = p + u * g < total ? load(w.j, s0 + w.s, &x[u]) : -1;
        v[u] = bin < 0 ? -1 : w.j * n + bin;  // the bin's place among the item's pack x n
      }
      for (int u = 0; u < kBinsUnroll; ++u) {
        if (v[u] < 0) continue;
        atomic_combine<A>(m.bins + v[u], x[u], a.combine);
        if (m.cnt) atomic_count(m.cnt + v[u]);
      }
    }
  } else if (phase == kBinsStage) {
    // Stage k of warp w: its positions k * kBinsStageSteps + [0, kBinsStageSteps) over its lines
    // w, w + warps, ... (each s1 - s0 steps) in order; entry u * kBinsWarp + lane.
    const int64_t warps = g / kBinsWarp, w = t / kBinsWarp, lane = t % kBinsWarp;
    int32_t* const sv = m.stage_v + w * kBinsStageSteps;
    A* const sx = m.stage_x + w * kBinsStageSteps;
    int64_t bin[kBinsDepth];
    A x[kBinsDepth];
    SW_HOST_ZERO(x);
    BinsWalk q(k * kBinsStageSteps + lane, kBinsWarp, s1 - s0);
    for (int u = 0; u < kBinsDepth; ++u, q.next()) {
      const int64_t j = w + warps * q.j;
      const int64_t v = j < cnt ? load(j, s0 + q.s, &x[u]) : -1;
      bin[u] = v < 0 ? -1 : j * n + v;
    }
    for (int u = 0; u < kBinsDepth; ++u) {
      sv[u * kBinsWarp + lane] = static_cast<int32_t>(bin[u]);
      sx[u * kBinsWarp + lane] = x[u];
    }
  } else if (phase == kBinsScan) {  // round k % kBinsDepth of warp w's stage
    const int64_t w = t / kBinsWarp, lane = t % kBinsWarp;
    const int64_t at = w * kBinsStageSteps + (k % kBinsDepth) * kBinsWarp;
    const uint32_t peers = stage_peers(m.stage_v + at, lane);
    const int32_t v = m.stage_v[at + lane];
    if (v < 0 || (peers & ((uint32_t(1) << lane) - 1)) != 0) return;  // bad, or not the run's first
    A r = m.bins[v];
    int32_t c = 0;
    for (int j = static_cast<int>(lane); j < kBinsWarp; ++j) {
      if (!(peers >> j & 1u)) continue;
      r = combine<A>(a.combine, r, m.stage_x[at + j]);
      ++c;
    }
    m.bins[v] = r;
    if (m.cnt) m.cnt[v] += c;
  } else if (!a.split) {  // kBinsDone, whole lines: out written once (finish_acc)
    T* const out = static_cast<T*>(a.out);
    each_bin([&](int64_t j, int64_t v) {
      A r = m.bins[j * n + v];
      if (finish_acc<T>(a.combine, a.include_self, m.cnt ? m.cnt[j * n + v] : 0, &r))
        out[m.line[j].v[kScatterOut] + I(v) * a.target_dim_stride] = Conv<T>::store(r);
    });
  } else {  // kBinsDone, a chunk: its bins into the target, atomically
    A* const target = static_cast<A*>(a.out);
    const A neutral = bins_neutral<A>(a.combine);
    for (int64_t v = t; v < n; v += g) {
      const I at = m.line[0].v[kScatterOut] + I(v) * a.target_dim_stride;
      if (m.cnt) {
        if (m.cnt[v] == 0) continue;
        atomic_count_add(a.count + at, m.cnt[v]);
      } else if (same_bits(m.bins[v], neutral)) {
        continue;
      }
      atomic_combine<A>(target + at, m.bins[v], a.combine);
    }
  }
}

// The phases of one item in order: each(phase, k) runs a phase for every thread of the group,
// then the group's barrier.
template <typename I, int D, typename Each>
SW_HOST_DEVICE SW_INLINE void bins_item(const BinsArgs<I, D>& a, int64_t item, Each&& each) {
  each(kBinsLines, 0);
  each(kBinsInit, 0);
  if (!a.ordered) {
    each(kBinsAcc, 0);
  } else {
    // As many stages as the warp with the most lines needs (uniform over the group).
    const int64_t pk = a.chunks == 1 ? item : item / a.chunks;
    const int64_t s0 = (item - pk * a.chunks) * a.chunk;
    const int64_t len = (s0 + a.chunk < a.line_len ? s0 + a.chunk : a.line_len) - s0;
    const int64_t cnt = a.lines - pk * a.pack < a.pack ? a.lines - pk * a.pack : a.pack;
    const int64_t warps = a.group / kBinsWarp, most = (cnt + warps - 1) / warps * len;
    for (int64_t k = 0; k * kBinsStageSteps < most; ++k) {
      each(kBinsStage, k);
      for (int u = 0; u < kBinsDepth; ++u) each(kBinsScan, k * kBinsDepth + u);
    }
  }
  each(kBinsDone, 0);
}

}  // namespace cuda_scatter
}  // namespace stridewise
