// CUDA advanced indexing internals (index_k.h), the sorted side: the sorted path (every mean,
// the narrow types' adds, deterministic writes that may meet duplicates) and the sorted fill
// (order-free writes whose index every row shares), their per-thread bodies and host-side
// parameters and the rules that choose them. Host and device compilable, as
// index_k_cuda_impl.h (its elementwise bodies), which this header builds on.
#pragma once

#include <algorithm>
#include <cstdint>
#include <type_traits>

#include "common/segments_launch.h"
#include "index_k/index_k_cuda_impl.h"

namespace stridewise {
namespace cuda_index_k {

// ---- the sorted path ---------------------------------------------------------------------

// The element of `bytes` bytes at src[off], zero-extended into a Vt (little-endian: the element
// in the slot's low bytes, where SegArgs::src_sorted reads it).
template <typename Vt, typename I>
SW_HOST_DEVICE SW_INLINE Vt payload_of(const void* src, I off, int bytes) {
  switch (bytes) {
    case 1:
      return Vt(SW_LDG(static_cast<const uint8_t*>(src) + off));
    case 2:
      return Vt(SW_LDG(static_cast<const uint16_t*>(src) + off));
    case 4:
      return Vt(SW_LDG(static_cast<const uint32_t*>(src) + off));
    default:
      return Vt(SW_LDG(static_cast<const unsigned long long*>(src) + off));
  }
}
// keys: over IndexKPlan::seq (index order), validating as the check pass does: key[q] = the
// terms' offset in self (elements), val[q] = position q's src offset (elements; 0 with one
// value). A stable radix sort by key keeps index order among equal keys. Then the sorted path's
// back half (common/segments.h), shared with scatter: IndexKPlan::row is its lines (self's and
// src's row offsets), a key addresses self at `row offset + key`, a value src at
// `row offset + value` (both strides 1). Per element written: copy stores its last writer in
// index order; add folds self then the writers in index order in the accumulation type and
// rounds once; mean (an add without self) folds from the identity and divides by the count
// (index_k.h; index_k_cpu.cpp's mean has the same order). A run longer than one chunk folds in
// pieces combined in chunk order (common/segments.h): the same result on every run.

// K, Vt: uint64_t / int64_t, or uint32_t / int32_t where every key and src offset fits
// (narrow_keys): half the sort's bytes. `payload` (payload_bytes: 0, or the element's bytes):
// val[q] is position q's source element itself, zero-extended into the slot, so the walk after
// the sort reads the values in order (one line: put_, a full index) instead of gathering them.
template <typename K, typename Vt, typename I, int D>
SW_HOST_DEVICE SW_INLINE void keys_thread(const Params<I, D>& a, K* keys, Vt* vals, int payload,
                                          I block, I thread, I grid, Bad& bad) {
  constexpr I kTile = I(kThreads) * kUnroll;
  for (I base = block * kTile; base < a.numel; base += grid * kTile) {
    SW_UNROLL
    for (int u = 0; u < kUnroll; ++u) {
      const I q = base + I(u * kThreads) + thread;
      if (q >= a.numel) continue;
      const Offsets<kN, I> o = a.calc.get(q);
      I t = 0;
      int j = 0;
      int64_t v = 0;
      if (!terms(a, o, &t, &j, &v)) {
        t = 0;  // never used: the abort word stops the writes
        if (!bad.b.any) bad = Bad{BadIndex{true, v, int64_t(q)}, j};
      }
      keys[q] = K(t);
      vals[q] = a.has_value ? Vt(0)
                : payload   ? payload_of<Vt>(a.other, o.v[kIkOther], payload)
                            : Vt(o.v[kIkOther]);
    }
  }
}

// ---- the sorted fill (order-free writes whose index every row of self shares) -----------
// index_fill's column case: self's rows along the indexed dim, the same index values in every
// row. Written in the index's order, a warp's stores land on 32 random sectors of a row and
// the L2 sees each sector written piecemeal; written in the sorted order of the targets, a
// warp's stores land on neighbouring sectors (H200, 2026-12-04, standalone probe filling 1024
// random of 16384 columns of 8192 rows: float32 467 us in index order, 188 us sorted; bfloat16
// 403 / 120 us; ATen 460 / 413 us). keys_thread (validating) and CUB's sort as the sorted path;
// then thread t writes row t / n_seq at sorted key t % n_seq, kUnroll positions per thread
// with every address formed before any store. Duplicate keys store the same bytes twice.

template <typename I, int D>
struct FillParams {
  OffsetCalculator<1, I, D> row;  // row position -> self offset (elements), over IndexKPlan::row
  IntDivider<I> seq_div;          // n_seq
  I numel;                        // n_row * n_seq
  void* self;
  const void* src;  // the one value element when !has_value
  Abort abort;
  bool has_value;
  Value value;
};

// `keys`: the n_seq sorted term offsets (CUB's output in global memory, or the block's shared
// copy).
template <typename U, typename I, int D, typename K>
SW_HOST_DEVICE SW_INLINE void fill_rows_thread(const FillParams<I, D>& a, const K* keys, I block,
                                               I thread, I grid) {
  U* const dst = static_cast<U*>(a.self);
  const U val = a.has_value ? value_as<U>(a.value) : SW_LDG(static_cast<const U*>(a.src));
  constexpr I kTile = I(kThreads) * kUnroll;
  for (I base = block * kTile; base < a.numel; base += grid * kTile) {
    I off[kUnroll];
    bool live[kUnroll];
    SW_UNROLL
    for (int u = 0; u < kUnroll; ++u) {
      const I i = base + I(u * kThreads) + thread;
      live[u] = i < a.numel;
      if (!live[u]) continue;
      const DivMod<I> rk = a.seq_div.divmod(i);
      off[u] = a.row.get(rk.div).v[0] + I(keys[rk.mod]);
    }
    SW_UNROLL
    for (int u = 0; u < kUnroll; ++u)
      if (live[u]) dst[off[u]] = val;
  }
}

// ---- the block-sorted fill: the same stores, the keys sorted in each block ---------------
// Up to kFillBlockKeys index elements, one launch: every block reads the distinct index
// elements (IndexKPlan::seq) and checks them itself (a bad value: the block reports it and
// writes nothing; every block reads the same values, so none writes, with no pass before and
// no abort word), sorts their terms in shared memory (bitonic, padded to a power of two with the
// largest key), then strides over (row, key) as fill_rows_thread. The grid is one wave of
// resident blocks, so each block sorts once. Phases, the block synchronized between them:
// fill_keys_phase, then bitonic_step for every (k, j), then fill_rows_thread.

// keys[q] = the terms of seq position q for q < n, the pad up to n2; the first bad value in `bad`.
template <typename I, int D>
SW_HOST_DEVICE SW_INLINE void fill_keys_phase(const Params<I, D>& seq, I* keys, int64_t n2,
                                              I thread, I threads, Bad& bad) {
  // The pad sorts last: the largest I (int64_t on the 64-bit path, uint32_t on the other).
  const I pad = I(std::is_signed<I>::value ? ~uint64_t(0) >> 1 : ~uint64_t(0));
  for (int64_t q = thread; q < n2; q += threads) {
    I t = pad;
    int j = 0;
    int64_t v = 0;
    if (q < int64_t(seq.numel) && !terms(seq, seq.calc.get(I(q)), &t, &j, &v)) {
      t = pad;
      if (!bad.b.any) bad = Bad{BadIndex{true, v, q}, j};
    }
    keys[q] = t;
  }
}

// One compare-exchange step (k, j) of an ascending bitonic sort of keys[0, n2).
template <typename I>
SW_HOST_DEVICE SW_INLINE void bitonic_step(I* keys, int64_t n2, int64_t k, int64_t j, I thread,
                                           I threads) {
  for (int64_t i = thread; i < n2; i += threads) {
    const int64_t l = i ^ j;
    if (l <= i) continue;
    const bool up = (i & k) == 0;
    const I x = keys[i], y = keys[l];
    if ((x > y) == up) {
      keys[i] = y;
      keys[l] = x;
    }
  }
}

// ---- host side -------------------------------------------------------------------------

// Lines per thread of the sorted path's back half (1: element by element): 16 / element bytes
// (the one vector width the segment kernels instantiate: with_vec) when the row is one run of
// unit stride in self and src, that width divides its length, every key (the terms) and every
// src offset of a sorted position, and both data pointers are 16-byte aligned.
inline int seg_vec_width(const IndexKArgs& args, const IndexKPlan& plan) {
  const LoopPlan<kN>& r = plan.row;
  const int64_t es = elem_size(args.self.dtype);
  if (args.has_value || args.mode != IndexMode::kSum || r.rank != 1 || es <= 0 || es > 8 ||
      16 % es != 0 || r.strides[kIkWritten][0] != 1 || r.strides[kIkOther][0] != 1)
    return 1;
  const int64_t v = 16 / es;
  bool ok = r.sizes[0] % v == 0 && reinterpret_cast<uintptr_t>(args.self.data) % 16 == 0 &&
            reinterpret_cast<uintptr_t>(args.src.data) % 16 == 0;
  for (int j = 0; j < args.k && ok; ++j) ok = args.term_stride[j] % v == 0;
  for (int d = 0; d < plan.seq.rank && ok; ++d) ok = plan.seq.strides[kIkOther][d] % v == 0;
  return ok ? int(v) : 1;
}

inline bool narrow(DType t) {
  switch (t) {
    case DType::kFloat16:
    case DType::kBFloat16:
    case DType::kInt8:
    case DType::kUInt8:
    case DType::kInt16:
    case DType::kBool:
      return true;
    default:
      return false;
  }
}

inline bool integral(DType t) {
  switch (t) {
    case DType::kBool:
    case DType::kUInt8:
    case DType::kInt8:
    case DType::kInt16:
    case DType::kInt32:
    case DType::kInt64:
      return true;
    default:
      return false;
  }
}

// Which path a call takes where several could (STRIDEWISE_INDEX_K_CUDA_PATH: auto | plain |
// sorted): kAuto, the rules below; kPlain keeps order-free writes off the sorted fills and
// reads through one index tensor on the elementwise walk instead of the gather kernels
// (benchmarks measure what each buys); kSorted sends every floating add that may meet
// duplicates down the sorted path (tests; benchmarks of the rule's boundary).
enum class PathChoice : int { kAuto, kPlain, kSorted };

// The sorted path takes every mean (its count is the run's length), the narrow types' adds
// (accumulated in float32/int32, rounded once per element, never a per-step rounding in the
// storage type), the floating adds over rows long enough to pay for the sort (seg_pays, the
// rule scatter's segment path keeps: `x[i] += v` over rows, where atomics queue on the rows
// that repeat) and the deterministic writes that may meet duplicates (an add of int32/int64 is
// exact in any order and keeps the atomics; an order-free copy of one value stores the same
// bytes in any order).
inline bool sorted_path(const IndexKArgs& a, const IndexKPlan& p,
                        PathChoice choice = PathChoice::kAuto) {
  if (a.desc.role != IndexRole::kWrite) return false;
  if (a.desc.combine == Combine::kMean) return true;
  const bool add = a.desc.combine == Combine::kAdd;
  if (add && narrow(a.self.dtype)) return true;
  if (add && !integral(a.self.dtype) && p.may_collide &&
      (choice == PathChoice::kSorted || cuda_seg::seg_pays(p.seq.numel * p.row.numel, p.row.numel)))
    return true;
  return a.deterministic && p.may_collide && !p.order_free && !(add && integral(a.self.dtype));
}

// The sorted fill (fill_rows_thread) takes an order-free write of one index term whose values
// every row shares (along IndexKPlan::row, where self moves, every index stride is 0), along a
// dim no farther apart in memory than any row dim (sorted targets are neighbours), with keys
// and rows enough to pay for the sort (below those counts the plain kernel measured the same:
// 64 of 16384 columns, 35 us either way).
constexpr int64_t kFillMinKeys = 256;
constexpr int64_t kFillMinRows = 16;
// The block-sorted fill's limit: its keys in shared memory (32 KiB of int64 keys).
constexpr int64_t kFillBlockKeys = 4096;

// Its shape conditions alone (the host emulation runs the body on small cases).
inline bool fill_rows_fits(const IndexKArgs& a, const IndexKPlan& p) {
  if (!p.order_free || a.k != 1 || a.mode != IndexMode::kSum) return false;
  const LoopPlan<kN>& r = p.row;
  for (int d = 0; d < r.rank; ++d)
    if (r.strides[kIkIndex0][d] != 0 || r.strides[kIkWritten][d] < a.term_stride[0]) return false;
  return true;
}

// Up to kFillBlockKeys keys the block-sorted fill takes the call (one launch: below 256 keys,
// where sorting buys nothing, it still saves the validation pass); more keys take CUB's sort.
inline bool fill_block_path(const IndexKArgs& a, const IndexKPlan& p) {
  return fill_rows_fits(a, p) && p.seq.numel <= kFillBlockKeys && p.row.numel >= kFillMinRows;
}

inline bool fill_rows_path(const IndexKArgs& a, const IndexKPlan& p) {
  return fill_rows_fits(a, p) && p.seq.numel > kFillBlockKeys && p.row.numel >= kFillMinRows;
}

// The padded key count of the block-sorted fill (a power of two, at least 1).
inline int64_t fill_block_keys(const IndexKPlan& p) {
  int64_t n2 = 1;
  while (n2 < p.seq.numel) n2 *= 2;
  return n2;
}

template <typename I, int D>
inline FillParams<I, D> make_fill_params(const IndexKArgs& args, const IndexKPlan& plan,
                                         Abort abort) {
  FillParams<I, D> f;
  LoopPlan<1> row;  // plan.row's self strides alone
  row.rank = plan.row.rank;
  row.numel = plan.row.numel;
  row.fits_int32 = plan.row.fits_int32;
  for (int d = 0; d < row.rank; ++d) {
    row.sizes[d] = plan.row.sizes[d];
    row.perm[d] = plan.row.perm[d];
    row.strides[0][d] = plan.row.strides[kIkWritten][d];
  }
  f.row = OffsetCalculator<1, I, D>(row);
  f.seq_div = IntDivider<I>(I(std::max<int64_t>(plan.seq.numel, 1)));
  f.numel = I(plan.row.numel * plan.seq.numel);
  f.self = args.self.data;
  f.src = args.src.data;
  f.abort = abort;
  f.has_value = args.has_value;
  for (int b = 0; b < 16; ++b) f.value.b[b] = args.value[b];
  return f;
}

// Bits the sorted keys span: the largest offset the terms reach.
inline int key_bits(const IndexKArgs& args) {
  int64_t hi = 0;
  if (args.mode == IndexMode::kUnravel) {
    hi = args.target.max_offset();
  } else {
    for (int j = 0; j < args.k; ++j)
      if (args.term_size[j] > 0) hi += (args.term_size[j] - 1) * args.term_stride[j];
  }
  int bits = 1;
  while (bits < 64 && (uint64_t(hi) >> bits) != 0) ++bits;
  return bits;
}

// The payload keys' element bytes (keys_thread), 0 for offsets: an accumulating sorted path of
// one row element per position (put_, an index over every dim) with a source tensor, whose
// element fits the value's slot (4 bytes, 8 when `wide`).
inline int payload_bytes(const IndexKArgs& args, const IndexKPlan& plan, bool wide) {
  const int64_t es = elem_size(args.self.dtype);
  if (!args.desc.accumulates() || args.has_value || plan.row.numel != 1) return 0;
  return es <= (wide ? 8 : 4) && (es == 1 || es == 2 || es == 4 || es == 8) ? int(es) : 0;
}

// The sorted path's keys and values in 32 bits (uint32 keys, int32 src offsets): every key below
// 2^32 and every offset along IndexKPlan::seq within 31 bits. The sorted fill keeps 64 bits.
inline bool narrow_keys(const IndexKArgs& args, const IndexKPlan& plan) {
  return key_bits(args) <= 32 && plan.seq.fits_int32 && plan.seq.numel <= kI32Max;
}

}  // namespace cuda_index_k
}  // namespace stridewise
