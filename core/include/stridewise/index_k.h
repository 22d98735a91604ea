// Indexing through k index tensors at once: index.Tensor (x[i], x[:, i], x[i, j], x[mask]),
// index_put_ (x[i] = v, x[i] += v), take, put, and embedding_dense_backward where its index
// dims do not flatten to one (out[idx] += grad, or its mean). The same descriptor as
// gather/scatter with k indexed dims instead of one (indexed_op.h: role read or write, combine
// copy, add or mean).
//
// Every operand is a view over one iteration shape (the result's shape for index/take, the
// broadcast values' shape for index_put_/put). For each position p of that shape:
//
//   off(p) = self(p) + sum_j term_j(p)
//   read  (index, take):      out[p] = self_data[off(p)]
//   write (index_put_, put):  self_data[off(p)] = src[p]      (combine copy)
//                             self_data[off(p)] += src[p]     (combine add)
//   write, combine mean:      self_data[e] = (sum of src[p] over the positions p with
//                             off(p) = e) / their count, for every element e some position
//                             reaches; the others keep their value (include_self = false:
//                             e's prior value takes no part; embedding_dense_backward's
//                             scale_grad_by_freq, which needs no self)
//
// where self(p) is `self` restrided onto the iteration shape (the dims the index tensors do
// not address map onto the result's dims; stride 0 along the broadcast index dims), and:
//  - IndexMode::kSum (index, index_put_, index_fill): term j reads index[j][p] = v, valid in
//    [lo, term_size[j]), wrapped when negative; term_j = v * term_stride[j]. lo is
//    -term_size[j] when the descriptor wraps (IndexedOpDesc::wraps: ATen's index, index_put_,
//    index_fill), else 0 (embedding_dense_backward).
//    Each index[j] is a view over the iteration shape (broadcast index tensors: stride 0).
//  - IndexMode::kUnravel (take, put): k = 1; v = index[0][p] is a position in `flat`'s
//    logical (row-major) order, valid in [lo, flat.numel()) (lo = -flat.numel() when the
//    descriptor wraps, as take/put's does), wrapped; term_0 = the
//    offset of that position, unravelled over `target`'s sizes and strides (any strides: a
//    non-contiguous self is never reshaped or copied). `self` then has all strides 0.
//
// Contract (the adapter checks ATen's rules and wording first):
//  - 1 <= k <= kMaxIndexTerms; every operand has the iteration shape's rank and sizes; index
//    dtypes are kInt32 or kInt64 (each index[j] its own); out/src/self share one dtype.
//  - read: out overlaps nothing else and no two out positions share memory.
//  - write: self is written in place; it overlaps neither src nor an index, and self's
//    own view (`target`) has no internal overlap unless the write is order-free (below):
//    then positions that share memory store the same bytes (ATen's index_fill_ writes an
//    expanded self, with a deprecation warning the adapter raises). Over an empty target
//    self's data may be null (nothing is addressed: every index value is out of range, or
//    nothing iterates).
//  - mean: write only, include_self = false, src given (not a value); else kUnsupported
//    (include_self) or kInvalidArgument. Every index stride is 0 along the dims where self's
//    restrided view moves (as the adapter's views have them; else kInvalidArgument), so two
//    positions meet only through the broadcast dims (IndexKPlan::seq), and an element's count
//    is the number of seq positions whose terms reach it.
//  - Any strides (including 0) on every operand; nothing is ever copied.
// Bad index values are never used to address memory. Read: CPU returns kIndexOutOfRange with
// the first bad element in plan order (out may be partly written, as with ATen); CUDA skips
// it and records it (cuda_errors.h). Write: a call that meets a bad value writes nothing
// (CPU checks every value first; CUDA runs a validation pass and a per-call abort word, as
// the scatter family does). ErrorDetail: dim = term_dim[j] (kUnravel: -1), value = the value
// as given (unwrapped), lo = desc.lowest_index(size), hi = size.
// Determinism: the CPU writes in the iteration's row-major order on one thread, so the last
// writer in index order wins and sums add in index order. CUDA with `deterministic` set and a
// write that could meet duplicates sorts the targets (stable) and walks each element's writers
// in index order, in pieces of at most 64 sorted positions combined in a fixed order (the
// sorted path's back half, core/src/common/segments.h): the same result on every run (sums in
// the accumulation type, rounded once). An order-free write (one value copied to every position:
// combine copy with has_value, or with a src whose every stride is 0 (one element); index_fill's
// and x[i] = scalar's) stores the same bytes
// whichever writer lands last, so it needs no order: the CPU writes it in parallel and CUDA
// never sorts it, deterministic or not.
// Accumulation: CPU adds in the storage type in index order, as ATen's CPU kernel does. CUDA
// adds float32/64, complex and int32/64 with atomics on self, except over rows long enough to
// pay for a sort (2^20 elements in all, rows of 32: the sorted path, as scatter's segment
// path); float16/bfloat16 (in float32) and the narrow integers (in int32) always go through the
// sorted path, so each element is rounded once (ATen's CUDA kernel rounds at every add).
// Mean, on both devices the same arithmetic and order, so CPU and CUDA agree bitwise wherever
// an element's writers lie within one piece of the CUDA walk (64 sorted positions; else the
// pieces' sums are added in piece order, within the float64 rule of the CPU's result): the seq
// positions sorted by their terms, stably (CPU: std::stable_sort; CUDA: CUB's radix sort, the
// sorted path, taken by every mean), each element's writers walked in index order, summed in
// the accumulation type (arith::AccOf: float32 for float16/bfloat16) from +0, divided
// once by their count (the run's length; floor division for integers, the narrow ones' sum
// wrapped first, as scatter_reduce's mean) and rounded once. So a mean is as close to a
// float64 reference as ATen CUDA's (float32 sum, rounded once); ATen CPU's (1/count-scaled
// terms added per step in the storage type) is as far in float32 and farther in
// float16/bfloat16. Bitwise repeatable on every run, deterministic mode or not, and on the CPU
// whatever the executor's chunks; no atomics, no host synchronization. The CPU's write pass
// allocates host scratch: four int64 per seq position (offsets, sorted order, run starts), two
// per row position (IndexKPlan::row), and one accumulator per row position per chunk.
#pragma once

#include <cstddef>
#include <cstdint>

#include "stridewise/cpu_exec.h"
#include "stridewise/gather.h"
#include "stridewise/indexed_op.h"
#include "stridewise/layout.h"
#include "stridewise/status.h"
#include "stridewise/view.h"

namespace stridewise {

// Index tensors one call takes (x[i, j, k, l]; a bool mask over m dims counts m). More falls
// back to ATen (the adapter counts it).
constexpr int kMaxIndexTerms = 4;

enum class IndexMode : uint8_t { kSum, kUnravel };

struct IndexKArgs {
  StridedView out;   // read: the result (iteration shape). write: unused
  StridedView self;  // the indexed tensor, restrided onto the iteration shape
  StridedView src;   // write: the values over the iteration shape (stride 0 = broadcast)
  // write: src is one value at every position instead (a Python scalar's: no device copy), its
  // bytes in self's dtype; src's view then only gives the iteration shape (no data).
  bool has_value = false;
  alignas(16) unsigned char value[16] = {};
  // self as a tensor: its own sizes and strides, data = self.data. kUnravel: what a position
  // is unravelled over. Write: the overlap check and the CUDA workspace's span. Read, kSum:
  // unused.
  StridedView target;
  int k = 1;
  StridedView index[kMaxIndexTerms];
  int64_t term_size[kMaxIndexTerms] = {};    // kSum: self.size(d_j)
  int64_t term_stride[kMaxIndexTerms] = {};  // kSum: self.stride(d_j)
  int64_t term_dim[kMaxIndexTerms] = {};     // kSum: d_j, for error reports
  IndexMode mode = IndexMode::kSum;
  IndexedOpDesc desc{OpCode::kIndex, IndexRole::kRead, Combine::kCopy, true};
  bool deterministic = false;
};

// Operand order in the plan: the written operand first (the planner walks it in memory order).
enum IndexKOperand : int { kIkWritten = 0, kIkOther = 1, kIkIndex0 = 2 };
constexpr int kIkOperands = 2 + kMaxIndexTerms;

struct IndexKPlan {
  // Over the iteration shape: operands (written, other, index_0 .. index_{K-1}); read:
  // written = out, other = self; write: written = self, other = src. Unused index slots have
  // stride 0.
  LoopPlan<kIkOperands> loop;
  // loop without the dims along which every index stride is 0: one position per distinct set
  // of index elements, what a write's validation pass reads (CUDA reports positions in this
  // order).
  LoopPlan<kIkOperands> check;
  // kUnravel: target's dims, fastest first, in logical order (only merged, never reordered),
  // for the offset calculator that unravels a position.
  LoopPlan<1> unravel;
  int64_t flat_numel = 0;  // kUnravel: target.numel()
  // Vector width in elements (1 = scalar): the fastest planned dim has every index stride 0,
  // unit stride in out/self (or self/src), and vec divides every size/stride it must.
  int vec = 1;
  // Write: whether two positions could reach one element (a planned dim along which self's
  // restrided view does not move); false: a deterministic CUDA write needs no sort.
  bool may_collide = true;
  // Write: one value copied to every position (combine copy; has_value, or src one element
  // seen with stride 0 everywhere): every writer of an element stores the same bytes, so the
  // order of writers never shows (see Determinism).
  bool order_free = false;
  // Write: the iteration in index (row-major) order, its dims merged only where every operand
  // allows (the CPU's write pass walks it).
  LoopPlan<kIkOperands> ordered;
  // Write, for the sorted path (CUDA): `ordered` split
  // into `seq`, the dims along which self's base does not move (the broadcast dims: only
  // through them do two positions reach one element), and `row`, the rest, walked under each
  // sorted position.
  LoopPlan<kIkOperands> seq;
  LoopPlan<kIkOperands> row;
};

// Validates the contract above (cheap, host only) and plans the loops.
Status plan_index_k(const IndexKArgs& args, IndexKPlan* plan, ErrorDetail* err);

// Whether the core runs this dtype with this combine (copy: every sized dtype; add and mean:
// as scatter_supports).
bool index_k_supports(DType t, Combine c);

// A read through one index tensor (index.Tensor's x[i], x[:, i], ...; k = 1, kSum) is a gather
// over views: out[p] = self_data[self(p) + index[p] * term_stride]. Pick a dim d of the
// iteration shape along which self's restrided view does not move (a broadcast index dim; else
// a size-1 dim appended to every operand): gather's self is `self` with stride term_stride and
// size term_size along d, index is index[0], dim is d; it wraps (ATen's index rule) and reports
// term_dim. True with *g filled for such a read; false for every other call. Any d works: self's
// stride along it is 0, so the offset gather drops there is 0. The CUDA read runs it (the gather
// family's rows, tile and banded kernels instead of the elementwise walk: one kernel for
// x[i] and index_select).
bool index_k_as_gather(const IndexKArgs& args, GatherArgs* g);

// As with gather, the plan-taking forms require the plan of a successful plan_index_k on these
// very args.
Status index_k_cpu(const IndexKArgs& args, const IndexKPlan& plan, const CpuExecutor& exec,
                   ErrorDetail* err);

// CUDA: device workspace in bytes (0 when none): the sorted path's keys, values and CUB's
// temporary storage, and an accumulating sorted path's carry (2 x row elements per 64 sorted
// positions, in the accumulation type). Same rules as scatter_cuda_workspace_bytes.
size_t index_k_cuda_workspace_bytes(const IndexKArgs& args, const IndexKPlan& plan);

// `stream` is a cudaStream_t. Asynchronous. kNotCompiled in builds without CUDA.
Status index_k_cuda(const IndexKArgs& args, const IndexKPlan& plan, void* workspace,
                    size_t workspace_bytes, void* stream, ErrorDetail* err);

}  // namespace stridewise
