// Advanced-indexing problems for the core tests (CPU, host emulation, GPU): random layouts of
// every operand, k index tensors broadcast over one shape (negative values where the descriptor
// wraps, drawn at random), or take/put's flat
// positions; the views the adapter would build; an obvious reference over logical coordinates
// (no planner).
#pragma once

#include <string>
#include <vector>

#include "stridewise/index_k.h"
#include "test_util.h"

namespace swt {

struct IndexKCase {
  TestTensor self, dense;  // dense: out (read) or src (write)
  std::vector<TestTensor> idx;
  std::vector<int64_t> dims;    // kSum: indexed dims of self (adjacent, from `first`)
  std::vector<int64_t> shape;   // iteration shape
  std::vector<int64_t> bshape;  // the index tensors' broadcast shape
  int64_t first = 0;
  stridewise::IndexKArgs args;
  std::string describe() const;
};

// Copy: any dtype. Add: float32 (the reference adds in index order) or int32 (exact in any
// order). Mean (include_self = false, never a value): float32 or int32, small integers, so
// each sum is exact and its one division (floor division for int32) is the only rounding.
IndexKCase make_index_k_case(Rng& rng, DType dt, stridewise::IndexMode mode,
                             stridewise::IndexRole role, stridewise::Combine comb);

// index_fill's shape of write: self (any layout, expanded ones included: the write is
// order-free) filled with one value at a 1-D index (duplicates, wrapped negatives) along one dim;
// the index seen with stride 0 along every other dim, self restrided with stride 0 on that dim.
// rows: self contiguous (2..5, 16), filled along dim 0 with a value given as bytes, so its
// rows store in vector units (pick_vec replicates a value, not a tensor's one element).
IndexKCase make_fill_case(Rng& rng, DType dt, bool rows = false);

// The storage bytes self (write) or out (read) must hold afterwards.
std::vector<unsigned char> index_k_reference(const IndexKCase& c);

// Whether two positions reach one element of self (then a CUDA copy's winner is unspecified).
bool index_k_has_duplicates(const IndexKCase& c);

// A directed mean (embedding_dense_backward's descriptor: include_self = false, values in
// [0, n)): self holds n float16 or float32 elements 5, 7, 9, ..; src's values are written at
// the elements `idx` names, in that (index) order.
IndexKCase mean_case(DType dt, int64_t n, const std::vector<float>& src,
                     const std::vector<int64_t>& idx);
// Element e of a mean_case's self, as a float.
float mean_case_at(const IndexKCase& c, int64_t e);

// The directed means both the CPU test and the CUDA emulation check (the same values, so CPU
// and CUDA agree bitwise on them): float16 [2048, 1, 1] onto one element sums to 2050 in
// float32 and 683.33.. rounds to 683.5 (per-step float16 rounding, 2048 + 1 = 2048, gives
// 682.5); float32 [1, 1e8, -1e8] is 0 in index order (1 + 1e8 rounds to 1e8), 1/3 in any
// other. An element nobody writes keeps its value.
struct DirectedMean {
  DType dt;
  std::vector<float> src;
  std::vector<int64_t> idx;
  std::vector<float> out;
};
std::vector<DirectedMean> directed_means();

// Puts `value` into one random element of index tensor j; returns the limit |value| breaks.
int64_t plant_bad_index(Rng& rng, IndexKCase& c, int j, bool high);

}  // namespace swt
