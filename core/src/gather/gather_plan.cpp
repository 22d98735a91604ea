// gather argument checks and loop planning; see gather.h for the contract.
//
// Messages follow ATen's wording (ScatterGatherChecks.h) where ATen has a check, so the
// adapter can pass them through unchanged.
#include <cstdint>
#include <string>

#include "stridewise/gather.h"
#include "stridewise/indexed_op.h"

namespace stridewise {
namespace {

using detail::sizes_str;

Status fail(ErrorDetail* err, Status s, const std::string& message) {
  return detail::fail_op(err, OpCode::kGather, s, message);
}

Status check_view(const char* name, const StridedView& v, ErrorDetail* err) {
  return detail::check_operand(OpCode::kGather, "gather()", name, v, err);
}

Status validate(const GatherArgs& a, ErrorDetail* err) {
  Status s;
  if ((s = check_view("self", a.self, err)) != Status::kOk) return s;
  if ((s = check_view("index", a.index, err)) != Status::kOk) return s;
  if ((s = check_view("out", a.out, err)) != Status::kOk) return s;

  const int r = a.self.rank;
  if (a.index.rank != r)
    return fail(err, Status::kInvalidArgument,
                "Index tensor must have the same number of dimensions as input tensor (index " +
                    sizes_str(a.index) + ", self " + sizes_str(a.self) + ")");
  if (a.out.rank != r)
    return fail(err, Status::kInvalidArgument,
                "gather(): Expected out to have the same number of dimensions as index (out " +
                    sizes_str(a.out) + ", index " + sizes_str(a.index) + ")");
  const int64_t dim_hi = r > 0 ? r : 1;
  if (a.dim < 0 || a.dim >= dim_hi)
    return fail(err, Status::kInvalidArgument,
                "Dimension out of range (expected to be in range of [0, " +
                    std::to_string(dim_hi - 1) + "], but got " + std::to_string(a.dim) + ")");

  if (!is_index_dtype(a.index.dtype))
    return fail(err, Status::kInvalidArgument,
                std::string("gather(): Expected dtype int32/int64 for index, got ") +
                    dtype_name(a.index.dtype));
  if (a.self.dtype != a.out.dtype)
    return fail(err, Status::kInvalidArgument,
                std::string("gather(): Expected out.dtype to be equal to self.dtype (out ") +
                    dtype_name(a.out.dtype) + ", self " + dtype_name(a.self.dtype) + ")");
  if (elem_size(a.self.dtype) == 0)
    return fail(err, Status::kUnsupported, "gather(): unknown element type");

  for (int d = 0; d < r; ++d) {
    if (a.index.sizes[d] != a.out.sizes[d])
      return fail(err, Status::kInvalidArgument,
                  "gather(): Expected out " + sizes_str(a.out) +
                      " to have the same sizes as index " + sizes_str(a.index));
  }
  for (int d = 0; d < r; ++d) {
    if (d != a.dim && a.index.sizes[d] > a.self.sizes[d])
      return fail(err, Status::kInvalidArgument,
                  "Size does not match at dimension " + std::to_string(d) + " expected index " +
                      sizes_str(a.index) + " to be no larger than self " + sizes_str(a.self) +
                      " apart from dimension " + std::to_string(a.dim));
  }
  // Two out positions on one address would make the result depend on thread timing.
  if (detail::has_internal_overlap(a.out))
    return fail(err, Status::kInvalidArgument, detail::internal_overlap_message());
  return Status::kOk;
}

bool aligned(const void* p, int64_t bytes) {
  return reinterpret_cast<uintptr_t>(p) % static_cast<uintptr_t>(bytes) == 0;
}

}  // namespace

Status plan_gather(const GatherArgs& args, GatherPlan* plan, ErrorDetail* err) {
  if (plan == nullptr) return fail(err, Status::kInvalidArgument, "plan_gather(): null plan");
  const Status s = validate(args, err);
  if (s != Status::kOk) {
    if (err) err->op = args.op;
    return s;
  }

  const int r = args.self.rank;
  const int64_t dim = args.dim;
  GatherPlan p;
  p.dim = args.report_dim >= 0 ? args.report_dim : dim;
  p.wraps = args.wraps;
  // A rank-0 self holds one element: the only valid index value is 0, as in ATen.
  p.self_dim_size = r > 0 ? args.self.sizes[dim] : 1;
  p.self_dim_stride = r > 0 ? args.self.strides[dim] : 0;

  int64_t self_strides[kMaxRank];
  for (int d = 0; d < r; ++d) self_strides[d] = d == dim ? 0 : args.self.strides[d];
  const int64_t* strides[3] = {};
  strides[kGatherOut] = args.out.strides;
  strides[kGatherIndex] = args.index.strides;
  strides[kGatherSelf] = self_strides;
  int64_t extra[3] = {0, 0, 0};
  if (p.self_dim_size > 0) extra[kGatherSelf] = (p.self_dim_size - 1) * p.self_dim_stride;

  p.loop = plan_loop<3>(r, args.index.sizes, strides, extra);
  p.vec = 1;
  p.vec = pick_gather_vec(args, p, 16);
  *plan = p;
  if (err) *err = ErrorDetail{};
  return Status::kOk;
}

int pick_gather_vec(const GatherArgs& args, const GatherPlan& plan, int max_bytes) {
  const LoopPlan<3>& L = plan.loop;
  const int64_t es = elem_size(args.self.dtype);
  if (es <= 0 || L.rank == 0 || L.numel == 0) return 1;
  if (L.strides[kGatherIndex][0] != 0 || L.strides[kGatherOut][0] != 1 ||
      L.strides[kGatherSelf][0] != 1)
    return 1;
  const int64_t limit = max_bytes < 16 ? max_bytes : 16;
  int64_t vec = 1;
  while (vec * 2 * es <= limit) vec *= 2;
  for (; vec > 1; vec /= 2) {
    bool ok = L.sizes[0] % vec == 0 && plan.self_dim_stride % vec == 0 &&
              aligned(args.out.data, vec * es) && aligned(args.self.data, vec * es);
    for (int d = 1; d < L.rank && ok; ++d)
      ok = L.strides[kGatherOut][d] % vec == 0 && L.strides[kGatherSelf][d] % vec == 0;
    if (ok) return static_cast<int>(vec);
  }
  return 1;
}

}  // namespace stridewise
