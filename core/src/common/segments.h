// The sorted path's back half, one for every family (scatter's segment path, index_k's sorted
// path): after a family's keys kernel and the radix sort (common/radix_sort.cuh), the sorted
// (key, value) pairs are cut into chunks of `chunk` consecutive sorted positions, whatever the
// keys, so every work item does the same amount of work however the keys repeat (a key shared
// by every position is as fast as distinct keys). A key addresses out at
// `line's out offset + key * out_dim_stride`; a value, the source at
// `line's src offset + value * src_dim_stride` (scatter: index value and position along dim;
// index_k: the terms' element offset and the position's src offset, both strides 1). With one
// line and `src_sorted`, a value is the source element itself (its bytes in the low end of the
// value's slot: index_k's payload keys), so the walk reads the sorted values in order instead
// of gathering the source at random.
// A work item is (chunk c, tile of lines; SegArgs::tile_major orders them): each thread owns V
// consecutive lines (V > 1 only when lines are contiguous in out and src and 16-byte loads are
// aligned) and walks the chunk in sorted order. Within a chunk a run of equal keys is a whole
// segment, or a piece of one that crosses the chunk's first or last position:
//  - a whole segment is finished in place: out[line, key] = self (+) fold(run), one write;
//  - a piece leaves its fold in the carry workspace: slot 0 (the chunk's head run, which
//    continues from chunk c-1) or slot 1 (its tail run, which continues into c+1);
//  - copy (deterministic: the last writer in index order wins) writes src at the segment's
//    last position from the chunk that holds it; no carry.
// seg_fix then finishes each segment that crosses chunks, from the chunk where it starts:
// tail(c) (+) head(c+1) (+) ... in chunk order.
//
// The order of combination is fixed by the keys alone: a segment's first piece starts from
// self (include_self) or the identity and folds its positions in sorted (= index: the sort is
// stable) order, as a serial walk does; a later piece folds from its own first position; the
// pieces combine in chunk order. So results are bitwise repeatable, and bitwise a serial walk's
// for every segment within one chunk and wherever the arithmetic is exact (integers, max/min,
// copy); floating add and multiply of a segment that crosses a chunk boundary round as
// ((self + x0 + .. + xa) + (xa+1 + .. + xb)) + ...: every piece in the accumulation type, one
// rounding to the storage type at the end.
//
// Host and device compilable (the host emulation tests run these bodies); no __global__ code.
// The launch sequence is common/segments_launch.h.
#pragma once

#include <cstdint>
#include <cstring>

#include "common/elem_arith.h"     // Conv, Ops, combine, finish_acc
#include "common/kernel_common.h"  // kThreads, Abort, Value, SW_LDG
#include "common/operands.h"
#include "stridewise/offset_calc.h"

namespace stridewise {
namespace cuda_seg {

using namespace elem;         // NOLINT: the storage tags and conversions
using namespace arith;        // NOLINT: Conv, Ops, combine, finish_acc
using namespace cuda_common;  // NOLINT: the shared launch constants, Abort, Value, Operands

// The lines' calculator's operands: (out, unused, src), scatter's ScatterPlan::lines order.
enum SegOperand : int { kSegOut = 0, kSegSrc = 2 };

// Sorted positions per chunk: bounds the serial walk of one work item (and, with the lines
// per item, the work per item); the carry workspace is 2 * lines per chunk.
constexpr int64_t kSegChunk = 64;

template <typename I, int D>
struct SegArgs : Operands {  // index unused: the sorted keys stand for it
  const void* keys;          // sorted; uint32 / uint64 (wide)
  const void* vals;          // positions along dim, int32 / int64 (wide)
  bool wide;
  int64_t n;                       // sorted positions (line_len)
  int64_t chunk;                   // positions per chunk
  int64_t chunks;                  // ceil(n / chunk)
  OffsetCalculator<3, I, D> calc;  // the lines: (out, -, src) offsets (kSegOut, kSegSrc)
  int64_t lines;
  int64_t tile_threads;  // threads per work item (a power of two dividing kThreads)
  int64_t tiles;         // work items per chunk: ceil(ceil(lines / V) / tile_threads)
  // Work item w is (chunk w / tiles, tile w % tiles) when false; (chunk w % chunks, tile
  // w / chunks) when true, so that the items running at once share a few tiles of lines.
  // For lines strided in src (src transposed: a position's lines are far apart, a line's
  // positions near) each 32-byte sector then serves all its positions from L2 instead of
  // one: the line-major order read src at 4 of every 32 bytes (14 ms against ATen's 6.8 on
  // the transposed MoE combine, H200, 2026-12-01).
  bool tile_major;
  I out_dim_stride;
  I src_dim_stride;
  bool src_sorted;  // vals hold the source elements (one line; accumulating jobs)
  int64_t size;     // valid keys are [0, size)
  void* carry;      // AccOf<T>[chunks][2][lines]; null for copy
  Abort abort;
};

SW_HOST_DEVICE SW_INLINE uint64_t seg_key(const void* k, int64_t i, bool wide) {
  if (wide) return SW_LDG(static_cast<const unsigned long long*>(k) + i);
  return SW_LDG(static_cast<const unsigned int*>(k) + i);
}
SW_HOST_DEVICE SW_INLINE int64_t seg_val(const void* v, int64_t i, bool wide) {
  if (wide) return SW_LDG(static_cast<const long long*>(v) + i);
  return SW_LDG(static_cast<const int*>(v) + i);
}

// V elements of T from p (16-byte aligned when V > 1: one vector load).
template <typename T, int V>
SW_HOST_DEVICE SW_INLINE void load_vec(const T* p, T (&x)[V]) {
  if constexpr (V == 1) {
    x[0] = *p;
  } else {
    static_assert(sizeof(T) * V == 16, "load_vec: V elements make 16 bytes");
    const uint4 u = SW_LDG(reinterpret_cast<const uint4*>(p));
    memcpy(x, &u, 16);
  }
}
template <typename T, int V>
SW_HOST_DEVICE SW_INLINE void store_vec(T* p, const T (&x)[V]) {
  if constexpr (V == 1) {
    *p = x[0];
  } else {
    uint4 u;
    memcpy(&u, x, 16);
    *reinterpret_cast<uint4*>(p) = u;
  }
}

// One thread's place in the (chunk, tile) grid: false when it has no lines.
struct SegItem {
  int64_t c;               // chunk
  int64_t l0;              // first of the thread's V lines
  int64_t b, e;            // the chunk's sorted positions [b, e)
  bool cont_in, cont_out;  // its first / last key continues from c-1 / into c+1
};

template <int V, typename I, int D>
SW_HOST_DEVICE SW_INLINE bool seg_item(const SegArgs<I, D>& a, int64_t w, int64_t lane,
                                       SegItem* it) {
  if (w >= a.chunks * a.tiles) return false;
  const int64_t t = a.tile_major ? w / a.chunks : w % a.tiles;
  it->c = a.tile_major ? w % a.chunks : w / a.tiles;
  it->l0 = (t * a.tile_threads + lane) * V;
  if (it->l0 >= a.lines) return false;
  it->b = it->c * a.chunk;
  it->e = it->b + a.chunk < a.n ? it->b + a.chunk : a.n;
  it->cont_in = it->b > 0 && seg_key(a.keys, it->b, a.wide) == seg_key(a.keys, it->b - 1, a.wide);
  it->cont_out =
      it->e < a.n && seg_key(a.keys, it->e - 1, a.wide) == seg_key(a.keys, it->e, a.wide);
  return true;
}

// body(item) for each of this thread's work items (a grid-stride loop over (chunk, tile)).
template <int V, typename I, int D, typename F>
SW_HOST_DEVICE SW_INLINE void for_seg_items(const SegArgs<I, D>& a, int64_t block, int64_t thread,
                                            int64_t grid, F&& body) {
  const int64_t per_block = kThreads / a.tile_threads;
  for (int64_t w0 = block * per_block; w0 < a.chunks * a.tiles; w0 += grid * per_block) {
    SegItem it;
    if (seg_item<V>(a, w0 + thread / a.tile_threads, thread % a.tile_threads, &it)) body(it);
  }
}

// The out and src offsets of the thread's first line (its V lines are consecutive from there).
template <typename I>
struct LineBase {
  I out, src;
};
template <typename I, int D>
SW_HOST_DEVICE SW_INLINE LineBase<I> seg_line(const SegArgs<I, D>& a, int64_t l0) {
  const Offsets<3, I> o = a.calc.get(I(l0));
  return LineBase<I>{o.v[kSegOut], o.v[kSegSrc]};
}

// acc holds the first value of a run; when that run starts its segment, it becomes
// base (+) value, base being self (include_self) or the combine's identity: the line walk's
// first step, so a segment within one chunk combines exactly as the line walk does.
template <typename T, int V, typename I, int D>
SW_HOST_DEVICE SW_INLINE void seg_begin(const SegArgs<I, D>& a, const LineBase<I>& lb, uint64_t key,
                                        AccOf<T> (&acc)[V]) {
  using A = AccOf<T>;
  if (key >= uint64_t(a.size)) return;  // never an address (validation recorded it)
  if (!a.include_self) {
    for (int j = 0; j < V; ++j) acc[j] = combine<A>(a.combine, Ops<A>::identity(a.combine), acc[j]);
    return;
  }
  T x[V];
  load_vec<T, V>(static_cast<const T*>(a.out) + (lb.out + I(key) * a.out_dim_stride), x);
  for (int j = 0; j < V; ++j) acc[j] = combine<A>(a.combine, Conv<T>::load(x[j]), acc[j]);
}

// out[line, key] = acc for a segment of `count` positions (mean divides).
template <typename T, int V, typename I, int D>
SW_HOST_DEVICE SW_INLINE void seg_finish(const SegArgs<I, D>& a, const LineBase<I>& lb,
                                         uint64_t key, int64_t count, const AccOf<T> (&acc)[V]) {
  using A = AccOf<T>;
  if (key >= uint64_t(a.size)) return;
  T x[V];
  for (int j = 0; j < V; ++j) {
    A r = acc[j];
    finish_acc<T>(a.combine, a.include_self, count, &r);  // count >= 1: always stored
    x[j] = Conv<T>::store(r);
  }
  store_vec<T, V>(static_cast<T*>(a.out) + (lb.out + I(key) * a.out_dim_stride), x);
}

// The source values of sorted position j for the thread's lines, in the accumulation type.
template <typename T, int V, typename I, int D>
SW_HOST_DEVICE SW_INLINE void seg_load(const SegArgs<I, D>& a, const LineBase<I>& lb, int64_t j,
                                       AccOf<T> (&x)[V]) {
  if (a.has_value) {
    const AccOf<T> v = Conv<T>::load(value_as<T>(a.value));
    for (int k = 0; k < V; ++k) x[k] = v;
    return;
  }
  T t[V];
  if (a.src_sorted) {
    // One line (V == 1); the element in the low bytes of its 8- or 4-byte slot (the host
    // sets src_sorted only where it fits: SegJob).
    const I slot = I((a.wide ? 8 : 4) / sizeof(T));
    load_vec<T, V>(static_cast<const T*>(a.vals) + I(j) * slot, t);
  } else {
    const I row = I(seg_val(a.vals, j, a.wide)) * a.src_dim_stride;
    load_vec<T, V>(static_cast<const T*>(a.src) + (lb.src + row), t);
  }
  const SrcScale<T> scale = src_scale<T>(a);
  for (int k = 0; k < V; ++k) x[k] = scale(Conv<T>::load(t[k]));
}

template <typename A, int V>
SW_HOST_DEVICE SW_INLINE A* carry_at(void* carry, int64_t lines, int64_t c, int slot, int64_t l0) {
  return static_cast<A*>(carry) + ((c * 2 + slot) * lines + l0);
}

// Accumulating combines: fold each run of the chunk; finish whole segments, carry pieces.
template <typename T, int V, typename I, int D>
SW_HOST_DEVICE SW_INLINE void seg_acc_thread(const SegArgs<I, D>& a, int64_t block, int64_t thread,
                                             int64_t grid) {
  using A = AccOf<T>;
  for_seg_items<V>(a, block, thread, grid, [&](const SegItem& it) {
    const LineBase<I> lb = seg_line(a, it.l0);
    // Position j + 1's key and values are loaded (kn, nx) before position j is combined, so
    // each thread keeps two source loads in flight across the walk's dependent steps.
    A acc[V], x[V], nx[V];
    SW_HOST_ZERO(nx);
    uint64_t kn = 0;
    int64_t r0 = it.b;
    uint64_t k = seg_key(a.keys, it.b, a.wide);
    seg_load<T, V>(a, lb, it.b, acc);
    if (it.b + 1 < it.e) {
      kn = seg_key(a.keys, it.b + 1, a.wide);
      seg_load<T, V>(a, lb, it.b + 1, nx);
    }
    if (!it.cont_in) seg_begin<T, V>(a, lb, k, acc);
    for (int64_t j = it.b + 1; j <= it.e; ++j) {
      const uint64_t kj = j < it.e ? kn : ~uint64_t(0);
      for (int q = 0; q < V; ++q) x[q] = nx[q];
      if (j + 1 < it.e) {
        kn = seg_key(a.keys, j + 1, a.wide);
        seg_load<T, V>(a, lb, j + 1, nx);
      }
      if (j < it.e && kj == k) {
        for (int q = 0; q < V; ++q) acc[q] = combine<A>(a.combine, acc[q], x[q]);
        continue;
      }
      // the run [r0, j) of key k ends here
      const bool head = r0 == it.b && it.cont_in;
      const bool tail = j == it.e && it.cont_out;
      if (head || tail) {
        A* const c = carry_at<A, V>(a.carry, a.lines, it.c, head ? 0 : 1, it.l0);
        for (int q = 0; q < V; ++q) c[q] = acc[q];
      } else {
        seg_finish<T, V>(a, lb, k, j - r0, acc);
      }
      if (j == it.e) break;
      r0 = j;
      k = kj;
      for (int q = 0; q < V; ++q) acc[q] = x[q];
      seg_begin<T, V>(a, lb, k, acc);
    }
  });
}

// First position in [b, e) whose key is >= k (keys sorted).
SW_HOST_DEVICE SW_INLINE int64_t seg_lower(const void* keys, bool wide, int64_t b, int64_t e,
                                           uint64_t k) {
  while (b < e) {
    const int64_t m = b + (e - b) / 2;
    if (seg_key(keys, m, wide) < k)
      b = m + 1;
    else
      e = m;
  }
  return b;
}

// First position in [b, n) whose key is > k (keys sorted, key(b - 1) == k): a galloping search,
// so a segment that ends near b costs a few loads and one that runs on for thousands of
// positions costs about 2 log2 of its length, never a load per chunk it spans.
SW_HOST_DEVICE SW_INLINE int64_t seg_end(const void* keys, bool wide, int64_t b, int64_t n,
                                         uint64_t k) {
  int64_t lo = b, step = 1;  // every position below lo has key k
  while (lo < n && seg_key(keys, lo, wide) == k) {
    const int64_t hi = lo + step < n ? lo + step : n;
    if (hi == n || seg_key(keys, hi, wide) != k) return seg_lower(keys, wide, lo + 1, hi, k + 1);
    lo = hi + 1;
    step *= 2;
  }
  return lo;
}

// Segments that cross chunks, finished from the chunk where they start (after seg_acc): the
// start chunk's tail piece, then the head piece of every later chunk the segment reaches, in
// chunk order. The segment's end is found first (seg_end), so the pieces' loads do not wait on
// one another's keys (a single hot key spans hundreds of chunks).
template <typename T, int V, typename I, int D>
SW_HOST_DEVICE SW_INLINE void seg_fix_thread(const SegArgs<I, D>& a, int64_t block, int64_t thread,
                                             int64_t grid) {
  using A = AccOf<T>;
  for_seg_items<V>(a, block, thread, grid, [&](const SegItem& it) {
    if (!it.cont_out) return;
    const uint64_t k = seg_key(a.keys, it.e - 1, a.wide);
    // A chunk of one run that continues from c-1 is a middle piece, not the start.
    if (it.cont_in && seg_key(a.keys, it.b, a.wide) == k) return;
    const int64_t start = seg_lower(a.keys, a.wide, it.b, it.e, k);
    const int64_t end = seg_end(a.keys, a.wide, it.e, a.n, k);  // > it.e: cont_out
    const int64_t last = (end - 1) / a.chunk;                   // the chunk of its last position
    A acc[V];
    const A* t = carry_at<A, V>(a.carry, a.lines, it.c, 1, it.l0);
    for (int q = 0; q < V; ++q) acc[q] = t[q];
    for (int64_t d = it.c + 1; d <= last; ++d) {  // each later chunk's piece is its head (slot 0)
      const A* h = carry_at<A, V>(a.carry, a.lines, d, 0, it.l0);
      for (int q = 0; q < V; ++q) acc[q] = combine<A>(a.combine, acc[q], h[q]);
    }
    const LineBase<I> lb = seg_line(a, it.l0);
    seg_finish<T, V>(a, lb, k, end - start, acc);
  });
}

// Copy: the segment's last position is written by the chunk that holds it (U: the copy unit,
// `units` of them per element; V > 1 only with one unit per element).
template <typename U, int V, typename I, int D>
SW_HOST_DEVICE SW_INLINE void seg_put_thread(const SegArgs<I, D>& a, int units, int64_t block,
                                             int64_t thread, int64_t grid) {
  for_seg_items<V>(a, block, thread, grid, [&](const SegItem& it) {
    const LineBase<I> lb = seg_line(a, it.l0);
    for (int64_t j = it.b; j < it.e; ++j) {
      const uint64_t k = seg_key(a.keys, j, a.wide);
      const bool last = j + 1 < it.e ? seg_key(a.keys, j + 1, a.wide) != k : !it.cont_out;
      if (!last || k >= uint64_t(a.size)) continue;
      U* const dst = static_cast<U*>(a.out) + (lb.out + I(k) * a.out_dim_stride) * I(units);
      if (a.has_value) {
        const U* v = reinterpret_cast<const U*>(a.value.b);
        for (int q = 0; q < V; ++q)
          for (int u = 0; u < units; ++u) dst[q * units + u] = v[u];
        continue;
      }
      const I row = I(seg_val(a.vals, j, a.wide)) * a.src_dim_stride;
      const U* const from = static_cast<const U*>(a.src) + (lb.src + row) * I(units);
      if (V > 1) {
        U x[V];
        load_vec<U, V>(from, x);
        store_vec<U, V>(dst, x);
      } else {
        for (int u = 0; u < units; ++u) dst[u] = from[u];
      }
    }
  });
}

}  // namespace cuda_seg
}  // namespace stridewise
