// Layout planning on the host: turn N operands that share one iteration shape into the
// smallest loop nest that visits the same (offset_0, ..., offset_{N-1}) tuples.
//
// Steps (each keeps every operand's offset for every logical position):
//  1. drop size-1 dims (their stride never contributes);
//  2. order dims so operand 0 (the written operand) is walked in memory order, fastest
//     dim first; ties broken by the next operands' strides. Coalesced writes matter most;
//  3. merge neighbouring dims i (fast) and i+1 (slow) when, for every operand,
//     stride[i+1] == stride[i] * size[i] (this also merges two stride-0 dims);
//  4. decide whether 32-bit offset arithmetic is exact.
// Dims in a LoopPlan are ordered fastest first (dim 0 moves fastest), like ATen's
// TensorIterator, which is the order the offset calculator decomposes a linear index in.
#pragma once

#include <cstdint>

#include "stridewise/view.h"

namespace stridewise {

template <int N>
struct LoopPlan {
  int rank = 0;       // dims after planning; 0 means one element (or empty, see numel)
  int64_t numel = 1;  // product of sizes; 0 when the shape is empty
  int64_t sizes[kMaxRank] = {};
  int64_t strides[N][kMaxRank] = {};  // per operand, in elements
  int perm[kMaxRank] = {};            // perm[d] = original dim of planned dim d before merging
  bool fits_int32 = false;            // numel and every reachable offset (with `extra`) < 2^31
};

// shape/rank: the iteration shape. strides[k]: operand k's strides over that shape.
// extra_extent[k] (may be null): additional offset operand k may reach beyond its strided
// extent (gather's self: (size[dim]-1) * stride[dim], reached through index values).
template <int N>
LoopPlan<N> plan_loop(int rank, const int64_t* shape, const int64_t* const* strides,
                      const int64_t* extra_extent = nullptr);

// p with one more operand, N: each position's place in p's order (its plan position), so a
// reordered walk (block_loop) or a partial one (a kernel's tile) can still name it.
template <int N>
LoopPlan<N + 1> with_positions(const LoopPlan<N>& p) {
  LoopPlan<N + 1> w;
  w.rank = p.rank;
  w.numel = p.numel;
  w.fits_int32 = p.fits_int32;
  int64_t acc = 1;
  for (int d = 0; d < p.rank; ++d) {
    w.sizes[d] = p.sizes[d];
    w.perm[d] = p.perm[d];
    for (int k = 0; k < N; ++k) w.strides[k][d] = p.strides[k][d];
    w.strides[N][d] = acc;
    acc *= p.sizes[d];
  }
  return w;
}

// The same tuples in an order with better locality, for kernels that walk positions in
// order (consecutive positions on one thread block). Operand k with want_bytes[k] > 0 asks for
// runs of that many bytes along its own fastest dim (smallest non-zero stride), elem_bytes[k]
// bytes per element; 0 makes operand k passive (its strides are carried along, e.g. a
// position counter). Operand 0 gets its run on dim 0 (the plan orders dims by operand 0).
// For each other operand whose fastest dim is not dim 0 and packs at least two elements into
// its run, that dim is split into an inner part (a power of two dividing its size, at most
// run / (stride * elem_bytes)) and an outer part, and the inner parts move right behind dim
// 0's inner part: consecutive positions then cover a box of at most max_box positions in which
// each operand's runs are read whole. Returns p itself when no operand gains.
template <int N>
LoopPlan<N> block_loop(const LoopPlan<N>& p, const int64_t* want_bytes, const int64_t* elem_bytes,
                       int64_t max_box);

// The same tuples with dim 0 cut into bands: an inner part (the largest power of two at most
// `band` that divides sizes[0]) stays the fastest dim, the outer part becomes the slowest. A walk
// in this order finishes every position of one band of dim 0 before the next band starts, so an
// operand that dim 0 moves across its memory (a gather reading rows of a transposed self) is read
// one band of its storage at a time, and that band's sectors stay in L2 while the other dims
// revisit them. Returns p itself when the band would be all of dim 0 or a single element.
template <int N>
LoopPlan<N> band_loop(const LoopPlan<N>& p, int64_t band);

// Offset of planned position `linear` (row-major over the planned dims, fastest first) for
// operand k. Reference implementation for tests and the CPU path's slow cases.
template <int N>
int64_t plan_offset(const LoopPlan<N>& p, int k, int64_t linear);

// Offset of logical position `linear` (row-major over the original shape, last dim fastest).
int64_t logical_offset(int rank, const int64_t* shape, const int64_t* strides, int64_t linear);

}  // namespace stridewise
