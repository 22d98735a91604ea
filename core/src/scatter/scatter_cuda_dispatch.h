// From a ScatterPlan to the CUDA scatter's launch sequence (host side; shared by
// scatter_cuda.cu and the host emulation test, which passes a Runner that runs the bodies of
// scatter_cuda_impl.h on the host). Sequence, every step after the first gated by the call's
// abort word:
//  1. validate (ScatterPlan::index_elems: the index's distinct elements): records a bad value,
//     raises the word;
//  2. self -> out when not in place (ScatterPlan::copy), per unit;
//  3. copy combine: put_elems (one thread per position; the value form in deterministic mode
//     too), or deterministic: zero -> claim -> claim_final over a word per out element
//     (scatter_cuda_claim.h; put_lines where the claim's rule does not hold);
//     accumulating combines without a workspace: acc_elems / acc_lines straight into out;
//     with one (float16/bfloat16, mean, include_self = false): ws_init -> acc_elems /
//     acc_lines into the workspace -> ws_final into out;
//     or, with a shared index (scatter_cuda_sorted.h, sort_shape's rule): sort_keys -> sort
//     -> the sorted path's back half (common/segments_launch.h: seg_put, or seg_acc ->
//     seg_fix), straight into out;
//     or, accumulating with an index per element (scatter_cuda_tile.h, tile_shape's rule):
//     one tile kernel, accumulators in shared memory, straight into out;
//     or, accumulating into short out columns (scatter_cuda_bins.h, bins_shape's rule, tried
//     before the tile path): one bins kernel, whole lines straight into out, or chunks of
//     lines flushed by atomics into out or the workspace (ws_init -> bins -> ws_final).
// The workspace: an accumulator of AccOf<T> per out element, then (mean or include_self =
// false) an int32 count per out element, each part 256-byte aligned. Both are dense over
// out's shape with out's dims ordered by out's strides (largest first): out's memory order,
// so ws_init/ws_final walk both in step. The segment path needs neither: its workspace is two
// key arrays, two position arrays (line_len each, 4 or 8 bytes), CUB's temporary storage
// (the runner's sort_temp_bytes: CUB's host-side query) and, for accumulating combines, the
// carry (2 x lines AccOf<T> per chunk), each part 256-byte aligned. The tile path needs none.
// Helpers (type dispatch, ws_layout, grid sizes): scatter_cuda_launch.h.
#pragma once

#include <algorithm>
#include <cstdint>
#include <string>

#include "scatter/scatter_cuda_bins.h"
#include "scatter/scatter_cuda_claim.h"
#include "scatter/scatter_cuda_launch.h"
#include "scatter/scatter_cuda_rows.h"
#include "scatter/scatter_cuda_sorted.h"
#include "scatter/scatter_cuda_tile.h"
#include "stridewise/layout.h"
#include "stridewise/scatter.h"

namespace stridewise {
namespace cuda_scatter {

template <typename Runner>
struct Launcher {
  const ScatterArgs& args;
  const ScatterPlan& plan;
  const ScatterSite& site;
  const Abort& abort;
  Runner& runner;
  bool idx64 = args.index.dtype == DType::kInt64;
  uint8_t* shadow = nullptr;  // validation writes it, the bins path reads it (WsLayout)

  Status validate() {
    const LoopPlan<1>& l = plan.index_elems;
    return with_offsets(Buckets{}, l.fits_int32, l.rank, [&](auto it, auto dims) {
      using I = typename decltype(it)::type;
      constexpr int D = decltype(dims)::value;
      ValidateArgs<I, D> v{args.index.data,         idx64, OffsetCalculator<1, I, D>(l),
                           static_cast<I>(l.numel), site,  abort};
      v.shadow = shadow;
      runner.template validate<I, D>(v, grid_for(ceil_div(l.numel, kValidateUnroll)));
      return Status::kOk;
    });
  }

  Status copy(int unit, int units) {
    const LoopPlan<2>& l = plan.copy;
    return with_unit(unit, [&](auto ut) {
      return with_offsets(Buckets{}, l.fits_int32 && units == 1, l.rank, [&](auto it, auto dims) {
        using I = typename decltype(it)::type;
        constexpr int D = decltype(dims)::value;
        CopyArgs<I, D> c{args.out.data,           args.self.data, OffsetCalculator<2, I, D>(l),
                         static_cast<I>(l.numel), units,          abort};
        runner.template copy<typename decltype(ut)::type, I, D>(c, grid_for(l.numel));
        return Status::kOk;
      });
    });
  }

  Status put(int unit, int units) {
    // The value form writes the same bits from every writer: deterministic in any order.
    const bool lines = args.deterministic && !args.has_value;
    const LoopPlan<3>& l = lines ? plan.lines : plan.elems;
    const bool u32 = l.fits_int32 && units == 1 && plan.line_len <= kI32Max;
    return with_unit(unit, [&](auto ut) {
      return with_offsets(Buckets{}, u32, l.rank, [&](auto it, auto dims) {
        using I = typename decltype(it)::type;
        constexpr int D = decltype(dims)::value;
        PutArgs<I, D> p{};
        static_cast<Operands&>(p) = operands_of(args, args.out.data);
        p.calc = OffsetCalculator<3, I, D>(l);
        p.numel = static_cast<I>(l.numel);
        p.out_dim_stride = static_cast<I>(plan.out_dim_stride);
        p.size = plan.out_dim_size;
        p.units = units;
        p.line_len = static_cast<I>(plan.line_len);
        p.index_dim_stride = static_cast<I>(plan.index_dim_stride);
        p.src_dim_stride = static_cast<I>(plan.src_dim_stride);
        p.abort = abort;
        using U = typename decltype(ut)::type;
        if (lines)
          runner.template put_lines<U, I, D>(p, grid_for(l.numel));
        else
          runner.template put_elems<U, I, D>(p, grid_for(l.numel));
        return Status::kOk;
      });
    });
  }

  // The scatter step of an accumulating combine into `target` (out, or the accumulator),
  // planned by `l` (operand 0 = target) with `tds` target elements per index unit.
  template <typename T>
  Status accumulate(const LoopPlan<3>& planned, bool lines, void* target, int32_t* count,
                    int64_t tds) {
    const int tbytes =
        target == args.out.data ? elem_size(args.out.dtype) : acc_bytes(args.out.dtype);
    const LoopPlan<3> l =
        lines ? planned : interleave_target(planned, static_cast<int>(plan.dim), 128 / tbytes);
    const bool u32 = l.fits_int32 && plan.line_len <= kI32Max;
    return with_offsets(Buckets{}, u32, l.rank, [&](auto it, auto dims) {
      using I = typename decltype(it)::type;
      constexpr int D = decltype(dims)::value;
      AccArgs<I, D> p{};
      static_cast<Operands&>(p) = operands_of(args, target);
      p.count = count;
      p.calc = OffsetCalculator<3, I, D>(l);
      p.numel = static_cast<I>(l.numel);
      p.target_dim_stride = static_cast<I>(tds);
      p.size = plan.out_dim_size;
      p.line_len = static_cast<I>(plan.line_len);
      p.index_dim_stride = static_cast<I>(plan.index_dim_stride);
      p.src_dim_stride = static_cast<I>(plan.src_dim_stride);
      p.abort = abort;
      if (lines)
        runner.template acc_lines<T, I, D>(p, grid_for(l.numel));
      else
        runner.template acc_elems<T, I, D>(p, grid_for(l.numel));
      return Status::kOk;
    });
  }

  template <typename T>
  Status ws_pass(const LoopPlan<2>& l, void* acc, int32_t* count, bool final_pass) {
    return with_offsets(Buckets{}, l.fits_int32, l.rank, [&](auto it, auto dims) {
      using I = typename decltype(it)::type;
      constexpr int D = decltype(dims)::value;
      WsArgs<I, D> w{args.out.data,
                     acc,
                     count,
                     OffsetCalculator<2, I, D>(l),
                     static_cast<I>(l.numel),
                     args.desc.combine,
                     args.desc.include_self,
                     abort};
      if (final_pass)
        runner.template ws_final<T, I, D>(w, grid_for(l.numel));
      else
        runner.template ws_init<T, I, D>(w, grid_for(l.numel));
      return Status::kOk;
    });
  }

  // The segment path (scatter_cuda_sorted.h, then common/segments_launch.h) straight into out.
  Status sorted(const WsLayout& w, void* workspace, int unit, int units) {
    const SortShape& s = w.sort;
    char* const base = static_cast<char*>(workspace);
    const KeysArgs k{args.index.data,
                     idx64,
                     plan.index_dim_stride,
                     s.n,
                     base + w.keys_at[0],
                     base + w.vals_at[0],
                     s.wide,
                     abort};
    runner.sort_keys(k, grid_for(s.n));
    SortArgs sa{base + w.temp_at,
                static_cast<size_t>(w.temp_bytes),
                {base + w.keys_at[0], base + w.keys_at[1]},
                {base + w.vals_at[0], base + w.vals_at[1]},
                s};
    const int sel = runner.sort(sa);
    if (sel < 0) return Status::kDeviceError;
    const LoopPlan<3>& l = plan.lines;
    const bool acc = args.desc.accumulates();
    SegJob j;
    j.ops = operands_of(args, args.out.data);
    j.dtype = args.out.dtype;
    j.unit = unit;
    j.units = units;
    j.lines = l;
    j.u32 = l.fits_int32 && units == 1 && plan.line_len <= kI32Max;
    j.out_dim_stride = plan.out_dim_stride;
    j.src_dim_stride = plan.src_dim_stride;
    j.size = plan.out_dim_size;
    j.keys = sa.keys[sel];
    j.vals = sa.vals[sel];
    j.wide = s.wide;
    j.n = s.n;
    j.carry = acc ? base + w.carry_at : nullptr;
    j.v = seg_vec(acc ? elem_size(args.out.dtype) : unit * units, units);
    j.abort = abort;
    return runner.segments(j);
  }

  // Fast-mode copy through a shared index whose lines are one aligned run (seg_vec > 1):
  // rows_put_thread, with no sort. v: seg_vec's.
  Status rows_put(int v) {
    const LoopPlan<3>& l = plan.lines;
    const bool u32 = l.fits_int32 && plan.line_len <= kI32Max;
    return with_offsets(Buckets{}, u32, l.rank, [&](auto it, auto dims) {
      using I = typename decltype(it)::type;
      constexpr int D = decltype(dims)::value;
      // groups: threads per row
      SegArgs<I, D> p = seg_args<I, D>(ceil_div(ceil_div(l.numel, v), kRowsUnroll), kThreads);
      p.n = plan.line_len;
      const unsigned blocks = static_cast<unsigned>(std::max<int64_t>(
          1, std::min(ceil_div(p.n * p.tiles, kThreads / p.tile_threads), kMaxBlocks)));
      return with_unit(elem_size(args.out.dtype), [&](auto ut) {
        using U = typename decltype(ut)::type;
        return with_vec<sizeof(U)>(v, [&](auto vv) {
          constexpr int V = decltype(vv)::value;
          if constexpr (V == 1) {
            return Status::kUnsupported;  // never: the caller checked v > 1
          } else {
            runner.template rows_put<U, V, I, D>(p, plan.index_dim_stride, blocks);
            return Status::kOk;
          }
        });
      });
    });
  }

  // rows_put's SegArgs: the operands, the lines' walk, the strides along dim, the abort word,
  // and `groups` threads per row in tiles of tile_threads (the power of two that covers them,
  // at most max_tile).
  template <typename I, int D>
  SegArgs<I, D> seg_args(int64_t groups, int64_t max_tile) const {
    const LoopPlan<3>& l = plan.lines;
    SegArgs<I, D> p{};
    static_cast<Operands&>(p) = operands_of(args, args.out.data);
    p.calc = OffsetCalculator<3, I, D>(l);
    p.lines = l.numel;
    p.tile_threads = 1;
    while (p.tile_threads < groups && p.tile_threads < max_tile) p.tile_threads *= 2;
    p.tiles = ceil_div(groups, p.tile_threads);
    p.out_dim_stride = static_cast<I>(plan.out_dim_stride);
    p.src_dim_stride = static_cast<I>(plan.src_dim_stride);
    p.size = plan.out_dim_size;
    p.abort = abort;
    return p;
  }

  // V for the segment kernels (elements of `bytes` per thread): 16 / bytes when the lines are
  // one run of consecutive elements in out and src (index stride 0: the index is shared),
  // every vector access is 16-byte aligned and the lines divide into vectors; else 1.
  int seg_vec(int bytes, int units) const {
    const LoopPlan<3>& l = plan.lines;
    if (units != 1 || bytes > 8 || 16 % bytes != 0 || l.rank != 1) return 1;
    const int64_t v = 16 / bytes;
    const bool src = !args.has_value;
    if (l.strides[kScatterOut][0] != 1 || (src && l.strides[kScatterSrc][0] != 1)) return 1;
    if (l.numel % v != 0 || plan.out_dim_stride % v != 0 || (src && plan.src_dim_stride % v != 0))
      return 1;
    if (addr(args.out.data) % 16 != 0 || (src && addr(args.src.data) % 16 != 0)) return 1;
    return static_cast<int>(v);
  }

  // The tile path (scatter_cuda_tile.h) straight into out.
  Status tile(const TileShape& ts) {
    const LoopPlan<3>& l = plan.lines;
    const bool u32 = l.fits_int32 && plan.line_len <= kI32Max;
    const int64_t tiles = ceil_div(l.numel, ts.tile);
    const unsigned blocks =
        static_cast<unsigned>(std::max<int64_t>(1, std::min(tiles, kMaxBlocks)));
    return with_type(args.out.dtype, [&](auto tt) {
      using T = typename decltype(tt)::type;
      return with_offsets(Buckets{}, u32, l.rank, [&](auto it, auto dims) {
        using I = typename decltype(it)::type;
        constexpr int D = decltype(dims)::value;
        TileArgs<I, D> p{};
        static_cast<Operands&>(p) = operands_of(args, args.out.data);
        p.counts = ts.counts;
        p.calc = OffsetCalculator<3, I, D>(l);
        p.lines = l.numel;
        p.tile = ts.tile;
        p.log2_tile = ts.log2_tile;
        p.n = plan.out_dim_size;
        p.line_len = plan.line_len;
        p.out_dim_stride = static_cast<I>(plan.out_dim_stride);
        p.index_dim_stride = static_cast<I>(plan.index_dim_stride);
        p.src_dim_stride = static_cast<I>(plan.src_dim_stride);
        p.abort = abort;
        runner.template tile<T, I, D>(p, tiles, blocks, ts.smem_bytes);
        return Status::kOk;
      });
    });
  }

  // The bins path (scatter_cuda_bins.h) into `target` over the lines plan `l` (operand 0 =
  // target), `tds` target elements per index unit.
  template <typename T>
  Status bins(const BinsShape& bs, const LoopPlan<3>& l, void* target, int32_t* count,
              int64_t tds) {
    const bool u32 = l.fits_int32 && plan.line_len <= kI32Max;
    const int64_t groups = bs.threads / bs.group;
    const unsigned blocks = static_cast<unsigned>(std::max<int64_t>(
        1, std::min(ceil_div(ceil_div(l.numel, bs.pack) * bs.chunks, groups), kMaxBlocks)));
    return with_offsets(Buckets{}, u32, l.rank, [&](auto it, auto dims) {
      using I = typename decltype(it)::type;
      constexpr int D = decltype(dims)::value;
      BinsArgs<I, D> p{};
      static_cast<Operands&>(p) = operands_of(args, target);
      p.count = count;
      p.calc = OffsetCalculator<3, I, D>(l);
      p.lines = l.numel;
      p.line_len = plan.line_len;
      p.chunk = bs.chunk;
      p.chunks = bs.chunks;
      p.pack = bs.pack;
      p.n = plan.out_dim_size;
      p.target_dim_stride = static_cast<I>(tds);
      p.index_dim_stride = static_cast<I>(plan.index_dim_stride);
      p.src_dim_stride = static_cast<I>(plan.src_dim_stride);
      p.group = bs.group;
      p.slab_bytes = bs.slab_bytes;
      p.counts = bs.counts;
      p.ordered = bs.ordered;
      p.split = bs.split;
      p.lines_fastest = tds != 1 && bs.pack > 1;
      p.shadow = shadow;
      p.abort = abort;
      runner.template bins<T, I, D>(p, blocks, bs.threads, bs.smem_bytes);
      return Status::kOk;
    });
  }

  // The accumulating combine: straight into out, or (ws_layout's workspace) ws_init, the
  // scatter step into the workspace, ws_final. The scatter step is the atomics or lines
  // kernel, or the bins path when `bs` is given (a whole line writes out itself: no workspace).
  template <typename T>
  Status combine(void* workspace, const BinsShape* bs = nullptr) {
    // complex128 multiply has no 16-byte atomic here: its lines never race (no atomics).
    const bool lines = bs || args.deterministic ||
                       (std::is_same<T, Cx<double>>::value && args.desc.combine == Combine::kMul);
    const WsLayout w = bs && !bs->split ? WsLayout{} : ws_layout(args);
    auto step = [&](const LoopPlan<3>& l, void* target, int32_t* count, int64_t tds) {
      return bs ? bins<T>(*bs, l, target, count, tds) : accumulate<T>(l, lines, target, count, tds);
    };
    if (!w.needed)
      return step(lines ? plan.lines : plan.elems, args.out.data, nullptr, plan.out_dim_stride);
    const int r = args.out.rank;
    int64_t wst[kMaxRank] = {};
    ws_strides(args.out, wst);
    char* const base = static_cast<char*>(workspace);
    int32_t* const count = w.counts ? reinterpret_cast<int32_t*>(base + w.count_at) : nullptr;
    const int64_t* init_strides[2] = {args.out.strides, wst};
    const LoopPlan<2> whole = plan_loop<2>(r, args.out.sizes, init_strides);
    Status st = ws_pass<T>(whole, base, count, false);
    if (st != Status::kOk) return st;
    st = step(ws_scatter_plan(args, plan, wst, lines), base, count, r > 0 ? wst[plan.dim] : 0);
    if (st != Status::kOk) return st;
    return ws_pass<T>(whole, base, count, true);
  }
};

// The call's bins and tile shapes (the bins path is tried first).
inline BinsShape call_bins(const ScatterArgs& a, const ScatterPlan& p, PathChoice choice) {
  return bins_shape(a, p, choice, acc_bytes(a.out.dtype));
}

inline TileShape call_tile(const ScatterArgs& a, const ScatterPlan& p, PathChoice choice) {
  return tile_shape(a, p, choice, acc_bytes(a.out.dtype));
}

// The call's workspace layout (the runner answers CUB's size query; negative: it failed).
// The tile path needs none.
template <typename Runner>
WsLayout call_layout(const ScatterArgs& a, const ScatterPlan& p, PathChoice choice, Runner& runner,
                     int64_t* sort_temp = nullptr) {
  const SortShape s = sort_shape(a, p, choice);
  if (sort_temp) *sort_temp = 0;
  if (!s.use) {
    const BinsShape b = call_bins(a, p, choice);
    if (b.use) return bins_layout(a, p, b);
    if (call_tile(a, p, choice).use) return WsLayout{};
    if (claim_use(a, p, choice, elem_size(a.out.dtype))) return claim_layout(a);
  }
  const int64_t t = s.use ? runner.sort_temp_bytes(s) : 0;
  if (sort_temp) *sort_temp = t;
  return ws_layout(a, s, t);
}

// The whole call for a plan of plan_scatter(args): launches through `runner`. On failure
// *why says what; nothing has been launched then (but for a failing sort: kDeviceError).
template <typename Runner>
Status run_scatter(const ScatterArgs& args, const ScatterPlan& plan, void* workspace,
                   size_t workspace_bytes, const ScatterSite& site, const Abort& abort,
                   Runner& runner, std::string* why, PathChoice choice = PathChoice::kAuto) {
  const char* fn = "scatter_cuda: ";
  const int esize = elem_size(args.out.dtype);
  const bool accumulates = args.desc.accumulates();
  if (addr(args.index.data) % static_cast<uint64_t>(elem_size(args.index.dtype)) != 0) {
    *why = std::string(fn) + "index data pointer is not aligned to its element size";
    return Status::kUnsupported;
  }
  if (accumulates && !scatter_supports(args.out.dtype, args.desc.combine)) {
    *why = std::string(fn) + combine_name(args.desc.combine) + " is not implemented for " +
           dtype_name(args.out.dtype);
    return Status::kUnsupported;
  }
  const bool cx = args.out.dtype == DType::kComplex64 || args.out.dtype == DType::kComplex128;
  if (cx && args.cx_product == ComplexProduct::kFma && args.desc.combine == Combine::kMul) {
    *why = std::string(fn) + "the fused complex product is CPU only (scatter.h)";
    return Status::kUnsupported;
  }
  if (cx && args.desc.combine == Combine::kMean) {
    *why = std::string(fn) + "complex mean is CPU only (scatter.h)";
    return Status::kUnsupported;
  }
  // Copies move units that divide every base address (misaligned data: smaller units).
  uint64_t bits = addr(args.out.data) | addr(args.self.data) | static_cast<uint64_t>(esize);
  if (!args.has_value) bits |= addr(args.src.data);
  const int unit = std::min(pow2_unit(bits), esize);
  if (accumulates && unit < esize) {
    *why = std::string(fn) + combine_name(args.desc.combine) +
           " needs out, self and src aligned to their element size";
    return Status::kUnsupported;
  }
  int64_t sort_temp = 0;
  const WsLayout w = call_layout(args, plan, choice, runner, &sort_temp);
  if (sort_temp < 0) {
    *why = std::string(fn) + "cub::DeviceRadixSort could not size its temporary storage";
    return Status::kDeviceError;
  }
  if (w.needed && (workspace_bytes < static_cast<size_t>(w.total) ||
                   (w.total > 0 && (workspace == nullptr || addr(workspace) % 16 != 0)))) {
    *why = std::string(fn) + "needs a 16-byte aligned workspace of " + std::to_string(w.total) +
           " bytes (scatter_cuda_workspace_bytes), got " + std::to_string(workspace_bytes);
    return Status::kInvalidArgument;
  }

  Launcher<Runner> L{args, plan, site, abort, runner};
  if (w.shadow_bytes > 0) L.shadow = static_cast<uint8_t*>(workspace) + w.shadow_at;
  Status st = Status::kOk;
  if (plan.elems.numel > 0) st = L.validate();
  if (st == Status::kOk && !plan.in_place && plan.copy.numel > 0) st = L.copy(unit, esize / unit);
  if (st != Status::kOk || plan.elems.numel == 0) return st;
  if (w.sorted) {
    st = L.sorted(w, workspace, unit, esize / unit);
    if (st == Status::kDeviceError) *why = std::string(fn) + "cub::DeviceRadixSort failed";
    if (st == Status::kUnsupported) *why = std::string(fn) + "unsupported element type";
    return st;
  }
  if (!accumulates) {
    // deterministic copies: a shared index took the segment path above, an index per element
    // claims its targets (scatter_cuda_claim.h); kNever ("plain") keeps put_elems / put_lines.
    if (claim_use(args, plan, choice, unit)) return run_claim(args, plan, abort, runner, workspace);
    const int v = choice != PathChoice::kNever && index_shared(args) ? L.seg_vec(esize, 1) : 1;
    if (unit == esize && v > 1) return L.rows_put(v);
    return L.put(unit, esize / unit);
  }
  const BinsShape bs = call_bins(args, plan, choice);
  if (bs.use) {
    st = with_type(args.out.dtype, [&](auto tt) {
      return L.template combine<typename decltype(tt)::type>(workspace, &bs);
    });
    if (st != Status::kOk) *why = std::string(fn) + "unsupported element type";
    return st;
  }
  const TileShape ts = call_tile(args, plan, choice);
  if (ts.use) {
    st = L.tile(ts);
    if (st != Status::kOk) *why = std::string(fn) + "unsupported element type";
    return st;
  }
  st = with_type(args.out.dtype, [&](auto tt) {
    return L.template combine<typename decltype(tt)::type>(workspace);
  });
  if (st != Status::kOk) *why = std::string(fn) + "unsupported element type";
  return st;
}

}  // namespace cuda_scatter
}  // namespace stridewise
