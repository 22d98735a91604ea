// CUDA gather internals, shared by gather_cuda.cu (which wraps the per-thread bodies in
// __global__ kernels and launches them) and by core/tests/cuda/test_gather_emulated*.cpp
// (which runs the very same bodies for every block and thread of the grid on the host, so
// the index arithmetic is exercised on machines without a GPU). No __global__ code and no
// CUDA runtime calls here. Design and dispatch table: docs/gather_cuda.md.
//
// Three kernels, driven by plan_gather's LoopPlan (dims fastest first; operands out,
// index, self; self's stride on `dim` is 0 and each index step adds self_dim_stride):
//  - rows:  the fastest planned dim has index stride 0 and unit stride in out and self, so
//           each "row" along it copies one contiguous run of self to one contiguous run of
//           out under a single index value. A group of 1..32 threads loads that value once
//           and moves the run in units of B bytes (B <= 16: 128-bit loads and stores).
//           Also used with one element per row and B < element size when out/self are not
//           aligned to their element size, so no access is ever misaligned.
//  - tile:  the index runs along another dim than out (gather_cuda_tile.h): index tiles are
//           read whole and turned around in shared memory.
//  - elems: every other layout. Each thread takes kUnroll elements and issues all their
//           index loads, then all their self loads, then the stores (no load waits on a
//           store, kUnroll independent loads in flight per thread). The walk is blocked
//           (block_loop): consecutive positions, one thread block's worth, cover a small box
//           in which out, the index and self each use whole sectors along their own fastest
//           dims, so an operand walked across its memory is still read from L1, not L2.
// Offsets are uint32_t when every offset the launch can form fits in 31 bits, else
// int64_t. A bad index value is never used as an address: its element (or row) is skipped
// and reported to the caller of the body (BadIndex), which records it (cuda_errors.h) with
// its position in plan_gather's order.
#pragma once

#include <algorithm>
#include <cstdint>
#include <string>

#include "gather/gather_cuda_tile.h"
#include "gather/gather_cuda_types.h"
#include "stridewise/gather.h"
#include "stridewise/offset_calc.h"

namespace stridewise {
namespace cuda_gather {

template <typename IdxT, typename I, int D>
struct ElemsArgs : GatherOperands<IdxT> {
  OffsetCalculator<4, I, D> calc;  // position -> (out, index, self, plan position)
  I numel;
  I self_dim_stride;
};

// One thread of the elems kernel: block/thread/grid are blockIdx.x, threadIdx.x, gridDim.x.
template <typename E, typename IdxT, typename I, int D>
SW_HOST_DEVICE SW_INLINE void elems_thread(const ElemsArgs<IdxT, I, D>& a, I block, I thread,
                                           I grid, BadIndex& bad) {
  E* const out = static_cast<E*>(a.out);
  const E* const self = static_cast<const E*>(a.self);
  constexpr I kTile = I(kThreads) * kUnroll;
  // base + grid * kTile cannot wrap: numel <= 2^31-1 and grid * kTile <= 2^30.
  for (I base = block * kTile; base < a.numel; base += grid * kTile) {
    I o_out[kUnroll] = {}, o_self[kUnroll] = {};
    int64_t v[kUnroll] = {};
    bool live[kUnroll];
    SW_UNROLL
    for (int u = 0; u < kUnroll; ++u) {  // all index loads first: kUnroll in flight
      const I i = base + I(u * kThreads) + thread;
      live[u] = i < a.numel;
      if (live[u]) {
        const Offsets<4, I> o = a.calc.get(i);  // o.v[3] unused here: compiled away
        o_out[u] = o.v[kGatherOut];
        o_self[u] = o.v[kGatherSelf];
        v[u] = static_cast<int64_t>(SW_LDG(a.index + o.v[kGatherIndex]));
      }
    }
    E val[kUnroll];
    SW_HOST_ZERO(val);
    SW_UNROLL
    for (int u = 0; u < kUnroll; ++u) {  // then every self load, gated by the bound check
      if (!live[u]) continue;
      if (wrap_index(v[u], a.site.size, a.site.wraps)) {  // a bad v[u] stays as given
        val[u] = SW_LDG(self + (o_self[u] + I(v[u]) * a.self_dim_stride));
      } else {
        live[u] = false;
        if (!bad.any)  // rare: recompute the offsets for the plan position
          bad = BadIndex{true, v[u], int64_t(a.calc.get(base + I(u * kThreads) + thread).v[3])};
      }
    }
    SW_UNROLL
    for (int u = 0; u < kUnroll; ++u)
      if (live[u]) out[o_out[u]] = val[u];
  }
}

template <typename IdxT, typename I, int D>
struct RowsArgs : GatherOperands<IdxT> {
  OffsetCalculator<3, I, D> rows;  // row -> (out, index, self); out/self offsets in units
  IntDivider<I> tiles_per_row;
  I num_tiles;
  I row_len;          // units per row
  I self_dim_stride;  // units per index step
  int group_shift;    // log2(threads per row tile), 0..5
  int64_t elems_per_row;
};

// One thread of the rows kernel. A tile is (row, chunk of group * kUnroll units); group g
// of the grid takes tiles g, g + num_groups, ...; its lanes stride the chunk by `group`.
template <typename U, typename IdxT, typename I, int D>
SW_HOST_DEVICE SW_INLINE void rows_thread(const RowsArgs<IdxT, I, D>& a, I block, I thread, I grid,
                                          BadIndex& bad) {
  U* const out = static_cast<U*>(a.out);
  const U* const self = static_cast<const U*>(a.self);
  const I group = I(1) << a.group_shift;
  const I lane = thread & (group - 1);
  const I span = group * kUnroll;  // units one tile covers
  const I num_groups = (grid * kThreads) >> a.group_shift;
  // t + num_groups cannot wrap: num_tiles <= 2^31-1 and num_groups <= 2^28.
  for (I t = (block * kThreads + thread) >> a.group_shift; t < a.num_tiles; t += num_groups) {
    const DivMod<I> rc = a.tiles_per_row.divmod(t);  // (row, chunk within the row)
    const Offsets<3, I> o = a.rows.get(rc.div);
    int64_t v = static_cast<int64_t>(SW_LDG(a.index + o.v[kGatherIndex]));  // broadcast
    if (!wrap_index(v, a.site.size, a.site.wraps)) {
      if (!bad.any && lane == 0 && rc.mod == 0)  // one report per bad row
        bad = BadIndex{true, v, int64_t(rc.div) * a.elems_per_row};
      continue;
    }
    const U* const src = self + (o.v[kGatherSelf] + I(v) * a.self_dim_stride);
    U* const dst = out + o.v[kGatherOut];
    const I first = rc.mod * span + lane;
    U buf[kUnroll];
    SW_HOST_ZERO(buf);
    SW_UNROLL
    for (int u = 0; u < kUnroll; ++u) {
      const I j = first + I(u) * group;
      if (j < a.row_len) buf[u] = SW_LDG(src + j);
    }
    SW_UNROLL
    for (int u = 0; u < kUnroll; ++u) {
      const I j = first + I(u) * group;
      if (j < a.row_len) dst[j] = buf[u];
    }
  }
}

// ---- host side: from a GatherPlan to a launch ------------------------------------------

// The rows kernel's view of a plan: `rows` over the planned dims from `first_dim` on,
// each row `row_len` units of `unit` bytes.
struct RowsWork {
  LoopPlan<3> rows;  // out/self strides in units; index strides in index elements
  int64_t row_len = 0;
  int64_t self_dim_stride = 0;  // units
  int64_t elems_per_row = 0;
  int unit = 1;
};

// first_dim = 1: rows along planned dim 0 (index stride 0, unit out/self stride).
// first_dim = 0: one element per row (misaligned data, unit < element size).
// Requires: unit divides every out/self offset in bytes (the caller's choice of unit).
inline void make_rows(const GatherPlan& p, int esize, int unit, int first_dim, RowsWork* w) {
  const LoopPlan<3>& l = p.loop;
  const int64_t mul = esize > unit ? esize / unit : 1;  // units per element
  const int64_t div = unit > esize ? unit / esize : 1;  // elements per unit
  w->unit = unit;
  w->rows.rank = l.rank - first_dim;
  w->rows.numel = first_dim ? l.numel / l.sizes[0] : l.numel;
  for (int d = first_dim; d < l.rank; ++d) {
    const int r = d - first_dim;
    w->rows.sizes[r] = l.sizes[d];
    w->rows.perm[r] = l.perm[d];
    w->rows.strides[kGatherOut][r] = l.strides[kGatherOut][d] * mul / div;
    w->rows.strides[kGatherIndex][r] = l.strides[kGatherIndex][d];
    w->rows.strides[kGatherSelf][r] = l.strides[kGatherSelf][d] * mul / div;
  }
  w->row_len = (first_dim ? l.sizes[0] : 1) * mul / div;
  w->self_dim_stride = p.self_dim_stride * mul / div;
  w->elems_per_row = first_dim ? l.sizes[0] : 1;
}

// Runner: runner.template rows<U, IdxT, I, D>(args, blocks) and .elems<E, ...>(...) launch
// (or emulate) a grid of `blocks` x kThreads.
template <typename Runner>
Status run_rows(const GatherArgs& args, const GatherPlan& p, const RowsWork& w,
                const ErrorSite& site, Runner& runner) {
  const int64_t want = ceil_div(w.row_len, kUnroll);  // threads that would each move kUnroll
  int shift = 0;
  while ((int64_t(1) << shift) < want && (1 << shift) < kMaxGroup) ++shift;
  const int64_t tiles_per_row = ceil_div(w.row_len, int64_t(kUnroll) << shift);
  const int64_t num_tiles = w.rows.numel * tiles_per_row;
  const int64_t blocks = std::min(ceil_div(num_tiles << shift, kThreads), kMaxBlocks);
  const bool u32 =
      num_tiles <= kI32Max && fits_u32(w.rows, p.self_dim_size, w.self_dim_stride, w.row_len - 1);
  const bool idx64 = args.index.dtype == DType::kInt64;
  return with_launch_types(
      w.unit, idx64, u32, w.rows.rank, [&](auto ut, auto it, auto ot, auto dims) {
        using IdxT = typename decltype(it)::type;
        using I = typename decltype(ot)::type;
        RowsArgs<IdxT, I, decltype(dims)::value> a;
        static_cast<GatherOperands<IdxT>&>(a) = gather_operands<IdxT>(args, site);
        a.rows = OffsetCalculator<3, I, decltype(dims)::value>(w.rows);
        a.tiles_per_row = IntDivider<I>(static_cast<I>(tiles_per_row));
        a.num_tiles = static_cast<I>(num_tiles);
        a.row_len = static_cast<I>(w.row_len);
        a.self_dim_stride = static_cast<I>(w.self_dim_stride);
        a.group_shift = shift;
        a.elems_per_row = w.elems_per_row;
        runner.template rows<typename decltype(ut)::type>(a, static_cast<unsigned>(blocks));
        return Status::kOk;
      });
}

constexpr int64_t kSectorBytes = 32;  // DRAM and L2 move 32-byte sectors

// The band of planned dim 0 the elems walk finishes before it starts the next (band_loop), or
// 0. Where self is read across its memory along dim 0 (index stride 0 there, self's stride a
// sector or more) while an index step moves within a sector, each element of dim 0 reads its
// own sector, and the neighbours of that sector are needed again only when another index value
// lands there: rows of a transposed self (index_select(x.t(), 0, i), x.t()[i]). In plan order
// those revisits come after all of dim 0 has gone by (the whole self is in flight: a miss in
// L2 each time); banded, the walk reads one band of self's storage at a time and they hit in
// L2. The band is one warp's 128-byte store of out per row.
inline int64_t elems_band(const GatherPlan& p, int esize) {
  const LoopPlan<3>& l = p.loop;
  if (l.rank < 2 || l.strides[kGatherIndex][0] != 0) return 0;
  const int64_t across = l.strides[kGatherSelf][0] * esize, step = p.self_dim_stride * esize;
  if (across < kSectorBytes || step <= 0 || step >= kSectorBytes) return 0;
  return int64_t(kTile) * 4 / esize;
}

// The elems kernel's walk: plan order with a plan-position operand; banded (elems_band) under
// kAuto, then blocked for locality unless kPlain (kElems: blocked, never banded: the walk
// before the band, for benchmarks of what it buys).
inline LoopPlan<4> elems_walk(const GatherPlan& p, int esize, int index_bytes, KernelChoice c) {
  LoopPlan<4> w = with_positions(p.loop);
  if (c == KernelChoice::kPlain) return w;
  const int64_t band = c == KernelChoice::kAuto ? elems_band(p, esize) : 0;
  if (band) w = band_loop(w, band);
  // out: a warp-wide run (128 bytes, at most 32 elements); index and self: one 32-byte sector.
  const int64_t want[4] = {int64_t(kTile) * 4, kSectorBytes, kSectorBytes, 0};
  const int64_t bytes[4] = {esize, index_bytes, esize, 1};
  return block_loop<4>(w, want, bytes, int64_t(kThreads) * kUnroll);
}

template <typename Runner>
Status run_elems(const GatherArgs& args, const GatherPlan& p, int esize, const ErrorSite& site,
                 Runner& runner, KernelChoice choice) {
  const LoopPlan<4> w = elems_walk(p, esize, elem_size(args.index.dtype), choice);
  const int64_t blocks = std::min(ceil_div(w.numel, int64_t(kThreads) * kUnroll), kMaxBlocks);
  // Blocking only reorders the plan's offsets, so the plan's bound holds for the walk.
  const bool u32 = w.numel <= kI32Max && fits_u32(p.loop, p.self_dim_size, p.self_dim_stride, 0);
  const bool idx64 = args.index.dtype == DType::kInt64;
  return with_launch_types(esize, idx64, u32, w.rank, [&](auto et, auto it, auto ot, auto dims) {
    using IdxT = typename decltype(it)::type;
    using I = typename decltype(ot)::type;
    ElemsArgs<IdxT, I, decltype(dims)::value> a;
    static_cast<GatherOperands<IdxT>&>(a) = gather_operands<IdxT>(args, site);
    a.calc = OffsetCalculator<4, I, decltype(dims)::value>(w);
    a.numel = static_cast<I>(w.numel);
    a.self_dim_stride = static_cast<I>(p.self_dim_stride);
    runner.template elems<typename decltype(et)::type>(a, static_cast<unsigned>(blocks));
    return Status::kOk;
  });
}

// Picks the kernel and its unit for a validated, non-empty plan and hands it to `runner`.
// `choice` other than kAuto forces a kernel where the layout allows it (benchmarks, tests;
// STRIDEWISE_GATHER_CUDA_KERNEL): misaligned data always takes the rows kernel's small units.
template <typename Runner>
Status run_gather(const GatherArgs& args, const GatherPlan& plan, const ErrorSite& site,
                  Runner& runner, std::string* why, KernelChoice choice = KernelChoice::kAuto) {
  const LoopPlan<3>& l = plan.loop;
  const int esize = elem_size(args.out.dtype);
  const int isize = elem_size(args.index.dtype);
  if (addr(args.index.data) % static_cast<uint64_t>(isize) != 0) {
    *why = "gather: index data pointer is not aligned to its element size";
    return Status::kUnsupported;
  }
  const uint64_t e = static_cast<uint64_t>(esize);
  const uint64_t data_bits = addr(args.out.data) | addr(args.self.data);
  const bool rows_run = l.rank >= 1 && l.strides[kGatherIndex][0] == 0 &&
                        l.strides[kGatherOut][0] == 1 && l.strides[kGatherSelf][0] == 1;
  Status st;
  if (rows_run && choice == KernelChoice::kAuto) {
    // Unit: divides the row's bytes, every other out/self stride in bytes, the bytes one
    // index step moves and both base addresses, so every unit access is aligned. (OR-ing
    // keeps the lowest set bit of all of them.) Same conditions as pick_gather_vec, which
    // this subsumes: it also yields units smaller than an element for misaligned data.
    uint64_t bits = data_bits | static_cast<uint64_t>(l.sizes[0]) * e |
                    static_cast<uint64_t>(plan.self_dim_stride) * e;
    for (int d = 1; d < l.rank; ++d)
      bits |= static_cast<uint64_t>(l.strides[kGatherOut][d] | l.strides[kGatherSelf][d]) * e;
    RowsWork w;
    make_rows(plan, esize, pow2_unit(bits), /*first_dim=*/1, &w);
    st = run_rows(args, plan, w, site, runner);
  } else if (data_bits % e != 0) {
    RowsWork w;  // misaligned elements: each copied as esize/unit smaller, aligned units
    make_rows(plan, esize, pow2_unit(data_bits | e), /*first_dim=*/0, &w);
    st = run_rows(args, plan, w, site, runner);
  } else if (choice == KernelChoice::kTile ? tile_partner(l) >= 0
                                           : choice == KernelChoice::kAuto && tile_pays(l, isize)) {
    st = run_tile(args, plan, esize, site, runner);
  } else {
    st = run_elems(args, plan, esize, site, runner, choice);
  }
  if (st != Status::kOk) *why = "gather: element size " + std::to_string(esize) + " unsupported";
  return st;
}

}  // namespace cuda_gather
}  // namespace stridewise
