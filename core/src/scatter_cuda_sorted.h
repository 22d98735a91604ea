// The CUDA scatter's sorted-segment deterministic path, for calls whose lines (scatter.h)
// all share one index sequence: the index has stride 0 (or size 1) on every dim but `dim`,
// so lines differ only in their out and src offsets (PyG's aggregation over an expanded
// index, the MoE combine, any 1-D scatter). One thread per line walking line_len steps is
// hopeless when there are few lines; instead, on the call's stream, gated by the abort word:
//  1. sort_keys: keys[i] = index value of step i, vals[i] = i (i in [0, line_len));
//  2. cub::DeviceRadixSort::SortPairs (a DoubleBuffer over two key and two value arrays in
//     the workspace; stable, so equal keys keep index order), bits [0, end_bit);
//  3. sorted_acc (accumulating combines) or sorted_put (copy): a block takes one sorted
//     position i and up to `threads` lines (lines fastest across threads, so a contiguous
//     src row is read coalesced). Unless i starts a segment of equal keys the block has
//     nothing to do; otherwise each thread walks the segment in order (= index order), combining
//     in a register of the accumulation type from out's value (include_self) or the identity,
//     and writes out[line, key] once: mean divides by the count (+1 with self), copy takes
//     the segment's last position (the last writer in index order wins).
// The combination order is the lines kernel's, step for step, so the results are bitwise
// identical to it; no atomics, no accumulator workspace.
//
// Host and device compilable (the host emulation test runs these bodies); no __global__
// code and no CUDA runtime calls. The launches are in scatter_cuda_dispatch.h (Launcher::
// sorted), the kernels and the CUB call in scatter_cuda.cu.
#pragma once

#include <cstdint>

#include "scatter_cuda_impl.h"
#include "stridewise/scatter.h"

namespace stridewise {
namespace cuda_scatter {

// kAuto: the rule of sort_shape; kAlways: whenever the index is shared (tests); kNever: the
// lines kernel always (tests, benchmarks).
enum class SortedChoice : int { kAuto, kNever, kAlways };

// Selection rule (kAuto): deterministic, index shared, line_len >= 2 and either fewer than
// kSortedMaxLines lines (the lines kernel would leave most of the GPU idle) or lines at
// least kSortedMinLen steps long (each line thread would walk that far serially).
constexpr int64_t kSortedMaxLines = int64_t(1) << 16;
constexpr int64_t kSortedMinLen = 1024;

struct SortShape {
  bool use = false;
  int64_t n = 0;      // items: line_len
  int end_bit = 1;    // bits of out_dim_size - 1 (at least 1)
  bool wide = false;  // keys uint64 and positions int64, else uint32 and int32
};

// The index is the same sequence for every line.
inline bool index_shared(const ScatterArgs& a) {
  for (int d = 0; d < a.index.rank; ++d)
    if (d != a.dim && a.index.sizes[d] != 1 && a.index.strides[d] != 0) return false;
  return true;
}

inline SortShape sort_shape(const ScatterArgs& a, const ScatterPlan& p, SortedChoice choice) {
  SortShape s;
  if (!a.deterministic || choice == SortedChoice::kNever) return s;
  if (p.elems.numel == 0 || p.line_len < 2 || !index_shared(a)) return s;
  if (choice == SortedChoice::kAuto && p.lines.numel >= kSortedMaxLines &&
      p.line_len < kSortedMinLen)
    return s;
  s.use = true;
  s.n = p.line_len;
  s.end_bit = 1;
  while (s.end_bit < 64 && (uint64_t(p.out_dim_size - 1) >> s.end_bit) != 0) ++s.end_bit;
  s.wide = p.out_dim_size > (int64_t(1) << 32) || p.line_len > cuda_gather::kI32Max;
  return s;
}

// ---- step 1: keys and positions -------------------------------------------------------------

struct KeysArgs {
  const void* index;
  bool idx64;
  int64_t index_dim_stride;  // elements; every line's index offset is 0 (shared index)
  int64_t n;
  void* keys;  // uint32 / uint64 (wide)
  void* vals;  // int32 / int64 (wide)
  bool wide;
  Abort abort;
};

// A bad value only becomes a key nobody uses: the later kernels are gated by the abort word
// (and sorted_* never address with a key >= size).
SW_HOST_DEVICE SW_INLINE void sort_keys_thread(const KeysArgs& a, int64_t block, int64_t thread,
                                               int64_t grid) {
  for (int64_t i = block * kThreads + thread; i < a.n; i += grid * kThreads) {
    const int64_t v = load_index(a.index, i * a.index_dim_stride, a.idx64);
    if (a.wide) {
      static_cast<uint64_t*>(a.keys)[i] = static_cast<uint64_t>(v);
      static_cast<int64_t*>(a.vals)[i] = i;
    } else {
      static_cast<uint32_t*>(a.keys)[i] = static_cast<uint32_t>(v);
      static_cast<int32_t*>(a.vals)[i] = static_cast<int32_t>(i);
    }
  }
}

// ---- step 2: the sort (CUB on the device, std::stable_sort in the host emulation) ----------

struct SortArgs {
  void* temp;  // CUB's temporary storage
  size_t temp_bytes;
  void* keys[2];  // keys[0], vals[0]: sort_keys' output; the sorted pair ends in keys[sel]
  void* vals[2];
  SortShape shape;
};

// ---- step 3: one write per (segment, line) ---------------------------------------------------

template <typename I, int D>
struct SortedArgs {
  void* out;
  const void* src;  // unused when has_value
  bool has_value;
  Value value;
  Combine combine;
  bool include_self;
  const void* keys;  // sorted
  const void* vals;
  bool wide;
  OffsetCalculator<3, I, D> calc;  // ScatterPlan::lines: (out, index, src)
  I lines;
  int64_t chunks;   // ceil(lines / threads)
  int64_t threads;  // block size: lines per chunk
  int64_t n;        // sorted positions (line_len)
  I out_dim_stride;
  I src_dim_stride;
  int64_t size;  // valid keys are [0, size)
  int units;     // sorted_put: units per element
  Abort abort;
};

SW_HOST_DEVICE SW_INLINE uint64_t sorted_key(const void* k, int64_t i, bool wide) {
  if (wide) return SW_LDG(static_cast<const unsigned long long*>(k) + i);
  return SW_LDG(static_cast<const unsigned int*>(k) + i);
}
SW_HOST_DEVICE SW_INLINE int64_t sorted_val(const void* v, int64_t i, bool wide) {
  if (wide) return SW_LDG(static_cast<const long long*>(v) + i);
  return SW_LDG(static_cast<const int*>(v) + i);
}

// Block b's sorted position and line; false when the thread has nothing to do (no such line,
// or i does not start a segment, or a bad key). Uniform across a block but for the line.
template <typename I, int D>
SW_HOST_DEVICE SW_INLINE bool segment_start(const SortedArgs<I, D>& a, int64_t b, int64_t thread,
                                            int64_t* i, I* line, uint64_t* key) {
  *i = b / a.chunks;
  const int64_t l = (b - *i * a.chunks) * a.threads + thread;
  if (l >= int64_t(a.lines)) return false;
  *line = I(l);
  *key = sorted_key(a.keys, *i, a.wide);
  if (*i > 0 && sorted_key(a.keys, *i - 1, a.wide) == *key) return false;
  return *key < uint64_t(a.size);
}

template <typename T, typename I, int D>
SW_HOST_DEVICE SW_INLINE void sorted_acc_thread(const SortedArgs<I, D>& a, int64_t block,
                                                int64_t thread, int64_t grid) {
  using A = AccOf<T>;
  T* const out = static_cast<T*>(a.out);
  const T* const src = static_cast<const T*>(a.src);
  const A val = a.has_value ? Conv<T>::load(value_as<T>(a.value)) : A{};
  for (int64_t b = block; b < a.n * a.chunks; b += grid) {
    int64_t i;
    I l;
    uint64_t k;
    if (!segment_start(a, b, thread, &i, &l, &k)) continue;
    const Offsets<3, I> o = a.calc.get(l);
    const I t = o.v[kScatterOut] + I(k) * a.out_dim_stride;
    A acc = a.include_self ? Conv<T>::load(out[t]) : Ops<A>::identity(a.combine);
    int64_t j = i;
    do {
      const I s = I(sorted_val(a.vals, j, a.wide));
      acc = combine<A>(
          a.combine, acc,
          a.has_value ? val : Conv<T>::load(src[o.v[kScatterSrc] + s * a.src_dim_stride]));
      ++j;
    } while (j < a.n && sorted_key(a.keys, j, a.wide) == k);
    if (a.combine == Combine::kMean)
      acc = Ops<A>::mean(mean_sum<T>(acc), j - i + (a.include_self ? 1 : 0));
    out[t] = Conv<T>::store(acc);
  }
}

template <typename U, typename I, int D>
SW_HOST_DEVICE SW_INLINE void sorted_put_thread(const SortedArgs<I, D>& a, int64_t block,
                                                int64_t thread, int64_t grid) {
  const I m = I(a.units);
  for (int64_t b = block; b < a.n * a.chunks; b += grid) {
    int64_t i;
    I l;
    uint64_t k;
    if (!segment_start(a, b, thread, &i, &l, &k)) continue;
    int64_t j = i;  // the segment's last position: the last writer in index order
    while (j + 1 < a.n && sorted_key(a.keys, j + 1, a.wide) == k) ++j;
    const Offsets<3, I> o = a.calc.get(l);
    U* const dst = static_cast<U*>(a.out) + (o.v[kScatterOut] + I(k) * a.out_dim_stride) * m;
    const U* const from =
        a.has_value
            ? reinterpret_cast<const U*>(a.value.b)
            : static_cast<const U*>(a.src) +
                  (o.v[kScatterSrc] + I(sorted_val(a.vals, j, a.wide)) * a.src_dim_stride) * m;
    for (I u = 0; u < m; ++u) dst[u] = from[u];
  }
}

// Internal (tests, benchmarks): scatter_cuda_workspace_bytes and scatter_cuda with the sorted
// path's choice given (scatter_cuda itself uses kAuto). Defined in scatter_cuda.cu.
size_t scatter_cuda_workspace_bytes_with(const ScatterArgs& args, const ScatterPlan& plan,
                                         SortedChoice choice);
Status scatter_cuda_with(const ScatterArgs& args, const ScatterPlan& plan, void* workspace,
                         size_t workspace_bytes, void* stream, ErrorDetail* err,
                         SortedChoice choice);

}  // namespace cuda_scatter
}  // namespace stridewise
