// The CUDA scatter's bins path: accumulating combines whose lines (scatter.h: every coordinate
// but dim fixed) each land in a short out column, with the index walked along dim in memory
// order (a last-dim scatter into tens to thousands of bins per row; a 1-D histogram). A group
// of threads (a warp, or a block of kBinsThreads) owns one item -- a line, or a chunk of a long
// line -- and holds that line's out column as n = out.size(dim) accumulators ("bins", plus an
// int32 count each for mean and include_self = false) in shared memory:
//  init:  the bins from out (include_self, whole lines) or the combine's neutral value;
//  acc:   every step of the item, consecutive steps on consecutive threads (a contiguous index
//         row is read coalesced), combined into its bin by a shared-memory atomic; or, in
//         deterministic mode, ordered: steps staged kBinsWarp at a time, then thread t combines
//         the staged steps whose bin is t mod kBinsWarp, in step order (no atomics: each bin
//         sees its values in index order, as the CPU combines them);
//  done:  a whole line writes its column once (finish_acc, as the tile path); a chunk combines
//         its bins into the target by global atomics (out itself for 4-/8-byte types without
//         counts, else the workspace's accumulator and counts, which ws_init / ws_final wrap).
// Against the atomics kernel this replaces one global atomic per element (contended in a
// short row, or across a histogram's few thousand bins) by a shared-memory one, and touches
// out once per line; against the tile path it walks lines whose index is contiguous along dim
// (the tile path reads lines fastest: there, a contiguous row's steps would be a line apart).
// Only the bins' memory depends on n, so the rule (bins_shape) keeps n small.
//
// Host and device compilable (the host emulation runs each phase for every thread of a group
// before the next, as the group's barrier orders them); no __global__ code.
#pragma once

#include <cstdint>
#include <cstring>

#include "scatter/scatter_cuda_impl.h"
#include "scatter/scatter_cuda_sorted.h"  // PathChoice, index_shared, kSegMinLines
#include "stridewise/scatter.h"

namespace stridewise {
namespace cuda_scatter {

constexpr int kBinsThreads = 256;  // threads per block (a group: 32 threads, or all of them)
constexpr int kBinsWarp = 32;      // threads per group when lines are short; ordered mode's
constexpr int kBinsUnroll = 4;     // independent index/src loads in flight per thread (acc)
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

enum BinsPhase : int { kBinsInit = 0, kBinsAcc = 1, kBinsStage = 2, kBinsScan = 3, kBinsDone = 4 };

struct BinsShape {
  bool use = false;
  bool split = false;    // lines cut into `chunks` items, flushed into the target by atomics
  bool ordered = false;  // deterministic: the staged, in-order combine (never split)
  bool counts = false;   // an int32 count per bin (mean, include_self = false)
  int group = kBinsWarp;
  int threads = kBinsThreads;  // per block: groups of `group` threads
  int64_t chunk = 0;           // steps per item (line_len when not split)
  int64_t chunks = 1;          // items per line
  int64_t slab_bytes = 0;      // shared memory per group (bins, counts, stage), 16-aligned
  int64_t smem_bytes = 0;      // per block
};

SW_HOST_DEVICE SW_INLINE int64_t align16(int64_t b) {
  return (b + 15) / 16 * 16;
}

// Shared memory per group: n bins of `acc` bytes, n counts, and (ordered) the stage: kBinsWarp
// bin numbers (int32) and values.
SW_HOST_DEVICE SW_INLINE int64_t bins_slab_bytes(int64_t n, int acc, bool counts, bool ordered) {
  const int64_t bins = align16(n * acc);
  const int64_t cnt = counts ? align16(n * 4) : 0;
  const int64_t stage = ordered ? align16(kBinsWarp * 4) + kBinsWarp * int64_t(acc) : 0;
  return bins + cnt + stage;
}

// Selection. kBins (tests): whenever it can run (kBinsSplit: in chunks of 3 steps); kAuto: besides,
// at least kBinsMinElems positions, steps at most kBinsMaxStepStride apart in the index (or fewer
// lines than the segment path's minimum: then nothing else spreads the work), the index not shared
// by many lines (that is the segment path's), and lines long against n (4 x line_len >= n whole, a
// chunk of at least n steps split: else most bins are initialized and written back for
// nothing; the atomics kernel touches only what it adds to). The rest, always:
//  - an accumulating combine, not a complex multiply;
//  - deterministic: whole lines only, ordered (kBinsWarp threads per line);
//  - the bins of one group fit kBinsSmemBytes.
// Shape: as many chunks per line as reach kBinsItems items (chunks of at least max(4 n, 2048)
// steps; deterministic: 1); a group of kBinsWarp threads for items of at most 2048 steps, else
// the whole block.
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
  s.group = s.ordered || s.chunk <= 2048 ? kBinsWarp : kBinsThreads;
  s.slab_bytes = bins_slab_bytes(n, acc_bytes, s.counts, s.ordered);
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
  int64_t n;  // bins per line; valid index values are [0, n)
  I target_dim_stride;
  I index_dim_stride;
  I src_dim_stride;
  int group;
  int64_t slab_bytes;
  bool counts;
  bool ordered;
  bool split;
  Abort abort;
};

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

// The group's shared memory: bins, counts (or null), stage bin numbers and values (ordered).
template <typename A>
struct BinsSmem {
  A* bins;
  int32_t* cnt;
  int32_t* stage_v;
  A* stage_x;
};

template <typename A, typename I, int D>
SW_HOST_DEVICE SW_INLINE BinsSmem<A> bins_smem(const BinsArgs<I, D>& a, void* slab) {
  unsigned char* p = static_cast<unsigned char*>(slab);
  BinsSmem<A> m;
  m.bins = reinterpret_cast<A*>(p);
  p += align16(a.n * int64_t(sizeof(A)));
  m.cnt = a.counts ? reinterpret_cast<int32_t*>(p) : nullptr;
  p += a.counts ? align16(a.n * 4) : 0;
  m.stage_v = reinterpret_cast<int32_t*>(p);
  m.stage_x = reinterpret_cast<A*>(p + align16(kBinsWarp * 4));
  return m;
}

// Phase `phase` of `item` (line item / chunks, chunk item % chunks) for thread t of the group
// (a.group threads), sub-chunk k of the ordered phases. The group's barrier separates phases.
template <typename T, typename I, int D>
SW_HOST_DEVICE SW_INLINE void bins_phase(const BinsArgs<I, D>& a, int phase, int64_t item,
                                         int64_t k, int64_t t, void* slab) {
  using A = AccOf<T>;
  const BinsSmem<A> m = bins_smem<A>(a, slab);
  const int64_t line = item / a.chunks;
  const int64_t s0 = (item % a.chunks) * a.chunk;
  const int64_t s1 = s0 + a.chunk < a.line_len ? s0 + a.chunk : a.line_len;
  const Offsets<3, I> o = a.calc.get(I(line));
  const int64_t g = a.group;
  const T* const src = static_cast<const T*>(a.src);
  const A val = a.has_value ? Conv<T>::load(value_as<T>(a.value)) : A{};
  const SrcScale<T> scale = src_scale<T>(a);
  auto load = [&](int64_t s, A* x) {  // the bin of step s (-1: bad, never an address), *x
    const int64_t v = load_index(a.index, o.v[kScatterIndex] + I(s) * a.index_dim_stride, a.idx64);
    *x = a.has_value ? val : scale(Conv<T>::load(src[o.v[kScatterSrc] + I(s) * a.src_dim_stride]));
    return v < 0 || v >= a.n ? int64_t(-1) : v;
  };
  if (phase == kBinsInit) {
    const T* const out = static_cast<const T*>(a.out);
    const A start = a.split ? bins_neutral<A>(a.combine) : Ops<A>::identity(a.combine);
    for (int64_t v = t; v < a.n; v += g) {
      m.bins[v] = !a.split && a.include_self
                      ? Conv<T>::load(out[o.v[kScatterOut] + I(v) * a.target_dim_stride])
                      : start;
      if (m.cnt) m.cnt[v] = 0;
    }
  } else if (phase == kBinsAcc) {
    for (int64_t s = s0 + t; s < s1; s += g * kBinsUnroll) {
      int64_t v[kBinsUnroll];
      A x[kBinsUnroll];
      SW_HOST_ZERO(x);
      for (int u = 0; u < kBinsUnroll; ++u) v[u] = s + u * g < s1 ? load(s + u * g, &x[u]) : -1;
      for (int u = 0; u < kBinsUnroll; ++u) {
        if (v[u] < 0) continue;
        atomic_combine<A>(m.bins + v[u], x[u], a.combine);
        if (m.cnt) atomic_count(m.cnt + v[u]);
      }
    }
  } else if (phase == kBinsStage) {
    const int64_t s = s0 + k * kBinsWarp + t;
    A x{};
    m.stage_v[t] = static_cast<int32_t>(s < s1 ? load(s, &x) : -1);
    m.stage_x[t] = x;
  } else if (phase == kBinsScan) {
    for (int j = 0; j < kBinsWarp; ++j) {
      const int32_t v = m.stage_v[j];
      if (v < 0 || v % kBinsWarp != t) continue;
      m.bins[v] = combine<A>(a.combine, m.bins[v], m.stage_x[j]);
      if (m.cnt) ++m.cnt[v];
    }
  } else if (!a.split) {  // kBinsDone, a whole line: out written once (finish_acc)
    T* const out = static_cast<T*>(a.out);
    for (int64_t v = t; v < a.n; v += g) {
      A r = m.bins[v];
      if (finish_acc<T>(a.combine, a.include_self, m.cnt ? m.cnt[v] : 0, &r))
        out[o.v[kScatterOut] + I(v) * a.target_dim_stride] = Conv<T>::store(r);
    }
  } else {  // kBinsDone, a chunk: its bins into the target, atomically
    A* const target = static_cast<A*>(a.out);
    const A neutral = bins_neutral<A>(a.combine);
    for (int64_t v = t; v < a.n; v += g) {
      const I at = o.v[kScatterOut] + I(v) * a.target_dim_stride;
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
  each(kBinsInit, 0);
  if (!a.ordered) {
    each(kBinsAcc, 0);
  } else {
    const int64_t s0 = (item % a.chunks) * a.chunk;
    const int64_t len = (s0 + a.chunk < a.line_len ? s0 + a.chunk : a.line_len) - s0;
    for (int64_t k = 0; k * kBinsWarp < len; ++k) {
      each(kBinsStage, k);
      each(kBinsScan, k);
    }
  }
  each(kBinsDone, 0);
}

}  // namespace cuda_scatter
}  // namespace stridewise
