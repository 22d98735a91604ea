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
// types (float16, bfloat16: float32 accumulation, rounded once; int8/16, uint8, bool), floating
// adds over rows long enough to pay for a sort, every mean and the deterministic writes take the
// sorted path (index_k_cuda_sorted.h). Bad values
// are never addresses: reads skip and record them; writes run after a validation pass that
// raises the call's abort word, which every write kernel checks first (the scatter family's
// rule: a call that meets a bad value writes nothing).
#pragma once

#include <algorithm>
#include <cstdint>

#include "common/elem_arith.h"
#include "common/kernel_common.h"
#include "common/launch_dispatch.h"
#include "stridewise/cuda_errors.h"
#include "stridewise/index_k.h"
#include "stridewise/offset_calc.h"

namespace stridewise {
namespace cuda_index_k {

using namespace cuda_common;  // NOLINT: the shared launch constants, Abort, Value, load_index
constexpr int kK = kMaxIndexTerms;
// Offset capacities: 6 dims (the common layouts) and kMaxRank. Two buckets: each one
// instantiates every index_k kernel again, and CI's nvcc time is the budget.
using Buckets = DimBuckets<6, kMaxRank>;
constexpr int kN = kIkOperands;

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
  Abort abort;
  bool has_value;  // write: src is this one value (IndexKArgs::value)
  Value value;     // the value, repeated across a vector unit
};

// Copies N bytes between a unit and its V elements (registers; no aliasing assumptions).
template <unsigned N>
SW_HOST_DEVICE SW_INLINE void copy_bytes(void* to, const void* from) {
  const unsigned char* f = static_cast<const unsigned char*>(from);
  unsigned char* t = static_cast<unsigned char*>(to);
  SW_UNROLL
  for (unsigned b = 0; b < N; ++b) t[b] = f[b];
}

// The k terms' offset (units) at offsets `o`; false with the bad term in *bad_j.
template <typename I, int D>
SW_HOST_DEVICE SW_INLINE bool terms(const Params<I, D>& a, const Offsets<kN, I>& o, I* t,
                                    int* bad_j, int64_t* bad_v) {
  if (a.unravel_mode) {
    int64_t v = load_index(a.index[0], o.v[kIkIndex0], a.idx64[0]);
    if (!wrap_index(v, a.size[0], a.wraps)) return *bad_j = 0, *bad_v = v, false;
    *t = a.unravel.get(I(v)).v[0];
    return true;
  }
  int64_t v[kK] = {};
  SW_UNROLL
  for (int j = 0; j < kK; ++j)
    if (j < a.k) v[j] = load_index(a.index[j], o.v[kIkIndex0 + j], a.idx64[j]);
  I acc = 0;
  SW_UNROLL
  for (int j = 0; j < kK; ++j) {
    if (j >= a.k) break;
    if (!wrap_index(v[j], a.size[j], a.wraps)) return *bad_j = j, *bad_v = v[j], false;
    acc += I(v[j]) * a.stride[j];
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
SW_HOST_DEVICE SW_INLINE void add_thread(const Params<I, D>& a, arith::AccOf<T>* acc, I block,
                                         I thread, I grid, Bad& bad) {
  using C = arith::Conv<T>;
  const T* const src = static_cast<const T*>(a.other);
  each_position(
      a, block, thread, grid, bad, [&](const Offsets<kN, I>* o, const I* t, const bool* live) {
        SW_UNROLL
        for (int u = 0; u < kUnroll; ++u)
          if (live[u])
            arith::atomic_combine(
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

// ---- host side -------------------------------------------------------------------------

inline bool writes(const IndexKArgs& a) {
  return a.desc.role == IndexRole::kWrite;
}

// The kernel parameters of a planned call; the dense operands' offsets in units of
// plan.vec elements.
// `loop`: plan.loop (vec as planned), or plan.check / plan.seq (element offsets).
template <typename I, int D>
inline Params<I, D> make_params(const IndexKArgs& args, const IndexKPlan& plan,
                                const LoopPlan<kN>& loop, CudaErrorRecord* rec, Abort abort) {
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
  // A value moved in units of vec elements: its bytes repeated across the unit.
  const int64_t es = elem_size(args.self.dtype);
  for (int b = 0; b < 16; ++b) p.value.b[b] = args.value[b % (vec > 1 ? es : 16)];
  return p;
}

}  // namespace cuda_index_k
}  // namespace stridewise
