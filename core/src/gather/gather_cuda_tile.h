// The CUDA gather's tile kernel, for an index whose memory runs along a different dim than
// out's (a transposed index; a column-major index gathering rows; an out= view transposed
// against its index). Shared by gather_cuda.cu and the host emulation test, like
// gather_cuda_impl.h: no __global__ code and no CUDA runtime calls here.
//
// Walking out in memory order reads such an index with a large stride: every lane of a warp
// touches its own 32-byte sector for an 8-byte value, and the sector's other values are read
// again by other warps much later. The tile kernel takes a kTile x kTile tile over planned
// dim 0 (out's fastest, "a") and planned dim k (the index's fastest, "k"):
//   1. load:  lanes run along k, so each warp reads the index tile's rows whole;
//             values go to shared memory as int64 (padded rows: no bank conflicts);
//   -- __syncthreads --
//   2. store: lanes run along a, so out is written (and self read) in out's order; each
//             thread checks, loads and stores kTile / kRows elements, loads first.
//   -- __syncthreads -- (the next tile reuses the buffer)
// The other planned dims ("rest") and each element's plan position come from one
// OffsetCalculator<4> over the rest. A bad value is skipped and reported, as in the other
// kernels, with its position in the plan's order.
#pragma once

#include <algorithm>
#include <cstdint>

#include "gather/gather_cuda_types.h"
#include "stridewise/gather.h"
#include "stridewise/offset_calc.h"

namespace stridewise {
namespace cuda_gather {

constexpr int kTile = 32;                // tile edge: a warp's width
constexpr int kRows = kThreads / kTile;  // warps per block: each takes every kRows-th row
static_assert(kThreads % kTile == 0, "block must be whole warps");
enum TileOperand : int { kTileOut = 0, kTileIndex = 1, kTileSelf = 2, kTilePos = 3 };

// Shared memory of one block: the index tile, [a][k], rows padded by one value.
struct TileBuffer {
  int64_t v[kTile][kTile + 1];
};

template <typename IdxT, typename I, int D>
struct TileArgs : GatherOperands<IdxT> {
  OffsetCalculator<4, I, D> rest;  // rest position -> (out, index, self, plan position)
  IntDivider<I> tiles_a;           // tiles along a
  IntDivider<I> tiles_k;           // tiles along k
  I num_tiles;
  I size_a, size_k;
  I stride_a[4], stride_k[4];  // per TileOperand, in elements (kTilePos: plan positions)
  I self_dim_stride;
};

// Origin of tile t: its first a and k, and the rest's offsets.
template <typename I>
struct TileOrigin {
  I a0, k0;
  Offsets<4, I> rest;
};

template <typename IdxT, typename I, int D>
SW_HOST_DEVICE SW_INLINE TileOrigin<I> tile_origin(const TileArgs<IdxT, I, D>& a, I t) {
  const DivMod<I> qa = a.tiles_a.divmod(t);
  const DivMod<I> qk = a.tiles_k.divmod(qa.div);
  return {qa.mod * I(kTile), qk.mod * I(kTile), a.rest.get(qk.div)};
}

// Phase 1 of tile t for one thread: index values into buf.v[a][k]. Positions past the
// tile's edge are not read (their buffer entries are never used).
template <typename IdxT, typename I, int D>
SW_HOST_DEVICE SW_INLINE void tile_load_thread(const TileArgs<IdxT, I, D>& a, I t, I thread,
                                               TileBuffer& buf) {
  const TileOrigin<I> o = tile_origin(a, t);
  const I lane = thread % I(kTile), row = thread / I(kTile);
  const I k = o.k0 + lane;
  if (k >= a.size_k) return;
  const I base = o.rest.v[kTileIndex] + k * a.stride_k[kTileIndex];
  SW_UNROLL
  for (int r = 0; r < kTile / kRows; ++r) {
    const I ai = row + I(r * kRows);
    if (o.a0 + ai < a.size_a)
      buf.v[ai][lane] =
          static_cast<int64_t>(SW_LDG(a.index + (base + (o.a0 + ai) * a.stride_a[kTileIndex])));
  }
}

// Phase 2 of tile t for one thread: check each value, read self, write out.
template <typename E, typename IdxT, typename I, int D>
SW_HOST_DEVICE SW_INLINE void tile_store_thread(const TileArgs<IdxT, I, D>& a, I t, I thread,
                                                const TileBuffer& buf, BadIndex& bad) {
  E* const out = static_cast<E*>(a.out);
  const E* const self = static_cast<const E*>(a.self);
  const TileOrigin<I> o = tile_origin(a, t);
  const I lane = thread % I(kTile), row = thread / I(kTile);
  const I ai = o.a0 + lane;
  if (ai >= a.size_a) return;
  constexpr int kPer = kTile / kRows;
  int64_t v[kPer];
  bool live[kPer];
  SW_UNROLL
  for (int r = 0; r < kPer; ++r) {
    const I ki = row + I(r * kRows);
    live[r] = o.k0 + ki < a.size_k;
    v[r] = live[r] ? buf.v[lane][ki] : 0;
  }
  E val[kPer];
  SW_HOST_ZERO(val);
  SW_UNROLL
  for (int r = 0; r < kPer; ++r) {
    if (!live[r]) continue;
    const I k = o.k0 + row + I(r * kRows);
    if (wrap_index(v[r], a.site.size, a.site.wraps)) {  // a bad v[r] stays as given
      val[r] = SW_LDG(self + (o.rest.v[kTileSelf] + ai * a.stride_a[kTileSelf] +
                              k * a.stride_k[kTileSelf] + I(v[r]) * a.self_dim_stride));
    } else {
      live[r] = false;
      if (!bad.any)
        bad = BadIndex{true, v[r],
                       int64_t(o.rest.v[kTilePos]) + int64_t(ai) * int64_t(a.stride_a[kTilePos]) +
                           int64_t(k) * int64_t(a.stride_k[kTilePos])};
    }
  }
  SW_UNROLL
  for (int r = 0; r < kPer; ++r) {
    if (!live[r]) continue;
    const I k = o.k0 + row + I(r * kRows);
    out[o.rest.v[kTileOut] + ai * a.stride_a[kTileOut] + k * a.stride_k[kTileOut]] = val[r];
  }
}

// ---- host side ---------------------------------------------------------------------------

// Planned dim the tile pairs with dim 0: the one with the index's smallest non-zero stride
// among dims >= 1, or -1 (rank < 2, or the index moves fastest along dim 0 already).
inline int tile_partner(const LoopPlan<3>& l) {
  if (l.rank < 2) return -1;
  int k = -1;
  for (int d = 1; d < l.rank; ++d) {
    const int64_t s = l.strides[kGatherIndex][d];
    if (s != 0 && (k < 0 || s < l.strides[kGatherIndex][k])) k = d;
  }
  return k;
}

// When the tile kernel pays: the index walks across its memory along dim 0 (one sector per
// lane), has a dim whose values share sectors, and both dims fill whole tiles. (Measured on
// the H200, 2026-12-01: the rank-6 benchmark case, 16 x 16 per tile, ran at 0.97x ATen
// tiled and 1.40x with the blocked elems walk; see docs/bench_gather.md.)
inline bool tile_pays(const LoopPlan<3>& l, int index_bytes) {
  const int k = tile_partner(l);
  if (k < 0) return false;
  // A stride-0 index along dim 0 is a broadcast (one address per warp): no tile.
  return l.strides[kGatherIndex][0] * index_bytes >= 32 &&
         l.strides[kGatherIndex][k] * index_bytes < 32 && l.sizes[0] >= kTile &&
         l.sizes[k] >= kTile;
}

// Requires tile_partner(plan.loop) >= 0.
template <typename Runner>
Status run_tile(const GatherArgs& args, const GatherPlan& p, int esize, const ErrorSite& site,
                Runner& runner) {
  const LoopPlan<3>& l = p.loop;
  const int kd = tile_partner(l);
  const LoopPlan<4> pos = with_positions(l);  // operand kTilePos: plan position
  LoopPlan<4> rest;                           // every planned dim but 0 and kd
  rest.rank = 0;
  rest.numel = 1;
  for (int d = 1; d < l.rank; ++d) {
    if (d == kd) continue;
    const int r = rest.rank++;
    rest.sizes[r] = l.sizes[d];
    rest.perm[r] = l.perm[d];
    for (int k = 0; k < 4; ++k) rest.strides[k][r] = pos.strides[k][d];
    rest.numel *= l.sizes[d];
  }
  const int64_t tiles_a = ceil_div(l.sizes[0], kTile), tiles_k = ceil_div(l.sizes[kd], kTile);
  const int64_t num_tiles = tiles_a * tiles_k * rest.numel;
  const int64_t blocks = std::min(num_tiles, kMaxBlocks);
  // Tile coordinates run up to a tile past each edge before the bound checks.
  const bool u32 = l.numel <= kI32Max && num_tiles <= kI32Max && tiles_a * kTile <= kI32Max &&
                   tiles_k * kTile <= kI32Max && fits_u32(l, p.self_dim_size, p.self_dim_stride, 0);
  const bool idx64 = args.index.dtype == DType::kInt64;
  return with_launch_types(esize, idx64, u32, rest.rank, [&](auto et, auto it, auto ot, auto dims) {
    using IdxT = typename decltype(it)::type;
    using I = typename decltype(ot)::type;
    TileArgs<IdxT, I, decltype(dims)::value> a;
    static_cast<GatherOperands<IdxT>&>(a) = gather_operands<IdxT>(args, site);
    a.rest = OffsetCalculator<4, I, decltype(dims)::value>(rest);
    a.tiles_a = IntDivider<I>(static_cast<I>(tiles_a));
    a.tiles_k = IntDivider<I>(static_cast<I>(tiles_k));
    a.num_tiles = static_cast<I>(num_tiles);
    a.size_a = static_cast<I>(l.sizes[0]);
    a.size_k = static_cast<I>(l.sizes[kd]);
    for (int k = 0; k < 4; ++k) {
      a.stride_a[k] = static_cast<I>(pos.strides[k][0]);
      a.stride_k[k] = static_cast<I>(pos.strides[k][kd]);
    }
    a.self_dim_stride = static_cast<I>(p.self_dim_stride);
    runner.template tile<typename decltype(et)::type>(a, static_cast<unsigned>(blocks));
    return Status::kOk;
  });
}

}  // namespace cuda_gather
}  // namespace stridewise
