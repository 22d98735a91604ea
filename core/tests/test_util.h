// Shared helpers for the core tests: guarded allocations, random strided layouts, an
// obvious reference gather and executors that chunk work adversarially.
//
// Everything here is deliberately independent of the planner: layouts are built from
// logical sizes and the reference walks logical coordinates (last dim fastest).
#pragma once

#include <cstddef>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "stridewise/cpu_exec.h"
#include "stridewise/gather.h"
#include "stridewise/view.h"

namespace swt {

using stridewise::DType;
using stridewise::StridedView;

// Buffer whose last byte sits immediately before a PROT_NONE page, so any read or write
// past the end faults. (Reads before the start are not caught; nothing here needs that.)
class GuardedBuffer {
 public:
  GuardedBuffer() = default;
  explicit GuardedBuffer(size_t bytes);
  ~GuardedBuffer();
  GuardedBuffer(GuardedBuffer&& o) noexcept;
  GuardedBuffer& operator=(GuardedBuffer&& o) noexcept;
  GuardedBuffer(const GuardedBuffer&) = delete;
  GuardedBuffer& operator=(const GuardedBuffer&) = delete;

  unsigned char* data() const { return data_; }
  size_t size() const { return bytes_; }

 private:
  void release();
  void* map_ = nullptr;
  size_t map_len_ = 0;
  unsigned char* data_ = nullptr;
  size_t bytes_ = 0;
};

using Rng = std::mt19937_64;

inline int64_t rand_int(Rng& rng, int64_t lo, int64_t hi) {  // inclusive
  return std::uniform_int_distribution<int64_t>(lo, hi)(rng);
}
inline bool coin(Rng& rng, double p) {
  return std::uniform_real_distribution<double>()(rng) < p;
}

// Seed for a test run: STRIDEWISE_TEST_SEED if set, else fresh; printed on failure by callers.
uint64_t test_seed();

struct LayoutOpts {
  bool allow_expand = true;   // stride 0 on some dims (never for written operands)
  bool allow_overlap = true;  // arbitrary small strides (as_strided-like), inputs only
  bool compact = false;       // no step slices or padding (keeps high-rank storages small)
};

// Row-major contiguous strides.
std::vector<int64_t> contiguous_strides(const std::vector<int64_t>& sizes);

// Random strides for `sizes`: permuted dim order (transposes/permutes), step slices,
// padding (narrowed dims), expands, optional overlapping strides. Strides in elements.
std::vector<int64_t> random_strides(Rng& rng, const std::vector<int64_t>& sizes,
                                    const LayoutOpts& opts);

// Highest element offset reachable (0 for empty or rank 0).
int64_t max_offset(const std::vector<int64_t>& sizes, const std::vector<int64_t>& strides);
int64_t numel(const std::vector<int64_t>& sizes);

// A strided view over a guarded storage that ends right after the last reachable
// element; `offset` elements of storage precede element (0, ..., 0).
struct TestTensor {
  GuardedBuffer storage;
  StridedView view;
  int64_t offset = 0;
  int esize = 1;

  unsigned char* base() const { return storage.data(); }
  size_t storage_bytes() const { return storage.size(); }
};

TestTensor make_tensor(DType dtype, const std::vector<int64_t>& sizes,
                       const std::vector<int64_t>& strides, int64_t offset);
TestTensor make_random_tensor(Rng& rng, DType dtype, const std::vector<int64_t>& sizes,
                              const LayoutOpts& opts);

// Fills storage with random bytes that are never 0 and never `poison`.
void fill_random_bytes(Rng& rng, TestTensor& t, unsigned char poison = 0xAB);
// Fills every storage element of an int32/int64 tensor with values in [lo, hi].
void fill_index(Rng& rng, TestTensor& t, int64_t lo, int64_t hi);
void poison(TestTensor& t, unsigned char byte = 0xAB);

int64_t read_index(const StridedView& v, int64_t elem_offset);
void write_index(const StridedView& v, int64_t elem_offset, int64_t value);

// Logical coordinate walk (last dim fastest): element offset of position `linear`.
int64_t offset_of(const StridedView& v, int64_t linear);

// The obvious gather: returns the bytes the whole out storage must hold afterwards, given
// its bytes before (`before`). Requires every index value to be valid.
std::vector<unsigned char> reference_gather(const StridedView& out, const StridedView& self,
                                            const StridedView& index, int64_t dim,
                                            const unsigned char* out_base, size_t out_bytes,
                                            const unsigned char* out_before);

// Empty string when equal, else a description of the first differing byte.
std::string diff_bytes(const unsigned char* got, const unsigned char* want, size_t n);

// Executor that cuts [0, n) into random chunks of 1..max_chunk (ignoring grain), and runs
// them in shuffled order on `threads` threads. For determinism and chunk-boundary tests.
struct ChunkyExec {
  ChunkyExec(uint64_t seed, int64_t max_chunk, int threads);
  stridewise::CpuExecutor exec() const;
  uint64_t seed;
  int64_t max_chunk;
  int threads;
};

std::string shape_str(const std::vector<int64_t>& v);

// A gather problem over guarded storages: self/index random inputs (expands, overlaps,
// transposes, slices, offsets), out a random non-overlapping layout. Index values are valid.
struct GatherCase {
  TestTensor self, index, out;
  int64_t dim = 0;
  stridewise::GatherArgs args() const;
  std::string describe() const;
};

struct GatherCaseOpts {
  int64_t max_numel = 2000;
  bool allow_empty = false;
};

GatherCase random_gather_case(Rng& rng, DType dtype, DType index_dtype, int rank,
                              const GatherCaseOpts& opts);
GatherCase gather_case(DType dtype, DType index_dtype, int64_t dim,
                       const std::vector<int64_t>& self_sizes,
                       const std::vector<int64_t>& self_strides,
                       const std::vector<int64_t>& index_sizes,
                       const std::vector<int64_t>& index_strides,
                       const std::vector<int64_t>& out_strides);

}  // namespace swt
