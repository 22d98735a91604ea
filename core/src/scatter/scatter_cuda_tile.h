// The CUDA scatter's tile path: accumulating combines with an index of its own per element
// (not shared by the lines), when each line's out column fits in shared memory. Lines
// (scatter.h: every coordinate but dim fixed) own disjoint out columns out[line, 0..n), n =
// out.size(dim); a block takes `tile` consecutive lines and holds their n x tile accumulators
// (and counts, for mean and include_self = false) in shared memory:
//  0. the tile's line offsets (out, index, src) into shared memory;
//  1. init: each accumulator from out (include_self) or the combine's identity, counts 0;
//  2. accumulate: every (step, line) of the tile, lines fastest across threads (a contiguous
//     index/src row is read coalesced), combined atomically in shared memory;
//  3. finish: each out element once (mean divides; untouched elements keep out).
// Global memory sees index and src read once and the out columns read and written once, in
// rows of `tile` elements; no global atomics, no accumulator workspace (float16/bfloat16
// accumulate in float32 in shared memory and round once). Not deterministic (shared-memory
// atomics): deterministic mode never takes it.
//
// Host and device compilable (the host emulation runs each phase for every thread of a block
// before the next, as __syncthreads orders them on the device); no __global__ code.
#pragma once

#include <cstdint>

#include "scatter/scatter_cuda_impl.h"
#include "scatter/scatter_cuda_sorted.h"  // PathChoice, index_shared
#include "stridewise/scatter.h"

namespace stridewise {
namespace cuda_scatter {

constexpr int kTileThreads = 1024;                   // threads per block of the tile kernel
constexpr int64_t kTileMaxLines = 32;                // lines per block at most
constexpr int64_t kTileMinElems = int64_t(1) << 16;  // below: the atomics kernel
// Independent loads in flight per thread in phases 1 and 2: at (64,4096,1024) phase 1 has 16
// rows per thread, so 8 is two round trips to memory (4 left the block four).
constexpr int kTileUnroll = 8;
// Shared memory per block at most: two blocks fit an SM of the H200 (228 KB), so one block's
// loads overlap the other's barriers and finish phase (a first estimate, to be measured).
constexpr int64_t kTileSmemBytes = 96 * 1024;

struct TileShape {
  bool use = false;
  int64_t tile = 0;  // lines per block (a power of two)
  int log2_tile = 0;
  bool counts = false;     // an int32 count per accumulator
  int64_t smem_bytes = 0;  // per block: accumulators, counts, line offsets
};

// Bytes of the tile's line offsets (3 per line, 8 bytes each) ahead of the accumulators.
SW_HOST_DEVICE SW_INLINE constexpr int64_t tile_offsets_bytes(int64_t tile) {
  return tile * 3 * 8;
}

// Selection (kAuto): not deterministic; an accumulating combine with an atomic (not
// complex128 multiply) that needs the accumulator workspace (float16/bfloat16, 1-/2-byte
// integers, mean, include_self=False); an index not shared (a shared one takes the segment path);
// at least kTileMinElems positions; lines at least a quarter as long as out's dim (else most of the
// columns read and written are untouched: the atomics kernel touches only what it adds to);
// and a tile of at least 4 lines fits kTileSmemBytes (rows of a few bytes per block: the
// neighbouring blocks, which run at the same time, read the rest of each sector from L2).
// `acc_bytes`: bytes of AccOf<T>.
inline TileShape tile_shape(const ScatterArgs& a, const ScatterPlan& p, PathChoice choice,
                            int acc_bytes) {
  TileShape s;
  if (choice != PathChoice::kAuto && choice != PathChoice::kTile) return s;
  if (a.deterministic || !a.desc.accumulates() || p.elems.numel == 0 || p.lines.numel == 0)
    return s;
  if (a.out.dtype == DType::kComplex128 && a.desc.combine == Combine::kMul) return s;
  s.counts = a.desc.combine == Combine::kMean || !a.desc.include_self;
  // Where the atomics kernel adds straight into out (no accumulator workspace: a 4- or
  // 8-byte type, no counts), it touches out once too, in whole lines (interleave_target).
  const bool direct = acc_bytes == elem_size(a.out.dtype) && !s.counts;
  if (choice == PathChoice::kAuto && (direct || index_shared(a) || p.elems.numel < kTileMinElems ||
                                      4 * p.line_len < p.out_dim_size))
    return s;
  const int64_t per_line = p.out_dim_size * (acc_bytes + (s.counts ? 4 : 0)) + 3 * 8;
  int64_t t = 1;
  while (t * 2 <= kTileMaxLines && (t * 2) * per_line <= kTileSmemBytes) t *= 2;
  if (t * per_line > kTileSmemBytes || t < 4) return s;
  s.use = true;
  s.tile = t;
  while ((int64_t(1) << s.log2_tile) < t) ++s.log2_tile;
  s.smem_bytes = tile_offsets_bytes(t) + t * p.out_dim_size * (acc_bytes + (s.counts ? 4 : 0));
  return s;
}

template <typename I, int D>
struct TileArgs : Operands {
  bool counts;
  OffsetCalculator<3, I, D> calc;  // ScatterPlan::lines: (out, index, src)
  int64_t lines;
  int64_t tile;
  int log2_tile;
  int64_t n;  // out.size(dim): accumulator rows; valid index values are [0, n)
  int64_t line_len;
  I out_dim_stride;
  I index_dim_stride;
  I src_dim_stride;
  Abort abort;
};

// The block's shared memory: line offsets (int64 x 3 per line), accumulators (entry v * tile
// + i: row v of line i), counts.
template <typename A>
struct TileSmem {
  int64_t* off;
  A* acc;
  int32_t* cnt;
};

template <typename A, typename I, int D>
SW_HOST_DEVICE SW_INLINE TileSmem<A> tile_smem(const TileArgs<I, D>& a, void* smem) {
  TileSmem<A> m;
  m.off = static_cast<int64_t*>(smem);
  m.acc = reinterpret_cast<A*>(static_cast<unsigned char*>(smem) + tile_offsets_bytes(a.tile));
  m.cnt = a.counts ? reinterpret_cast<int32_t*>(m.acc + a.n * a.tile) : nullptr;
  return m;
}

// Phase `phase` (0..3, in order, the block synchronized between them) of tile `t` for thread
// `thread` of `threads`.
template <typename T, typename I, int D>
SW_HOST_DEVICE SW_INLINE void tile_phase(const TileArgs<I, D>& a, int phase, int64_t t,
                                         int64_t thread, int64_t threads, void* smem) {
  using A = AccOf<T>;
  const TileSmem<A> m = tile_smem<A>(a, smem);
  const int64_t l0 = t * a.tile;
  const int64_t nl = a.lines - l0 < a.tile ? a.lines - l0 : a.tile;  // lines in this tile
  const int64_t mask = a.tile - 1;
  if (phase == 0) {
    for (int64_t i = thread; i < nl; i += threads) {
      const Offsets<3, I> o = a.calc.get(I(l0 + i));
      m.off[i * 3 + 0] = int64_t(o.v[kScatterOut]);
      m.off[i * 3 + 1] = int64_t(o.v[kScatterIndex]);
      m.off[i * 3 + 2] = int64_t(o.v[kScatterSrc]);
    }
    return;
  }
  const int64_t entries = a.n << a.log2_tile;
  if (phase == 1) {
    const T* const out = static_cast<const T*>(a.out);
    const A id = Ops<A>::identity(a.combine);
    for (int64_t e0 = thread; e0 < entries; e0 += threads * kTileUnroll) {
      T x[kTileUnroll];
      SW_HOST_ZERO(x);
      for (int u = 0; u < kTileUnroll; ++u) {
        const int64_t e = e0 + u * threads;
        if (a.include_self && e < entries && (e & mask) < nl)
          x[u] = out[I(m.off[(e & mask) * 3]) + I(e >> a.log2_tile) * a.out_dim_stride];
      }
      for (int u = 0; u < kTileUnroll; ++u) {
        const int64_t e = e0 + u * threads;
        if (e >= entries || (e & mask) >= nl) continue;
        m.acc[e] = a.include_self ? Conv<T>::load(x[u]) : id;
        if (m.cnt) m.cnt[e] = 0;
      }
    }
    return;
  }
  if (phase == 2) {
    const T* const src = static_cast<const T*>(a.src);
    const A val = a.has_value ? Conv<T>::load(value_as<T>(a.value)) : A{};
    const SrcScale<T> scale = src_scale<T>(a);
    const int64_t positions = a.line_len << a.log2_tile;
    for (int64_t p0 = thread; p0 < positions; p0 += threads * kTileUnroll) {
      int64_t v[kTileUnroll];
      A x[kTileUnroll];
      SW_HOST_ZERO(x);
      // The index and src loads go out together (src's address does not depend on the
      // index value); a bad or past-the-end value only skips the add.
      for (int u = 0; u < kTileUnroll; ++u) {
        const int64_t p = p0 + u * threads, i = p & mask;
        v[u] = -1;
        if (p >= positions || i >= nl) continue;
        v[u] = load_index(a.index, I(m.off[i * 3 + 1]) + I(p >> a.log2_tile) * a.index_dim_stride,
                          a.idx64);
        x[u] = a.has_value
                   ? val
                   : scale(Conv<T>::load(
                         src[I(m.off[i * 3 + 2]) + I(p >> a.log2_tile) * a.src_dim_stride]));
      }
      for (int u = 0; u < kTileUnroll; ++u) {
        if (v[u] < 0 || v[u] >= a.n) continue;
        const int64_t e = (v[u] << a.log2_tile) + ((p0 + u * threads) & mask);
        atomic_combine<A>(m.acc + e, x[u], a.combine);
        if (m.cnt) atomic_count(m.cnt + e);
      }
    }
    return;
  }
  // phase 3: finish (finish_acc, as ws_final_thread)
  T* const out = static_cast<T*>(a.out);
  for (int64_t e = thread; e < entries; e += threads) {
    const int64_t i = e & mask;
    if (i >= nl) continue;
    A r = m.acc[e];
    if (finish_acc<T>(a.combine, a.include_self, m.cnt ? m.cnt[e] : 0, &r))
      out[I(m.off[i * 3]) + I(e >> a.log2_tile) * a.out_dim_stride] = Conv<T>::store(r);
  }
}

}  // namespace cuda_scatter
}  // namespace stridewise
