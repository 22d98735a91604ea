// gather on the CPU; see gather.h for the contract.
//
// One kernel per (element size, index type): gather moves bytes, so the dtype only matters
// through its size. The planned loop nest (plan_gather) is walked row by row: a row is the
// fastest planned dim, walked with byte strides; the slower dims advance as an odometer, so
// the only divisions are the ones that place a chunk's first position.
//
// Bad index values: every value is checked before it forms an address. A chunk stops at
// its first bad value and publishes the position with an atomic min; since each chunk
// walks positions in increasing order, the minimum over chunks is the first bad position
// in plan order whatever the chunking, so the report does not depend on the thread count.
#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstring>
#include <limits>

#include "common/cpu_common.h"
#include "stridewise/gather.h"
#include "stridewise/indexed_op.h"

namespace stridewise {
namespace {

using cpu_common::kGrain;
using cpu_common::kNoError;
using cpu_common::load;
using cpu_common::publish_min;

struct Job {
  int rank = 1;  // planned rank, at least 1 (a one-element plan is a row of length 1)
  int64_t sizes[kMaxRank] = {};
  int64_t bstrides[3][kMaxRank] = {};  // byte strides per operand (GatherOperand order)
  char* out = nullptr;
  const char* index = nullptr;
  const char* self = nullptr;
  int64_t self_dim_bstride = 0;
  int64_t self_dim_size = 0;
  bool wraps = false;
  std::atomic<int64_t> first_bad{kNoError};
};

// Copies `n` elements of one row. Returns the offset in the row of the first bad index
// value (nothing at or after it is written), or -1.
template <int E, typename Idx>
int64_t gather_row(const Job& j, char* o, const char* ip, const char* s, int64_t n) {
  const int64_t so = j.bstrides[kGatherOut][0];
  const int64_t si = j.bstrides[kGatherIndex][0];
  const int64_t ss = j.bstrides[kGatherSelf][0];
  const int64_t size = j.self_dim_size;
  if (si == 0) {
    // Expanded index along the row (the seed's layout): one value, one check, one run.
    int64_t v = load<Idx>(ip);
    if (!wrap_index(v, size, j.wraps)) return 0;
    const char* src = s + v * j.self_dim_bstride;
    if (so == E && ss == E) {
      std::memcpy(o, src, static_cast<size_t>(n) * E);
    } else {
      for (int64_t i = 0; i < n; ++i, o += so, src += ss) std::memcpy(o, src, E);
    }
    return -1;
  }
  for (int64_t i = 0; i < n; ++i, o += so, ip += si, s += ss) {
    int64_t v = load<Idx>(ip);
    if (!wrap_index(v, size, j.wraps)) return i;
    std::memcpy(o, s + v * j.self_dim_bstride, E);
  }
  return -1;
}

template <int E, typename Idx>
void gather_range(void* ctx, int64_t begin, int64_t end) {
  Job& j = *static_cast<Job*>(ctx);
  if (j.first_bad.load(std::memory_order_relaxed) < begin) return;

  // Place `begin`: coordinates and byte offsets of the chunk's first position.
  int64_t coord[kMaxRank];
  int64_t off[3] = {0, 0, 0};
  int64_t rest = begin;
  for (int d = 0; d < j.rank; ++d) {
    coord[d] = rest % j.sizes[d];
    rest /= j.sizes[d];
    for (int k = 0; k < 3; ++k) off[k] += coord[d] * j.bstrides[k][d];
  }

  const int64_t n0 = j.sizes[0];
  int64_t pos = begin;
  for (;;) {
    const int64_t n = std::min(n0 - coord[0], end - pos);
    const int64_t bad = gather_row<E, Idx>(j, j.out + off[kGatherOut], j.index + off[kGatherIndex],
                                           j.self + off[kGatherSelf], n);
    if (bad >= 0) {
      publish_min(j.first_bad, pos + bad);
      return;
    }
    pos += n;
    if (pos >= end) return;
    // Next row: rewind dim 0, then carry through the slower dims. pos < end <= numel, so
    // the carry stops before running off the last dim.
    for (int k = 0; k < 3; ++k) off[k] -= coord[0] * j.bstrides[k][0];
    coord[0] = 0;
    for (int d = 1; d < j.rank; ++d) {
      for (int k = 0; k < 3; ++k) off[k] += j.bstrides[k][d];
      if (++coord[d] < j.sizes[d]) break;
      for (int k = 0; k < 3; ++k) off[k] -= j.sizes[d] * j.bstrides[k][d];
      coord[d] = 0;
    }
    // Another chunk already found an earlier bad value; nothing here can be reported.
    if (j.first_bad.load(std::memory_order_relaxed) < pos) return;
  }
}

template <int E>
RangeFn pick_kernel(DType index_dtype) {
  return index_dtype == DType::kInt32 ? &gather_range<E, int32_t> : &gather_range<E, int64_t>;
}

RangeFn pick_kernel(int elem_bytes, DType index_dtype) {
  switch (elem_bytes) {
    case 1:
      return pick_kernel<1>(index_dtype);
    case 2:
      return pick_kernel<2>(index_dtype);
    case 4:
      return pick_kernel<4>(index_dtype);
    case 8:
      return pick_kernel<8>(index_dtype);
    case 16:
      return pick_kernel<16>(index_dtype);
    default:
      return nullptr;
  }
}

}  // namespace

Status gather_cpu(const GatherArgs& args, const CpuExecutor& exec, ErrorDetail* err) {
  GatherPlan plan;
  const Status s = plan_gather(args, &plan, err);
  if (s != Status::kOk) return s;
  return gather_cpu(args, plan, exec, err);
}

Status gather_cpu(const GatherArgs& args, const GatherPlan& plan, const CpuExecutor& exec,
                  ErrorDetail* err) {
  const LoopPlan<3>& L = plan.loop;
  if (L.numel == 0) return Status::kOk;

  const int es = elem_size(args.self.dtype);
  const int is = elem_size(args.index.dtype);
  const RangeFn fn = pick_kernel(es, args.index.dtype);
  if (fn == nullptr) {
    if (err) {
      *err = ErrorDetail{};
      err->status = Status::kUnsupported;
      err->op = args.op;
      err->message = std::string("gather(): unsupported element size for dtype ") +
                     dtype_name(args.self.dtype);
    }
    return Status::kUnsupported;
  }

  Job job;
  job.rank = L.rank > 0 ? L.rank : 1;
  const int64_t unit[3] = {es, is, es};
  for (int d = 0; d < job.rank; ++d) {
    job.sizes[d] = L.rank > 0 ? L.sizes[d] : 1;
    for (int k = 0; k < 3; ++k) job.bstrides[k][d] = L.rank > 0 ? L.strides[k][d] * unit[k] : 0;
  }
  job.out = static_cast<char*>(args.out.data);
  job.index = static_cast<const char*>(args.index.data);
  job.self = static_cast<const char*>(args.self.data);
  job.self_dim_bstride = plan.self_dim_stride * es;
  job.self_dim_size = plan.self_dim_size;
  job.wraps = plan.wraps;

  const CpuExecutor& ex = exec.parallel_for ? exec : serial_cpu_executor();
  ex.parallel_for(ex.self, L.numel, kGrain, fn, &job);

  const int64_t bad = job.first_bad.load();
  if (bad == kNoError) {
    if (err) *err = ErrorDetail{};
    return Status::kOk;
  }
  if (err) {
    const char* p = job.index + plan_offset(L, kGatherIndex, bad) * is;
    *err = ErrorDetail{};
    err->status = Status::kIndexOutOfRange;
    err->op = args.op;
    err->dim = plan.dim;
    err->value = args.index.dtype == DType::kInt32 ? load<int32_t>(p) : load<int64_t>(p);
    err->lo = plan.wraps ? -plan.self_dim_size : 0;
    err->hi = plan.self_dim_size;
    err->position = bad;
    err->message = format_index_error(*err);
  }
  return Status::kIndexOutOfRange;
}

}  // namespace stridewise
