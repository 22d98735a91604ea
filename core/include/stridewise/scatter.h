// The scatter family on one contract: scatter (src or value, optionally reduce="add" /
// "multiply"), scatter_add, scatter_reduce (sum / prod / mean / amax / amin, include_self).
//
//   out = self; then for every index position i (index's shape), in index order along dim:
//   out[i_0, .., index[i], .., i_{r-1}] = combine(out[..], src[i])      (src: src[i] or value)
//
// Contract for every entry point (the adapter checks these with ATen's wording first):
//  - out, self, index and src (when given) have the same rank r (0 <= r <= kMaxRank); out and
//    self have the same sizes; index.sizes[d] <= src.sizes[d] for every d and
//    index.sizes[d] <= self.sizes[d] for d != dim; 0 <= dim < max(r, 1).
//  - out, self and src have one dtype; index is kInt32 or kInt64.
//  - out is either exactly self (same data, sizes, strides: in place) or does not overlap it;
//    out overlaps neither index nor src; no two out positions share memory.
//  - Any strides (including 0) on index, src and self; no operand is ever copied.
// Combine and include_self (indexed_op.h) follow ATen's scatter_reduce: include_self=false
// makes a written position start from the combine's identity (0, 1, -inf, +inf) combined with
// the first src value it receives, instead of from out's (as ATen fills the identity); mean
// divides by the number of values combined (self counts when included), with floor division
// for integer types; complex mean is ATen's: every position of out divided by its count as a
// complex number (c10::complex's division by n + 0i), the positions no index value reaches by
// 1 + 0i (which turns -0 into +0, and an infinite or NaN part makes the other part NaN). CUDA
// refuses complex mean (kUnsupported: those positions are not visited there). Integer
// add/multiply wrap like ATen's. Floating accumulation of float16/bfloat16 is carried in
// float32 and rounded once (ATen rounds at every step).
// Bad index values (v < 0 or v >= self.sizes[dim]) are never used to address memory, and a
// call that meets one writes nothing at all: out (and so an in-place self) keeps every bit.
//  - CPU: every index value is checked before anything is written; returns kIndexOutOfRange
//    with the first offending element of the index's distinct elements (stride-0 dims read
//    once) in the index's memory order, which ErrorDetail::position counts (ATen's message).
//  - CUDA: a validation pass over the same distinct elements records an offending value (the
//    first one its thread met: cuda_errors.h) and raises a per-call abort word on the device;
//    every later kernel of the call reads the word and writes nothing. No host
//    synchronization.
// Determinism: the CPU walks each line (all coordinates but dim fixed) in index order, so
// results never depend on the thread count. On CUDA with `deterministic` set, lines are walked
// the same way (one thread per line): duplicate targets combine in index order along dim,
// and for copy the last writer in that order wins, on every run.
#pragma once

#include <cstddef>
#include <cstdint>

#include "stridewise/cpu_exec.h"
#include "stridewise/indexed_op.h"
#include "stridewise/layout.h"
#include "stridewise/status.h"
#include "stridewise/view.h"

namespace stridewise {

// How a complex product rounds, a the value already there (out, or the running accumulator),
// b the incoming one (multiply combines; index_add's alpha * src is always kPlain):
//  - kPlain: re = a.re*b.re - a.im*b.im, im = a.re*b.im + a.im*b.re, every product and the
//    sum rounded (c10::complex's formula, compiled without contraction);
//  - kFma: re = fma(a.re, b.re, -(a.im*b.im)), im = fma(a.re, b.im, a.im*b.re) (the same
//    formula as a compiler contracts it into fused multiply-adds: ATen's CPU kernels for
//    complex128 built for AVX2/AVX512 compute this; the adapter asks ATen which one it has).
// CUDA computes kPlain only (kUnsupported for kFma: ATen's CUDA kernels have no complex product).
enum class ComplexProduct : uint8_t { kPlain, kFma };

struct ScatterArgs {
  StridedView out;
  StridedView self;  // out's starting values; may be out itself (in place)
  StridedView index;
  StridedView src;                           // ignored when has_value
  bool has_value = false;                    // src is one scalar, `value`, at every position
  alignas(16) unsigned char value[16] = {};  // that scalar, in out's dtype (bytes)
  // src's values are scaled by `alpha` (in out's dtype, bytes) before they combine: index_add's
  // alpha, ATen's self + alpha * src in the accumulation type. Add only, src only.
  bool has_alpha = false;
  alignas(16) unsigned char alpha[16] = {};
  int64_t dim = 0;  // already wrapped into [0, rank) (0 for rank 0)
  IndexedOpDesc desc = scatter_desc(OpCode::kScatter, Combine::kCopy);
  bool deterministic = false;  // CUDA: combine duplicates in index order (see above)
  ComplexProduct cx_product = ComplexProduct::kPlain;  // see above
};

// Operand order in the scatter plans.
enum ScatterOperand : int { kScatterOut = 0, kScatterIndex = 1, kScatterSrc = 2 };

struct ScatterPlan {
  // Every index position: out's stride on `dim` set to 0 (each index step adds
  // out_dim_stride); src strides are 0 when has_value.
  LoopPlan<3> elems;
  // One position per line (index's shape with sizes[dim] = 1); each line walks `line_len`
  // steps along dim with the *_dim_stride below.
  LoopPlan<3> lines;
  int64_t line_len = 0;          // index.sizes[dim] (1 for rank 0)
  int64_t index_dim_stride = 0;  // elements
  int64_t src_dim_stride = 0;    // elements (0 when has_value)
  int64_t out_dim_stride = 0;    // elements, per unit of index value
  int64_t out_dim_size = 0;      // valid index values are [0, out_dim_size)
  int64_t dim = 0;
  bool in_place = false;  // out is self: no copy
  LoopPlan<2> copy;       // (out, self) over out's shape, when !in_place
  // The index's distinct elements (stride-0 dims walked once), in its memory order: what the
  // validation reads; ErrorDetail::position counts in this order.
  LoopPlan<1> index_elems;
};

// Validates the contract above (cheap, host only) and plans the loops.
Status plan_scatter(const ScatterArgs& args, ScatterPlan* plan, ErrorDetail* err);

// As with gather (gather.h), each entry point comes with a plan-taking form that requires the
// plan of a successful plan_scatter on these very args.
Status scatter_cpu(const ScatterArgs& args, const CpuExecutor& exec, ErrorDetail* err);
Status scatter_cpu(const ScatterArgs& args, const ScatterPlan& plan, const CpuExecutor& exec,
                   ErrorDetail* err);

// Whether the core can run this dtype with this combine (else kUnsupported; the adapter then
// leaves the call to ATen, which raises its own dtype error). Copy: every dtype with an
// element size (bytes move). Accumulating combines: bool, the signed integers, uint8, the
// floating and complex types; never uint16/32/64, complex32 or float8; bool never with mean;
// complex never with max/min.
bool scatter_supports(DType t, Combine c);

// CUDA: device workspace the call needs (0 when none), in bytes, 256-byte aligned parts. The
// caller allocates it on the call's device (any memory the stream may use; contents need not
// be initialized) and keeps it alive until the stream reaches the end of the call.
size_t scatter_cuda_workspace_bytes(const ScatterArgs& args, const ScatterPlan& plan);

// `stream` is a cudaStream_t. Asynchronous. kNotCompiled in builds without CUDA.
Status scatter_cuda(const ScatterArgs& args, const ScatterPlan& plan, void* workspace,
                    size_t workspace_bytes, void* stream, ErrorDetail* err);

}  // namespace stridewise
