// CUDA scatter kernel bodies, shared by scatter_cuda.cu (which wraps them in __global__
// kernels) and core/tests/cuda/test_scatter_emulated.cpp (which runs them for every block
// and thread on the host, plain read-modify-writes standing in for atomics). No __global__
// code and no CUDA runtime calls here. The launch sequence is in scatter_cuda_dispatch.h.
//
// Every body is one thread's share of a grid-stride loop over a LoopPlan of scatter.h's
// ScatterPlan (or one built like it over the workspace). Offsets are in elements (units for
// the copy bodies: an element of `units` units), of type I (uint32_t when every offset the
// launch forms fits in 31 bits, else int64_t); OffsetCalculator capacity D is 4 or kMaxRank.
// Index values are read through a runtime width branch (int32 / int64). Every body but
// validate runs only when its block saw the call's abort word clear (the caller checks
// `aborted` once per block) and, besides, never uses a bad index value as an address.
#pragma once

#include <cstdint>

#include "common/elem_arith.h"     // Conv, Ops, combine, atomic_combine
#include "common/kernel_common.h"  // kThreads, Abort, Value, load_index, SW_LDG
#include "common/launch_dispatch.h"
#include "common/operands.h"
#include "stridewise/cuda_errors.h"
#include "stridewise/offset_calc.h"
#include "stridewise/scatter.h"

namespace stridewise {
namespace cuda_scatter {

using namespace elem;         // NOLINT: the storage tags and conversions
using namespace arith;        // NOLINT: Conv, Ops, combine, finish_acc, the atomics
using namespace cuda_common;  // NOLINT: the shared launch constants, Abort, Value, load_index

// Offset capacities 4 and kMaxRank only: every scatter kernel is instantiated per bucket, and
// scatter_cuda.cu's nvcc time is CI's largest.
using Buckets = DimBuckets<4, kMaxRank>;

// Where a bad index value is recorded (rec is null in the host emulation).
struct ScatterSite {
  CudaErrorRecord* rec = nullptr;
  int32_t op = 0;  // OpCode
  int64_t dim = 0;
  int64_t size = 0;  // valid index values are [0, size)
};

inline Operands operands_of(const ScatterArgs& a, void* out) {
  Operands o;
  o.out = out;
  o.index = a.index.data;
  o.src = a.has_value ? nullptr : a.src.data;
  o.idx64 = a.index.dtype == DType::kInt64;
  o.has_value = a.has_value;
  memcpy(o.value.b, a.value, sizeof o.value.b);
  o.combine = a.desc.combine;
  o.include_self = a.desc.include_self;
  o.has_alpha = a.has_alpha;
  memcpy(o.alpha.b, a.alpha, sizeof o.alpha.b);
  return o;
}

// ---- validation: the index's distinct elements, in its memory order ----------------------

template <typename I, int D>
struct ValidateArgs {
  const void* index;
  bool idx64;
  OffsetCalculator<1, I, D> calc;  // plan position -> index offset (ScatterPlan::index_elems)
  I numel;
  ScatterSite site;
  Abort abort;
  // Null, or the index's shadow: one byte per index storage element, each visited value
  // written at its own offset (site.size <= 256). The bins path reads it instead of the index:
  // the index is read once (here) and the shadow's bytes twice, instead of the index twice
  // (last_add_64: 1.07 GB of int64 index against 2 x 0.13 GB).
  uint8_t* shadow = nullptr;
};

// Finds this thread's first bad value (lowest index_elems position it visits); the kernel
// raises the abort word and records it. kValidateUnroll loads are issued before any is
// tested: with one load per thread and no unrolling the pass ran at ~230 GB/s on the H200
// (2026-12-01, 67M int64 values in 2.34 ms), a tenth of what reading the index allows.
constexpr int kValidateUnroll = 4;

template <typename I, int D>
SW_HOST_DEVICE SW_INLINE void validate_thread(const ValidateArgs<I, D>& a, I block, I thread,
                                              I grid, BadIndex& bad) {
  // i + kValidateUnroll * step cannot wrap: numel <= 2^31-1 and
  // step <= kMaxBlocks * kThreads = 2^28, so it stays below 2^31 + 2^30.
  const I step = grid * I(kThreads);
  for (I i = block * I(kThreads) + thread; i < a.numel; i += I(kValidateUnroll) * step) {
    int64_t v[kValidateUnroll];
    I off[kValidateUnroll];
    for (int u = 0; u < kValidateUnroll; ++u) {
      const I j = i + I(u) * step;
      off[u] = j < a.numel ? a.calc.get(j).v[0] : I(0);
      v[u] = j < a.numel ? load_index(a.index, off[u], a.idx64) : 0;
    }
    for (int u = 0; u < kValidateUnroll; ++u) {
      const I j = i + I(u) * step;
      if (j < a.numel && (v[u] < 0 || v[u] >= a.site.size)) {
        bad = BadIndex{true, v[u], static_cast<int64_t>(j)};
        return;
      }
    }
    if (a.shadow)
      for (int u = 0; u < kValidateUnroll; ++u)
        if (i + I(u) * step < a.numel) a.shadow[off[u]] = static_cast<uint8_t>(v[u]);
  }
}

// ---- self -> out (out-of-place forms), per unit ----------------------------------------

template <typename I, int D>
struct CopyArgs {
  void* out;
  const void* self;
  OffsetCalculator<2, I, D> calc;  // ScatterPlan::copy: (out, self)
  I numel;
  int units;  // units per element (1 unless the data is misaligned for whole elements)
  Abort abort;
};

template <typename U, typename I, int D>
SW_HOST_DEVICE SW_INLINE void copy_thread(const CopyArgs<I, D>& a, I block, I thread, I grid) {
  U* const out = static_cast<U*>(a.out);
  const U* const self = static_cast<const U*>(a.self);
  const I m = I(a.units);
  for (I i = block * I(kThreads) + thread; i < a.numel; i += grid * I(kThreads)) {
    const Offsets<2, I> o = a.calc.get(i);
    for (I j = 0; j < m; ++j) out[o.v[0] * m + j] = SW_LDG(self + (o.v[1] * m + j));
  }
}

// ---- combine kCopy (scatter with src or value), per unit ---------------------------------

template <typename I, int D>
struct PutArgs : Operands {
  OffsetCalculator<3, I, D> calc;  // (out, index, src): ScatterPlan::elems or ::lines
  I numel;                         // positions of calc's plan
  I out_dim_stride;                // elements per unit of index value
  int64_t size;                    // valid index values are [0, size)
  int units;
  I line_len;  // lines body: steps along dim, with the strides below (elements)
  I index_dim_stride;
  I src_dim_stride;
  Abort abort;
};

template <typename U, typename I, int D>
SW_HOST_DEVICE SW_INLINE void put_one(const PutArgs<I, D>& a, I out_base, I index_off, I src_off) {
  const int64_t v = load_index(a.index, index_off, a.idx64);
  if (v < 0 || v >= a.size) return;  // validation recorded it; never an address
  U* const dst = static_cast<U*>(a.out) + (out_base + I(v) * a.out_dim_stride) * I(a.units);
  const U* const src = a.has_value ? reinterpret_cast<const U*>(a.value.b)
                                   : static_cast<const U*>(a.src) + src_off * I(a.units);
  for (int j = 0; j < a.units; ++j) dst[j] = src[j];
}

// One thread per index position (ScatterPlan::elems): duplicates race, one of them wins.
template <typename U, typename I, int D>
SW_HOST_DEVICE SW_INLINE void put_elems_thread(const PutArgs<I, D>& a, I block, I thread, I grid) {
  for (I i = block * I(kThreads) + thread; i < a.numel; i += grid * I(kThreads)) {
    const Offsets<3, I> o = a.calc.get(i);
    put_one<U>(a, o.v[kScatterOut], o.v[kScatterIndex], o.v[kScatterSrc]);
  }
}

// The lines kernels (deterministic mode) take a line's steps kLinesWindow at a time: the
// window's index values are loaded together, then its steps are applied in index order with
// one read and one write per distinct target. One step at a time, each step's load of the
// target waited on the previous step's store (they may alias), and a line of 1024 steps ran
// at a third of the atomics kernel's speed (dim1_add on the H200, 2026-12-02).
constexpr int kLinesWindow = 8;

// One thread per line (ScatterPlan::lines), walked in index order: the last writer wins (in a
// window, only the last step of each target stores).
template <typename U, typename I, int D>
SW_HOST_DEVICE SW_INLINE void put_lines_thread(const PutArgs<I, D>& a, I block, I thread, I grid) {
  constexpr int W = kLinesWindow;
  U* const out = static_cast<U*>(a.out);
  for (I l = block * I(kThreads) + thread; l < a.numel; l += grid * I(kThreads)) {
    const Offsets<3, I> o = a.calc.get(l);
    for (I t0 = 0; t0 < a.line_len; t0 += I(W)) {
      int64_t v[W];
      for (int u = 0; u < W; ++u) {
        v[u] = t0 + I(u) < a.line_len
                   ? load_index(a.index, o.v[kScatterIndex] + (t0 + I(u)) * a.index_dim_stride,
                                a.idx64)
                   : -1;
        if (v[u] >= a.size) v[u] = -1;  // bad (validation recorded it): never an address
      }
      for (int u = 0; u < W; ++u) {
        bool last = v[u] >= 0;
        for (int w = u + 1; w < W; ++w) last = last && v[w] != v[u];
        if (!last) continue;
        U* const dst = out + (o.v[kScatterOut] + I(v[u]) * a.out_dim_stride) * I(a.units);
        const U* const src =
            a.has_value ? reinterpret_cast<const U*>(a.value.b)
                        : static_cast<const U*>(a.src) +
                              (o.v[kScatterSrc] + (t0 + I(u)) * a.src_dim_stride) * I(a.units);
        for (int j = 0; j < a.units; ++j) dst[j] = src[j];
      }
    }
  }
}

// ---- accumulating combines, per storage type T (target holds AccOf<T>) --------------------

template <typename I, int D>
struct AccArgs : Operands {        // out: AccOf<T>, out itself or the workspace's accumulator
  int32_t* count;                  // null, or the workspace's counts (same offsets as out)
  OffsetCalculator<3, I, D> calc;  // (out, index, src), elems or lines
  I numel;
  I target_dim_stride;
  int64_t size;
  I line_len;
  I index_dim_stride;
  I src_dim_stride;
  Abort abort;
};

// One thread per index position, atomics into the target.
template <typename T, typename I, int D>
SW_HOST_DEVICE SW_INLINE void acc_elems_thread(const AccArgs<I, D>& a, I block, I thread, I grid) {
  using A = AccOf<T>;
  A* const target = static_cast<A*>(a.out);
  const T* const src = static_cast<const T*>(a.src);
  const A val = a.has_value ? Conv<T>::load(value_as<T>(a.value)) : A{};
  const SrcScale<T> scale = src_scale<T>(a);
  for (I i = block * I(kThreads) + thread; i < a.numel; i += grid * I(kThreads)) {
    const Offsets<3, I> o = a.calc.get(i);
    const int64_t v = load_index(a.index, o.v[kScatterIndex], a.idx64);
    if (v < 0 || v >= a.size) continue;
    const I t = o.v[kScatterOut] + I(v) * a.target_dim_stride;
    atomic_combine<A>(target + t, a.has_value ? val : scale(Conv<T>::load(src[o.v[kScatterSrc]])),
                      a.combine);
    if (a.count) atomic_count(a.count + t);
  }
}

// One thread per line, in index order; lines own disjoint targets, so no atomics. A window's
// distinct targets (the first step of each: its leader) are read together, every step folds
// into its leader's value in index order, and the leaders store.
template <typename T, typename I, int D>
SW_HOST_DEVICE SW_INLINE void acc_lines_thread(const AccArgs<I, D>& a, I block, I thread, I grid) {
  using A = AccOf<T>;
  constexpr int W = kLinesWindow;
  A* const target = static_cast<A*>(a.out);
  const T* const src = static_cast<const T*>(a.src);
  const A val = a.has_value ? Conv<T>::load(value_as<T>(a.value)) : A{};
  const SrcScale<T> scale = src_scale<T>(a);
  for (I l = block * I(kThreads) + thread; l < a.numel; l += grid * I(kThreads)) {
    const Offsets<3, I> o = a.calc.get(l);
    for (I s0 = 0; s0 < a.line_len; s0 += I(W)) {
      int64_t v[W];
      A x[W], r[W];
      int32_t n[W];
      bool lead[W];
      SW_HOST_ZERO(x);
      SW_HOST_ZERO(r);
      for (int u = 0; u < W; ++u) {
        const I s = s0 + I(u);
        v[u] = -1;
        if (s >= a.line_len) continue;
        v[u] = load_index(a.index, o.v[kScatterIndex] + s * a.index_dim_stride, a.idx64);
        if (v[u] >= a.size) v[u] = -1;  // bad (validation recorded it): never an address
        x[u] =
            a.has_value ? val : scale(Conv<T>::load(src[o.v[kScatterSrc] + s * a.src_dim_stride]));
      }
      for (int u = 0; u < W; ++u) {
        lead[u] = v[u] >= 0;
        for (int w = 0; w < u; ++w) lead[u] = lead[u] && v[w] != v[u];
        n[u] = 0;
        if (lead[u]) r[u] = target[o.v[kScatterOut] + I(v[u]) * a.target_dim_stride];
      }
      for (int u = 0; u < W; ++u)
        for (int w = 0; w <= u; ++w)
          if (lead[w] && v[w] == v[u]) {
            r[w] = combine<A>(a.combine, r[w], x[u]);
            ++n[w];
          }
      for (int u = 0; u < W; ++u) {
        if (!lead[u]) continue;
        const I t = o.v[kScatterOut] + I(v[u]) * a.target_dim_stride;
        target[t] = r[u];
        if (a.count) a.count[t] += n[u];
      }
    }
  }
}

// ---- workspace: init from out (or the identity), finalize into out ------------------------

template <typename I, int D>
struct WsArgs {
  void* out;  // T
  void* acc;  // AccOf<T>, numel elements
  int32_t* count;
  OffsetCalculator<2, I, D> calc;  // (out, workspace) over out's shape
  I numel;
  Combine combine;
  bool include_self;
  Abort abort;
};

template <typename T, typename I, int D>
SW_HOST_DEVICE SW_INLINE void ws_init_thread(const WsArgs<I, D>& a, I block, I thread, I grid) {
  using A = AccOf<T>;
  const T* const out = static_cast<const T*>(a.out);
  A* const acc = static_cast<A*>(a.acc);
  for (I i = block * I(kThreads) + thread; i < a.numel; i += grid * I(kThreads)) {
    const Offsets<2, I> o = a.calc.get(i);
    acc[o.v[1]] = a.include_self ? Conv<T>::load(out[o.v[0]]) : Ops<A>::identity(a.combine);
    if (a.count) a.count[o.v[1]] = 0;
  }
}

// mean: acc / (count + 1) with self, acc / count without (untouched positions keep out);
// include_self = false: positions no value reached keep out; else out = acc.
template <typename T, typename I, int D>
SW_HOST_DEVICE SW_INLINE void ws_final_thread(const WsArgs<I, D>& a, I block, I thread, I grid) {
  using A = AccOf<T>;
  T* const out = static_cast<T*>(a.out);
  const A* const acc = static_cast<const A*>(a.acc);
  for (I i = block * I(kThreads) + thread; i < a.numel; i += grid * I(kThreads)) {
    const Offsets<2, I> o = a.calc.get(i);
    A r = acc[o.v[1]];
    if (finish_acc<T>(a.combine, a.include_self, a.count ? a.count[o.v[1]] : 0, &r))
      out[o.v[0]] = Conv<T>::store(r);
  }
}

}  // namespace cuda_scatter
}  // namespace stridewise
