// What every CUDA kernel family (gather/, scatter/, index_k/) shares below its own bodies:
// launch constants, copy units, the bad-index report type, the call's abort word, the value
// scalar, index loads, grid sizes and the per-size unit dispatch. Host and device compilable;
// no __global__ code, no CUDA runtime calls (the host emulation tests include it). The launch
// dispatcher over offset width and rank is in launch_dispatch.h; the host entry's setup and
// teardown in cuda_call.h.
#pragma once

#include <vector_types.h>  // uint4

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <limits>

#include "common/elem_types.h"
#include "stridewise/offset_calc.h"
#include "stridewise/status.h"

#if defined(__CUDA_ARCH__)
#define SW_LDG(p) __ldg(p)  // read-only path: inputs never alias the written operand (contract)
#define SW_HOST_ZERO(arr)
#else
#define SW_LDG(p) (*(p))
// Host compilers cannot see that each buf[u] is read only under the predicate that wrote
// it (-Wmaybe-uninitialized); the device pass keeps the registers uninitialized.
#define SW_HOST_ZERO(arr) \
  for (auto& x_ : arr) x_ = {}
#endif

namespace stridewise {
namespace cuda_common {

constexpr int kThreads = 256;                     // threads per block, every elementwise kernel
constexpr int kUnroll = 4;                        // independent elements/units per thread
constexpr int64_t kMaxBlocks = int64_t(1) << 20;  // grid cap; bodies grid-stride past it
constexpr int64_t kI32Max = std::numeric_limits<int32_t>::max();

using elem::Tag;

// Copy units: kernels move bytes, never interpret them (per size, not per dtype).
template <int B>
struct UnitOf;
template <>
struct UnitOf<1> {
  using type = unsigned char;
};
template <>
struct UnitOf<2> {
  using type = unsigned short;
};
template <>
struct UnitOf<4> {
  using type = unsigned int;
};
template <>
struct UnitOf<8> {
  using type = unsigned long long;
};
template <>
struct UnitOf<16> {
  using type = uint4;
};

// The first bad index value one thread met, and its position in the walk's order.
struct BadIndex {
  bool any = false;
  int64_t value = 0;
  int64_t position = 0;
};

// A write call's abort word (cuda_errors.h): raised when *word == gen. Read calls carry a
// null word and never test it.
struct Abort {
  int64_t* word = nullptr;
  int64_t gen = 0;
};

SW_HOST_DEVICE SW_INLINE bool aborted(const Abort& a) {
  return *static_cast<const volatile int64_t*>(a.word) == a.gen;
}

// A scalar operand (the value form's value, alpha) in the written operand's dtype: a kernel
// parameter, since it is host memory. A vector unit's value repeats the element's bytes.
struct Value {
  alignas(16) unsigned char b[16];
};

// The value's bytes as a T (an element, or a vector unit of them).
template <typename T>
SW_HOST_DEVICE SW_INLINE T value_as(const Value& v) {
  T t;
  memcpy(&t, v.b, sizeof t);
  return t;
}

// Index element `off` (elements) of an int32 or int64 index, widened; one runtime branch.
template <typename I>
SW_HOST_DEVICE SW_INLINE int64_t load_index(const void* base, I off, bool idx64) {
  if (idx64) return static_cast<int64_t>(SW_LDG(static_cast<const int64_t*>(base) + off));
  return static_cast<int64_t>(SW_LDG(static_cast<const int32_t*>(base) + off));
}

// ---- host side ---------------------------------------------------------------------------

inline int64_t ceil_div(int64_t a, int64_t b) {
  return (a + b - 1) / b;
}

// Largest power of two <= 16 dividing x (x == 0: 16).
inline int pow2_unit(uint64_t x) {
  int g = 16;
  while (x % static_cast<uint64_t>(g) != 0) g /= 2;
  return g;
}

inline uint64_t addr(const void* p) {
  return static_cast<uint64_t>(reinterpret_cast<uintptr_t>(p));
}

// Workspace parts start on 256-byte boundaries (CUB's temporary storage asks for that).
inline int64_t align256(int64_t b) {
  return (b + 255) / 256 * 256;
}

// Blocks for n items, per_block to a block: at least 1, at most kMaxBlocks (the bodies
// grid-stride past the cap).
inline unsigned grid_for(int64_t n, int64_t per_block = kThreads) {
  return static_cast<unsigned>(std::max<int64_t>(1, std::min(ceil_div(n, per_block), kMaxBlocks)));
}

// f(Tag<unit>) for a unit of `bytes` (1, 2, 4, 8, 16); kUnsupported otherwise.
template <typename F>
Status with_unit(int bytes, F&& f) {
  switch (bytes) {
    case 1:
      return f(Tag<UnitOf<1>::type>{});
    case 2:
      return f(Tag<UnitOf<2>::type>{});
    case 4:
      return f(Tag<UnitOf<4>::type>{});
    case 8:
      return f(Tag<UnitOf<8>::type>{});
    case 16:
      return f(Tag<UnitOf<16>::type>{});
    default:
      return Status::kUnsupported;
  }
}

}  // namespace cuda_common
}  // namespace stridewise
