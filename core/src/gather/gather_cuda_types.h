// The CUDA gather kernels' own types (gather_cuda_impl.h, gather_cuda_tile.h): the kernel
// choice, the error site, the operands, the 32-bit offset rule and the launch-type dispatch;
// what all families share is in common/kernel_common.h. Host and device compilable; no
// __global__ code, no CUDA runtime calls (the host emulation test includes it).
#pragma once

#include <algorithm>
#include <cstdint>
#include <limits>
#include <string>
#include <type_traits>

#include "common/kernel_common.h"
#include "stridewise/cuda_errors.h"
#include "stridewise/gather.h"
#include "stridewise/offset_calc.h"

namespace stridewise {
namespace cuda_gather {

using namespace cuda_common;  // NOLINT: the shared launch constants, units and helpers

constexpr int kMaxGroup = 32;  // rows: at most one warp per row tile

// Which kernel run_gather takes: kAuto picks by layout; the others force one where the
// layout allows it (kPlain: the elems kernel in plan order, without block_loop).
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

// Where a bad index is reported. `size` is self.sizes[dim]: valid values are [0, size).
struct ErrorSite {
  CudaErrorRecord* rec;  // device view of this device's mapped record (null when emulated)
  int64_t dim;
  int64_t size;
  int32_t op = static_cast<int32_t>(OpCode::kGather);  // GatherArgs::op, as the record stores it
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

// Smallest OffsetCalculator capacity that holds `rank` dims.
template <typename F>
Status with_dims(int rank, F&& f) {
  if (rank <= 4) return f(std::integral_constant<int, 4>{});
  if (rank <= 12) return f(std::integral_constant<int, 12>{});
  if (rank <= 25) return f(std::integral_constant<int, 25>{});
  return f(std::integral_constant<int, kMaxRank>{});
}

template <typename F>
Status with_index_offset(bool idx64, bool u32, F&& f) {
  if (idx64) return u32 ? f(Tag<int64_t>{}, Tag<uint32_t>{}) : f(Tag<int64_t>{}, Tag<int64_t>{});
  return u32 ? f(Tag<int32_t>{}, Tag<uint32_t>{}) : f(Tag<int32_t>{}, Tag<int64_t>{});
}

// The three choices every launch makes, nested: f(Tag<unit or element>, Tag<IdxT>, Tag<I>,
// integral_constant<D>).
template <typename F>
Status with_launch_types(int unit_bytes, bool idx64, bool u32, int rank, F&& f) {
  return with_unit(unit_bytes, [&](auto ut) {
    return with_index_offset(idx64, u32, [&](auto it, auto ot) {
      return with_dims(rank, [&](auto dims) { return f(ut, it, ot, dims); });
    });
  });
}

}  // namespace cuda_gather
}  // namespace stridewise
