// What the CPU walkers (gather_cpu.cpp, scatter_cpu*.cpp, index_k_cpu.cpp) share: the chunk
// grain, unaligned element loads and stores, the index load and the first-bad-position
// publication.
#pragma once

#include <atomic>
#include <cstdint>
#include <cstring>
#include <limits>

namespace stridewise {
namespace cpu_common {

// Elements per parallel chunk: big enough that thread start-up is noise next to the copy.
constexpr int64_t kGrain = 32768;
// first_bad's value while no chunk met a bad index.
constexpr int64_t kNoError = std::numeric_limits<int64_t>::max();

// Operands are walked with byte strides: any address, so memcpy (one load or store).
template <typename T>
inline T load(const char* p) {
  T v;
  std::memcpy(&v, p, sizeof v);
  return v;
}

template <typename T>
inline void store(char* p, const T& v) {
  std::memcpy(p, &v, sizeof v);
}

// An int32 or int64 index element, widened.
inline int64_t load_index(const char* p, bool i64) {
  return i64 ? load<int64_t>(p) : static_cast<int64_t>(load<int32_t>(p));
}

// word = min(word, pos), atomically. Each chunk walks its positions in increasing order and
// publishes its first bad one, so the minimum over chunks is the first bad position in plan
// order whatever the chunking: the report does not depend on the thread count.
inline void publish_min(std::atomic<int64_t>& word, int64_t pos) {
  int64_t cur = word.load(std::memory_order_relaxed);
  while (pos < cur && !word.compare_exchange_weak(cur, pos, std::memory_order_relaxed)) {
  }
}

}  // namespace cpu_common
}  // namespace stridewise
