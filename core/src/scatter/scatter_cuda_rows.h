// The CUDA scatter's fast-mode copy through a shared index over rows (rows_put_thread): one
// write per (position, line), no sort. Its arguments are the segment path's (common/segments.h)
// with keys, vals, chunk and carry unused. Host and device compilable; no __global__ code.
#pragma once

#include <cstdint>

#include "common/segments.h"
#include "scatter/scatter_cuda_impl.h"

namespace stridewise {
namespace cuda_scatter {

// Copy in fast mode, without the sort: ATen leaves which duplicate wins unspecified, and so
// do we (deterministic mode takes seg_put). Only for lines that are one aligned run in out
// and src (V > 1, seg_vec), so U is the element type. Work item (position j, tile of
// lines), tiles of tile_threads * kRowsUnroll vectors; `chunk`, `chunks`, keys, vals and
// carry are unused. put_elems ran the copy of 32768 rows at 1.3-1.9 TB/s, half ATen's speed
// (H200, 2026-12-01): one element and a full offset calculation per thread.
constexpr int kRowsUnroll = 2;

template <typename U, int V, typename I, int D>
SW_HOST_DEVICE SW_INLINE void rows_put_thread(const SegArgs<I, D>& a, int64_t index_dim_stride,
                                              int64_t block, int64_t thread, int64_t grid) {
  static_assert(V > 1, "rows_put: vectors of whole elements only");
  const int64_t per_block = kThreads / a.tile_threads;
  const int64_t items = a.n * a.tiles;
  for (int64_t w0 = block * per_block; w0 < items; w0 += grid * per_block) {
    const int64_t w = w0 + thread / a.tile_threads;
    if (w >= items) continue;
    const int64_t j = w / a.tiles;
    const int64_t g0 = (w % a.tiles) * a.tile_threads * kRowsUnroll + thread % a.tile_threads;
    const int64_t k = load_index(a.index, j * index_dim_stride, a.idx64);  // broadcast
    if (k < 0 || k >= a.size) continue;  // never an address (validation recorded it)
    U x[kRowsUnroll][V] = {};
    for (int u = 0; u < kRowsUnroll; ++u) {
      const int64_t l = (g0 + u * a.tile_threads) * V;
      if (l >= a.lines) break;
      if (a.has_value) {
        for (int q = 0; q < V; ++q) x[u][q] = value_as<U>(a.value);
      } else {
        const I from = seg_line(a, l).src + I(j) * a.src_dim_stride;
        load_vec<U, V>(static_cast<const U*>(a.src) + from, x[u]);
      }
    }
    for (int u = 0; u < kRowsUnroll; ++u) {
      const int64_t l = (g0 + u * a.tile_threads) * V;
      if (l >= a.lines) break;
      store_vec<U, V>(static_cast<U*>(a.out) + (seg_line(a, l).out + I(k) * a.out_dim_stride),
                      x[u]);
    }
  }
}

}  // namespace cuda_scatter
}  // namespace stridewise
