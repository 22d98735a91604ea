// The CUDA scatter's deterministic copy for an index per element (scatter_ in deterministic
// mode): the last writer in index order wins, as the CPU's walk leaves it, without walking each
// line in one thread (put_lines: a (8192, 4096) permutation along dim 0 is 4096 threads of 8192
// serial steps; it ran 3.5-4.2x the fast path, docs/bench_scatter.md). Over a workspace of one
// 64-bit word per out element (dense, in out's memory order: ws_strides), zeroed first:
//  claim: one thread per step; word = (step + 1) << 32 | the element's bits (elements of at
//         most 4 bytes), atomicMax into the target's word: each target keeps its largest step,
//         whatever the schedule, and that step's value rides with it;
//  final: every out element whose word is not zero takes the word's low bits.
// Only the steps of one line meet at a target (a line's targets are out's column along dim with
// the line's other coordinates), so the step along dim orders them as the CPU walk does. The
// value form needs none of this: every writer writes the same bits (put_elems).
//
// Host and device compilable (the host emulation runs these bodies); no __global__ code. The
// kernels are in scatter_cuda.cu, the launch sequence is run_claim below.
#pragma once

#include <cstdint>

#include "scatter/scatter_cuda_impl.h"
#include "scatter/scatter_cuda_launch.h"
#include "scatter/scatter_cuda_sorted.h"  // PathChoice
#include "stridewise/scatter.h"

namespace stridewise {
namespace cuda_scatter {

// Steps of a line at most: step + 1 fills the word's high 32 bits.
constexpr int64_t kClaimMaxSteps = (int64_t(1) << 32) - 2;

// The rule: deterministic copies from src with an index per element (a shared index took the
// segment path), whole elements of 1, 2 or 4 bytes, not kNever (tests, benchmarks: put_lines).
inline bool claim_use(const ScatterArgs& a, const ScatterPlan& p, PathChoice choice, int unit) {
  const int esize = elem_size(a.out.dtype);
  return choice != PathChoice::kNever && a.deterministic && a.desc.combine == Combine::kCopy &&
         !a.has_value && p.elems.numel > 0 && unit == esize && esize <= 4 &&
         p.line_len <= kClaimMaxSteps;
}

inline int64_t claim_bytes(const ScatterArgs& a) {
  return align256(a.out.numel() * 8);
}

// The claim's workspace (sized whenever the rule holds for whole elements: a misaligned call
// then takes put_lines and leaves it unused).
inline WsLayout claim_layout(const ScatterArgs& a) {
  WsLayout w;
  w.needed = true;
  w.total = claim_bytes(a);
  return w;
}

template <typename I, int D>
struct ClaimArgs : Operands {      // out: the workspace's words
  OffsetCalculator<3, I, D> calc;  // lines: (word, index, src), ws_scatter_plan(lines)
  int64_t lines;
  int64_t line_len;
  int64_t size;  // valid index values are [0, size)
  I word_dim_stride;
  I index_dim_stride;
  I src_dim_stride;
  bool steps_fastest;  // consecutive threads take a line's consecutive steps (else its lines)
  Abort abort;
};

SW_HOST_DEVICE SW_INLINE void atomic_max_word(unsigned long long* p, unsigned long long w) {
#if defined(__CUDA_ARCH__)
  atomicMax(p, w);
#else
  if (w > *p) *p = w;
#endif
}

// Positions p of lines x line_len, grid-stride; U: the element's bits (1, 2 or 4 bytes).
template <typename U, typename I, int D>
SW_HOST_DEVICE SW_INLINE void claim_thread(const ClaimArgs<I, D>& a, int64_t block, int64_t thread,
                                           int64_t grid) {
  unsigned long long* const words = static_cast<unsigned long long*>(a.out);
  const U* const src = static_cast<const U*>(a.src);
  const int64_t total = a.lines * a.line_len;
  for (int64_t p = block * kThreads + thread; p < total; p += grid * kThreads) {
    const int64_t line = a.steps_fastest ? p / a.line_len : p % a.lines;
    const int64_t s = a.steps_fastest ? p % a.line_len : p / a.lines;
    const Offsets<3, I> o = a.calc.get(I(line));
    const int64_t v = load_index(a.index, o.v[kScatterIndex] + I(s) * a.index_dim_stride, a.idx64);
    if (v < 0 || v >= a.size) continue;  // validation recorded it; never an address
    const unsigned long long bits = SW_LDG(src + (o.v[kScatterSrc] + I(s) * a.src_dim_stride));
    atomic_max_word(words + (o.v[kScatterOut] + I(v) * a.word_dim_stride),
                    (static_cast<unsigned long long>(s + 1) << 32) | bits);
  }
}

template <typename I, int D>
struct ClaimFinalArgs {
  void* out;
  const unsigned long long* words;
  OffsetCalculator<2, I, D> calc;  // (out, word) over out's shape
  I numel;
  Abort abort;
};

template <typename U, typename I, int D>
SW_HOST_DEVICE SW_INLINE void claim_final_thread(const ClaimFinalArgs<I, D>& a, I block, I thread,
                                                 I grid) {
  U* const out = static_cast<U*>(a.out);
  for (I i = block * I(kThreads) + thread; i < a.numel; i += grid * I(kThreads)) {
    const Offsets<2, I> o = a.calc.get(i);
    const unsigned long long w = a.words[o.v[1]];
    if (w != 0) out[o.v[0]] = static_cast<U>(w & 0xffffffffull);
  }
}

// f(Tag<U>) for the element's bits U of a 1-, 2- or 4-byte element (claim_use's sizes).
template <typename F>
Status with_claim_unit(int bytes, F&& f) {
  if (bytes == 1) return f(Tag<UnitOf<1>::type>{});
  if (bytes == 2) return f(Tag<UnitOf<2>::type>{});
  if (bytes == 4) return f(Tag<UnitOf<4>::type>{});
  return Status::kUnsupported;
}

// The whole copy after validation (and self -> out): zero the words, claim, final.
template <typename Runner>
Status run_claim(const ScatterArgs& args, const ScatterPlan& plan, const Abort& abort,
                 Runner& runner, void* workspace) {
  const int r = args.out.rank;
  int64_t wst[kMaxRank] = {};
  ws_strides(args.out, wst);
  runner.zero(workspace, args.out.numel() * 8);
  const LoopPlan<3> l = ws_scatter_plan(args, plan, wst, true);
  Status st = with_claim_unit(elem_size(args.out.dtype), [&](auto ut) {
    using U = typename decltype(ut)::type;
    return with_offsets(
        Buckets{}, l.fits_int32 && plan.line_len <= kI32Max, l.rank, [&](auto it, auto dims) {
          using I = typename decltype(it)::type;
          constexpr int D = decltype(dims)::value;
          ClaimArgs<I, D> c{};
          static_cast<Operands&>(c) = operands_of(args, workspace);
          c.calc = OffsetCalculator<3, I, D>(l);
          c.lines = l.numel;
          c.line_len = plan.line_len;
          c.size = plan.out_dim_size;
          c.word_dim_stride = static_cast<I>(r > 0 ? wst[plan.dim] : 0);
          c.index_dim_stride = static_cast<I>(plan.index_dim_stride);
          c.src_dim_stride = static_cast<I>(plan.src_dim_stride);
          c.steps_fastest = plan.index_dim_stride == 1 || plan.index_dim_stride == -1;
          c.abort = abort;
          runner.template claim<U, I, D>(c, grid_for(l.numel * plan.line_len));
          return Status::kOk;
        });
  });
  if (st != Status::kOk) return st;
  const int64_t* strides[2] = {args.out.strides, wst};
  const LoopPlan<2> whole = plan_loop<2>(r, args.out.sizes, strides);
  return with_claim_unit(elem_size(args.out.dtype), [&](auto ut) {
    using U = typename decltype(ut)::type;
    return with_offsets(Buckets{}, whole.fits_int32, whole.rank, [&](auto it, auto dims) {
      using I = typename decltype(it)::type;
      constexpr int D = decltype(dims)::value;
      ClaimFinalArgs<I, D> f{args.out.data, static_cast<const unsigned long long*>(workspace),
                             OffsetCalculator<2, I, D>(whole), static_cast<I>(whole.numel), abort};
      runner.template claim_final<U, I, D>(f, grid_for(whole.numel));
      return Status::kOk;
    });
  });
}

}  // namespace cuda_scatter
}  // namespace stridewise
