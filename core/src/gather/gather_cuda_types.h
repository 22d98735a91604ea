// The CUDA gather kernels' own types (gather_cuda_impl.h, gather_cuda_tile.h): the kernel
// choice, the error site, the operands, the 32-bit offset rule and the launch-type dispatch
// (over common/launch_dispatch.h's);
// what all families share is in common/kernel_common.h. Host and device compilable; no
// __global__ code, no CUDA runtime calls (the host emulation test includes it).
#pragma once

#include <algorithm>
#include <cstdint>
#include <limits>
#include <string>
#include <type_traits>

#include "common/kernel_common.h"
#include "common/launch_dispatch.h"
#include "stridewise/cuda_errors.h"
#include "stridewise/gather.h"
#include "stridewise/indexed_op.h"
#include "stridewise/offset_calc.h"

namespace stridewise {
namespace cuda_gather {

using namespace cuda_common;  // NOLINT: the shared launch constants, units and helpers

constexpr int kMaxGroup = 32;  // rows: at most one warp per row tile

// Which kernel run_gather takes: kAuto picks by layout; the others force one where the
// layout allows it (kPlain: the elems kernel in plan order, without block_loop; kElems: the
// elems kernel blocked but never banded).
enum class KernelChoice : int { kAuto, kElems, kPlain, kTile };

// "auto" / "elems" / "plain" / "tile"; false for anything else.
inline bool parse_kernel_choice(const char* s, KernelChoice* c) {
  const std::string v = s ? s : "";
  if (v.empty() || v == "auto")
    *c = KernelChoice::kAuto;
  else if (v == "elems")
    *c = KernelChoice::kElems;
  else if (v == "plain")
    *c = KernelChoice::kPlain;
  else if (v == "tile")
    *c = KernelChoice::kTile;
  else
    return false;
  return true;
}

// Where a bad index is reported. `size` is self.sizes[dim]: valid values are [0, size), or
// [-size, size) when `wraps` (wrap_index).
struct ErrorSite {
  CudaErrorRecord* rec;  // device view of this device's mapped record (null when emulated)
  int64_t dim;
  int64_t size;
  int32_t op = static_cast<int32_t>(OpCode::kGather);  // GatherArgs::op, as the record stores it
  bool wraps = false;                                  // GatherArgs::wraps
};

// The operands every gather kernel takes (a base of ElemsArgs, RowsArgs and TileArgs).
template <typename IdxT>
struct GatherOperands {
  void* out;
  const void* self;
  const IdxT* index;
  ErrorSite site;
};

template <typename IdxT>
inline GatherOperands<IdxT> gather_operands(const GatherArgs& args, const ErrorSite& site) {
  return {args.out.data, args.self.data, static_cast<const IdxT*>(args.index.data), site};
}

// ---- host side: offset width and template dispatch -------------------------------------

// acc += (n - 1) * stride; false once acc would pass 2^31 - 1 (checked before multiplying).
inline bool add_span(int64_t& acc, int64_t n, int64_t stride) {
  if (n <= 1 || stride == 0) return true;
  if (stride < 0 || stride > (kI32Max - acc) / (n - 1)) return false;
  acc += (n - 1) * stride;
  return true;
}

// True when every offset `loop` forms for every operand, plus self's reach through index
// values and `extra` units past each out/self run start, fits 31 bits.
inline bool fits_u32(const LoopPlan<3>& loop, int64_t dim_size, int64_t self_dim_stride,
                     int64_t extra) {
  if (extra > kI32Max) return false;
  for (int k = 0; k < 3; ++k) {
    int64_t acc = k == kGatherIndex ? 0 : extra;
    for (int d = 0; d < loop.rank; ++d)
      if (!add_span(acc, loop.sizes[d], loop.strides[k][d])) return false;
    if (k == kGatherSelf && !add_span(acc, dim_size, self_dim_stride)) return false;
  }
  return true;
}

// Offset capacities: 4, 12 and 25 dims (the common layouts; TensorIterator's limit) and
// kMaxRank.
using Buckets = DimBuckets<4, 12, 25, kMaxRank>;

// The three choices every launch makes, nested: f(Tag<unit or element>, Tag<IdxT>, Tag<I>,
// integral_constant<D>) (I and D: common/launch_dispatch.h).
template <typename F>
Status with_launch_types(int unit_bytes, bool idx64, bool u32, int rank, F&& f) {
  return with_unit(unit_bytes, [&](auto ut) {
    auto with_index = [&](auto it) {
      return with_offsets(Buckets{}, u32, rank,
                          [&](auto ot, auto dims) { return f(ut, it, ot, dims); });
    };
    return idx64 ? with_index(Tag<int64_t>{}) : with_index(Tag<int32_t>{});
  });
}

}  // namespace cuda_gather
}  // namespace stridewise
