// CUDA advanced indexing internals (index_k.h): the per-thread bodies, host and device
// compilable (no __global__ code, no runtime calls), so a host emulation can run them.
//
// One elementwise walk over plan_index_k's LoopPlan (operands: written, other, index_0..3),
// kUnroll positions per thread with every index load issued before any data load. A
// position's self address is its restrided offset plus the k terms:
//  - kSum: v_j = index_j[pos] in [-size_j, size_j), wrapped (IndexedOpDesc::wraps; else
//    [0, size_j)); term += v_j * stride_j;
//  - kUnravel: v = index_0[pos] in [-numel, numel), wrapped, unravelled over target's dims by
//    the shared OffsetCalculator (logical order, merged dims only).
// Copies move units of U bytes (an element, or a vector of them: IndexKPlan::vec); adds of
// float32/64, complex and int32/64 run per element with atomics on self. Adds of the narrow
// types (float16, bfloat16: float32 accumulation, rounded once; int8/16, uint8, bool), every
// mean and the deterministic writes take the sorted path below. Bad values are never addresses:
// reads skip and record them; writes run after a validation pass that raises the call's abort word,
// which every write kernel checks first (the scatter family's rule: a call that meets a bad value
// writes nothing).
#pragma once

#include <cstdint>

#include "gather_cuda_common.h"
#include "scatter_cuda_types.h"
#include "stridewise/index_k.h"
#include "stridewise/offset_calc.h"

namespace stridewise {
namespace cuda_index_k {

using cuda_gather::BadIndex;
using cuda_gather::kThreads;
using cuda_gather::kUnroll;
constexpr int kK = kMaxIndexTerms;
constexpr int kN = kIkOperands;

struct AbortWord {
  int64_t* word = nullptr;
  int64_t gen = 0;
};

SW_HOST_DEVICE SW_INLINE bool aborted(const AbortWord& a) {
  return *static_cast<const volatile int64_t*>(a.word) == a.gen;
}

template <typename I, int D>
struct Params {
  OffsetCalculator<kN, I, D> calc;    // position -> offsets in units (indices: elements)
  OffsetCalculator<1, I, D> unravel;  // kUnravel: flat position -> target offset (elements)
  void* written;                      // out (read) or self (write)
  const void* other;                  // self (read) or src (write)
  const void* index[kK];
  bool idx64[kK];
  int k;
  bool unravel_mode;
  int64_t size[kK];  // kSum: valid values [lo, size); kUnravel: size[0] = numel
  bool wraps;        // lo = -size (a negative value counts from the end); else lo = 0
  I stride[kK];      // kSum: units per index step
  int64_t dim[kK];   // reported dim (-1 for kUnravel)
  I numel;
  int32_t op;
  CudaErrorRecord* rec;  // null in the host emulation
  AbortWord abort;
  bool has_value;  // write: src is this one value (IndexKArgs::value)
  alignas(16) unsigned char value[16];
};

// Copies N bytes between a unit and its V elements (registers; no aliasing assumptions).
template <unsigned N>
SW_HOST_DEVICE SW_INLINE void copy_bytes(void* to, const void* from) {
  const unsigned char* f = static_cast<const unsigned char*>(from);
  unsigned char* t = static_cast<unsigned char*>(to);
  SW_UNROLL
  for (unsigned b = 0; b < N; ++b) t[b] = f[b];
}

// The value bytes as a T (an element or its copy unit; never a vector: no vec with a value).
template <typename T>
SW_HOST_DEVICE SW_INLINE T value_as(const unsigned char* bytes) {
  T v;
  const unsigned char* b = bytes;
  unsigned char* d = reinterpret_cast<unsigned char*>(&v);
  for (unsigned i = 0; i < sizeof(T); ++i) d[i] = b[i];
  return v;
}

template <typename I, int D>
SW_HOST_DEVICE SW_INLINE int64_t load_index(const Params<I, D>& a, int j, I off) {
  return a.idx64[j] ? static_cast<int64_t>(SW_LDG(static_cast<const int64_t*>(a.index[j]) + off))
                    : static_cast<int64_t>(SW_LDG(static_cast<const int32_t*>(a.index[j]) + off));
}

// The k terms' offset (units) at offsets `o`; false with the bad term in *bad_j.
template <typename I, int D>
SW_HOST_DEVICE SW_INLINE bool terms(const Params<I, D>& a, const Offsets<kN, I>& o, I* t,
                                    int* bad_j, int64_t* bad_v) {
  if (a.unravel_mode) {
    int64_t v = load_index(a, 0, o.v[kIkIndex0]);
    if (v < (a.wraps ? -a.size[0] : 0) || v >= a.size[0]) return *bad_j = 0, *bad_v = v, false;
    if (v < 0) v += a.size[0];
    *t = a.unravel.get(I(v)).v[0];
    return true;
  }
  int64_t v[kK] = {};
  SW_UNROLL
  for (int j = 0; j < kK; ++j)
    if (j < a.k) v[j] = load_index(a, j, o.v[kIkIndex0 + j]);
  I acc = 0;
  SW_UNROLL
  for (int j = 0; j < kK; ++j) {
    if (j >= a.k) break;
    if (v[j] < (a.wraps ? -a.size[j] : 0) || v[j] >= a.size[j])
      return *bad_j = j, *bad_v = v[j], false;
    acc += I(v[j] < 0 ? v[j] + a.size[j] : v[j]) * a.stride[j];
  }
  *t = acc;
  return true;
}

struct Bad {
  BadIndex b;
  int j = 0;
};

// Runs f(position, offsets, term) for this thread's positions whose values are valid; the
// first bad one is kept in `bad`. kUnroll positions at a time: offsets and terms first.
template <typename I, int D, typename F>
SW_HOST_DEVICE SW_INLINE void each_position(const Params<I, D>& a, I block, I thread, I grid,
                                            Bad& bad, F&& f) {
  constexpr I kTile = I(kThreads) * kUnroll;
  for (I base = block * kTile; base < a.numel; base += grid * kTile) {
    Offsets<kN, I> o[kUnroll];
    I t[kUnroll] = {};
    bool live[kUnroll];
    SW_UNROLL
    for (int u = 0; u < kUnroll; ++u) {
      const I i = base + I(u * kThreads) + thread;
      live[u] = i < a.numel;
      if (!live[u]) continue;
      o[u] = a.calc.get(i);
      int j = 0;
      int64_t v = 0;
      if (!terms(a, o[u], &t[u], &j, &v)) {
        live[u] = false;
        if (!bad.b.any) bad = Bad{BadIndex{true, v, int64_t(i)}, j};
      }
    }
    f(o, t, live);
  }
}

// read: out[pos] = self[off + term]; write copy: self[off + term] = src[pos].
template <typename U, bool kWrite, typename I, int D>
SW_HOST_DEVICE SW_INLINE void copy_thread(const Params<I, D>& a, I block, I thread, I grid,
                                          Bad& bad) {
  U* const dst = static_cast<U*>(a.written);
  const U* const src = static_cast<const U*>(a.other);
  each_position(a, block, thread, grid, bad,
                [&](const Offsets<kN, I>* o, const I* t, const bool* live) {
                  U val[kUnroll];
                  SW_HOST_ZERO(val);
                  SW_UNROLL
                  for (int u = 0; u < kUnroll; ++u)
                    if (live[u])
                      val[u] = kWrite && a.has_value
                                   ? value_as<U>(a.value)
                                   : SW_LDG(src + (o[u].v[kIkOther] + (kWrite ? I(0) : t[u])));
                  SW_UNROLL
                  for (int u = 0; u < kUnroll; ++u)
                    if (live[u]) dst[o[u].v[kIkWritten] + (kWrite ? t[u] : I(0))] = val[u];
                });
}

// write add: acc[off + term] += src[pos], atomically, on self (types whose accumulation type
// is their own).
template <typename T, typename I, int D>
SW_HOST_DEVICE SW_INLINE void add_thread(const Params<I, D>& a, scatter_arith::AccOf<T>* acc,
                                         I block, I thread, I grid, Bad& bad) {
  using C = scatter_arith::Conv<T>;
  const T* const src = static_cast<const T*>(a.other);
  each_position(
      a, block, thread, grid, bad, [&](const Offsets<kN, I>* o, const I* t, const bool* live) {
        SW_UNROLL
        for (int u = 0; u < kUnroll; ++u)
          if (live[u])
            cuda_scatter::atomic_combine(
                acc + (o[u].v[kIkWritten] + t[u]),
                C::load(a.has_value ? value_as<T>(a.value) : src[o[u].v[kIkOther]]), Combine::kAdd);
      });
}

// Validation pass of a write: every position's values, nothing else.
template <typename I, int D>
SW_HOST_DEVICE SW_INLINE void check_thread(const Params<I, D>& a, I block, I thread, I grid,
                                           Bad& bad) {
  each_position(a, block, thread, grid, bad, [](const Offsets<kN, I>*, const I*, const bool*) {});
}

// ---- the sorted path (deterministic writes) ----------------------------------------------
// keys: over IndexKPlan::seq (index order), validating as the check pass does: key[q] = the
// terms' offset, val[q] = q. A stable radix sort by key keeps index order among equal keys.
// seg: one thread per (sorted position i, row position r); the first position of each run of
// equal keys walks the run in order: copy stores its last writer, add sums in the
// accumulation type and rounds once, mean (SegParams::mean, an add without self) sums from
// +0 and divides by the run's length before it rounds (index_k.h; index_k_cpu.cpp's mean has
// the same order and arithmetic). No atomics: the result is the same on every run.

template <typename I, int D>
SW_HOST_DEVICE SW_INLINE void keys_thread(const Params<I, D>& a, uint64_t* keys, int64_t* vals,
                                          I block, I thread, I grid, Bad& bad) {
  constexpr I kTile = I(kThreads) * kUnroll;
  for (I base = block * kTile; base < a.numel; base += grid * kTile) {
    SW_UNROLL
    for (int u = 0; u < kUnroll; ++u) {
      const I q = base + I(u * kThreads) + thread;
      if (q >= a.numel) continue;
      I t = 0;
      int j = 0;
      int64_t v = 0;
      if (!terms(a, a.calc.get(q), &t, &j, &v)) {
        t = 0;  // never used: the abort word stops the writes
        if (!bad.b.any) bad = Bad{BadIndex{true, v, int64_t(q)}, j};
      }
      keys[q] = uint64_t(t);
      vals[q] = int64_t(q);
    }
  }
}

template <typename I, int D>
struct SegParams {
  OffsetCalculator<kN, I, D> seq;  // q -> src offset (kIkOther)
  OffsetCalculator<kN, I, D> row;  // r -> self (kIkWritten) and src (kIkOther) offsets
  IntDivider<I> row_div;           // n_row, for the one-thread-per-(i, r) mapping
  const uint64_t* keys;            // sorted
  const int64_t* vals;
  int64_t n_seq, n_row;
  void* self;
  const void* src;
  AbortWord abort;
  bool mean;       // kAdd walks: the run's mean, without self's value
  bool has_value;  // never with mean
  alignas(16) unsigned char value[16];
};

// Whether sorted position i is the first writer of its element, and where its run ends.
template <typename I, int D>
SW_HOST_DEVICE SW_INLINE bool seg_head(const SegParams<I, D>& a, int64_t i, int64_t* end) {
  const uint64_t key = a.keys[i];
  if (i > 0 && a.keys[i - 1] == key) return false;
  int64_t e = i + 1;
  while (e < a.n_seq && a.keys[e] == key) ++e;
  *end = e;
  return true;
}

// The writers [i, end) of one element, at row position r, in index order. T: the element type
// (add) or the copy unit of the element's size (copy).
template <typename T, bool kAdd, typename I, int D>
SW_HOST_DEVICE SW_INLINE void seg_walk(const SegParams<I, D>& a, int64_t i, int64_t end, I r) {
  const Offsets<kN, I> ro = a.row.get(r);
  T* const dst = static_cast<T*>(a.self) + (I(a.keys[i]) + ro.v[kIkWritten]);
  const T* const src = static_cast<const T*>(a.src);
  auto src_of = [&](int64_t j) {
    return a.has_value ? value_as<T>(a.value)
                       : src[a.seq.get(I(a.vals[j])).v[kIkOther] + ro.v[kIkOther]];
  };
  if constexpr (kAdd) {
    using C = scatter_arith::Conv<T>;
    using A = scatter_arith::AccOf<T>;
    A acc = a.mean ? A{} : C::load(*dst);
    for (int64_t j = i; j < end; ++j) acc = scatter_arith::Ops<A>::add(acc, C::load(src_of(j)));
    if (a.mean) scatter_arith::finish_acc<T>(Combine::kMean, false, end - i, &acc);
    *dst = C::store(acc);
  } else {
    *dst = src_of(end - 1);
  }
}

// The same walk over V elements at once, for rows that are one contiguous run in self and in
// src (seg_vec_width): unit u covers row elements [u*V, u*V + V); loads and stores move whole
// 16-byte (or V * sizeof(T)) units, the sum stays per element in the accumulation type.
template <typename T, bool kAdd, int V, typename I, int D>
SW_HOST_DEVICE SW_INLINE void seg_walk_vec(const SegParams<I, D>& a, int64_t i, int64_t end, I u) {
  using U = typename cuda_gather::UnitOf<int(sizeof(T)) * V>::type;
  U* const dst = reinterpret_cast<U*>(static_cast<T*>(a.self) + I(a.keys[i])) + u;
  const T* const src = static_cast<const T*>(a.src);
  auto src_unit = [&](int64_t j) {
    return SW_LDG(reinterpret_cast<const U*>(src + a.seq.get(I(a.vals[j])).v[kIkOther]) + u);
  };
  if constexpr (kAdd) {
    using C = scatter_arith::Conv<T>;
    using A = scatter_arith::AccOf<T>;
    T e[V];
    A acc[V];
    if (a.mean) {
      SW_UNROLL
      for (int v = 0; v < V; ++v) acc[v] = A{};
    } else {
      const U d = *dst;
      copy_bytes<sizeof(U)>(e, &d);
      SW_UNROLL
      for (int v = 0; v < V; ++v) acc[v] = C::load(e[v]);
    }
    for (int64_t j = i; j < end; ++j) {
      const U x = src_unit(j);
      copy_bytes<sizeof(U)>(e, &x);
      SW_UNROLL
      for (int v = 0; v < V; ++v) acc[v] = scatter_arith::Ops<A>::add(acc[v], C::load(e[v]));
    }
    SW_UNROLL
    for (int v = 0; v < V; ++v) {
      if (a.mean) scatter_arith::finish_acc<T>(Combine::kMean, false, end - i, &acc[v]);
      e[v] = C::store(acc[v]);
    }
    U out;
    copy_bytes<sizeof(U)>(&out, e);
    *dst = out;
  } else {
    *dst = src_unit(end - 1);
  }
}

// One (sorted position, row position) pair: what each thread of the flat mapping does.
template <typename T, bool kAdd, typename I, int D>
SW_HOST_DEVICE SW_INLINE void seg_at(const SegParams<I, D>& a, int64_t i, I r) {
  int64_t end = 0;
  if (seg_head(a, i, &end)) seg_walk<T, kAdd>(a, i, end, r);
}

// ---- host side -------------------------------------------------------------------------

inline bool writes(const IndexKArgs& a) {
  return a.desc.role == IndexRole::kWrite;
}

// The kernel parameters of a planned call; the dense operands' offsets in units of
// plan.vec elements.
// `loop`: plan.loop (vec as planned), or plan.check / plan.seq (element offsets).
template <typename I, int D>
inline Params<I, D> make_params(const IndexKArgs& args, const IndexKPlan& plan,
                                const LoopPlan<kN>& loop, CudaErrorRecord* rec, AbortWord abort) {
  Params<I, D> p;
  const int vec = &loop == &plan.loop ? plan.vec : 1;  // 1 unless a copy
  LoopPlan<kN> l = loop;
  if (vec > 1) {  // units of vec elements for the two dense operands
    l.sizes[0] /= vec;
    for (int d = 1; d < l.rank; ++d)
      for (int k : {int(kIkWritten), int(kIkOther)}) l.strides[k][d] /= vec;
  }
  p.calc = OffsetCalculator<kN, I, D>(l);
  if (args.mode == IndexMode::kUnravel) p.unravel = OffsetCalculator<1, I, D>(plan.unravel);
  p.written = writes(args) ? args.self.data : args.out.data;
  p.other = writes(args) ? args.src.data : args.self.data;
  p.k = args.k;
  p.unravel_mode = args.mode == IndexMode::kUnravel;
  p.wraps = args.desc.wraps;
  for (int j = 0; j < kK; ++j) {
    const bool live = j < args.k;
    p.index[j] = live ? args.index[j].data : nullptr;
    p.idx64[j] = live && args.index[j].dtype == DType::kInt64;
    p.size[j] = live ? (p.unravel_mode ? plan.flat_numel : args.term_size[j]) : 0;
    p.stride[j] = live && !p.unravel_mode ? I(args.term_stride[j] / vec) : I(0);
    p.dim[j] = live && !p.unravel_mode ? args.term_dim[j] : -1;
  }
  p.numel = I(l.numel / vec);
  p.op = static_cast<int32_t>(args.desc.op);
  p.rec = rec;
  p.abort = abort;
  p.has_value = args.has_value;
  for (int b = 0; b < 16; ++b) p.value[b] = args.value[b];
  return p;
}

template <typename I, int D>
inline SegParams<I, D> make_seg_params(const IndexKArgs& args, const IndexKPlan& plan,
                                       const uint64_t* keys, const int64_t* vals, AbortWord abort) {
  SegParams<I, D> s;
  s.seq = OffsetCalculator<kN, I, D>(plan.seq);
  s.row = OffsetCalculator<kN, I, D>(plan.row);
  s.keys = keys;
  s.vals = vals;
  s.n_seq = plan.seq.numel;
  s.n_row = plan.row.numel;
  s.row_div = IntDivider<I>(I(plan.row.numel > 0 ? plan.row.numel : 1));
  s.self = args.self.data;
  s.src = args.src.data;
  s.abort = abort;
  s.mean = args.desc.combine == Combine::kMean;
  s.has_value = args.has_value;
  for (int b = 0; b < 16; ++b) s.value[b] = args.value[b];
  return s;
}

// Elements per unit of the sorted path's row walk (1: element by element): the row is one run
// of unit stride in self and src, V divides its length, every key (the terms) and every src
// offset of a sorted position, and both data pointers are V * element aligned. At most 16
// bytes per unit.
inline int seg_vec_width(const IndexKArgs& args, const IndexKPlan& plan) {
  const LoopPlan<kN>& r = plan.row;
  const int64_t es = elem_size(args.self.dtype);
  if (args.has_value || args.mode != IndexMode::kSum || r.rank != 1 || es <= 0 || es > 8 ||
      r.strides[kIkWritten][0] != 1 || r.strides[kIkOther][0] != 1)
    return 1;
  for (int64_t v = 16 / es; v > 1; v /= 2) {
    bool ok = r.sizes[0] % v == 0 &&
              reinterpret_cast<uintptr_t>(args.self.data) % uintptr_t(v * es) == 0 &&
              reinterpret_cast<uintptr_t>(args.src.data) % uintptr_t(v * es) == 0;
    for (int j = 0; j < args.k && ok; ++j) ok = args.term_stride[j] % v == 0;
    for (int d = 0; d < plan.seq.rank && ok; ++d) ok = plan.seq.strides[kIkOther][d] % v == 0;
    if (ok) return int(v);
  }
  return 1;
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

}  // namespace cuda_index_k
}  // namespace stridewise
