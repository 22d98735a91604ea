// scatter argument checks and loop planning; see scatter.h for the contract.
//
// Messages follow ATen's wording (ScatterGatherChecks.h) where ATen has a check, so the
// adapter can pass them through unchanged; the adapter runs ATen's own checks first.
#include <cstdint>
#include <string>

#include "stridewise/indexed_op.h"
#include "stridewise/scatter.h"

namespace stridewise {
namespace {

using detail::sizes_str;

struct Checker {
  const ScatterArgs& a;
  ErrorDetail* err;
  Status bad(Status s, const std::string& message) const {
    return detail::fail_op(err, a.desc.op, s, message);
  }
  Status operand(const char* name, const StridedView& v) const {
    return detail::check_operand(a.desc.op, "scatter()", name, v, err);
  }
};

bool same_view(const StridedView& x, const StridedView& y) {
  if (x.data != y.data || x.rank != y.rank || x.dtype != y.dtype) return false;
  for (int d = 0; d < x.rank; ++d)
    if (x.sizes[d] != y.sizes[d] || (x.sizes[d] > 1 && x.strides[d] != y.strides[d])) return false;
  return true;
}

Status validate(const ScatterArgs& a, ErrorDetail* err) {
  const Checker c{a, err};
  Status s;
  if ((s = c.operand("self", a.self)) != Status::kOk) return s;
  if ((s = c.operand("index", a.index)) != Status::kOk) return s;
  if ((s = c.operand("out", a.out)) != Status::kOk) return s;
  if (!a.has_value && (s = c.operand("src", a.src)) != Status::kOk) return s;
  if (a.desc.role != IndexRole::kWrite)
    return c.bad(Status::kInvalidArgument, "scatter(): descriptor is not a scatter (role read)");
  if (a.desc.wraps)
    return c.bad(Status::kUnsupported, "scatter(): negative index values do not wrap here");

  const int r = a.self.rank;
  if (a.index.rank != r)
    return c.bad(Status::kInvalidArgument,
                 "Index tensor must have the same number of dimensions as self tensor");
  if (!a.has_value && a.src.rank != r)
    return c.bad(Status::kInvalidArgument,
                 "Index tensor must have the same number of dimensions as src tensor");
  if (a.out.rank != r)
    return c.bad(Status::kInvalidArgument, "scatter(): Expected out " + sizes_str(a.out) +
                                               " to have the sizes of self " + sizes_str(a.self));
  const int64_t dim_hi = r > 0 ? r : 1;
  if (a.dim < 0 || a.dim >= dim_hi)
    return c.bad(Status::kInvalidArgument,
                 "Dimension out of range (expected to be in range of [0, " +
                     std::to_string(dim_hi - 1) + "], but got " + std::to_string(a.dim) + ")");
  if (!is_index_dtype(a.index.dtype))
    return c.bad(Status::kInvalidArgument, "scatter(): Expected dtype int32/int64 for index");
  if (a.out.dtype != a.self.dtype)
    return c.bad(Status::kInvalidArgument,
                 "scatter(): Expected out.dtype to be equal to self.dtype");
  if (!a.has_value && a.src.dtype != a.self.dtype)
    return c.bad(Status::kInvalidArgument,
                 "scatter(): Expected self.dtype to be equal to src.dtype");
  if (a.has_alpha && (a.has_value || a.desc.combine != Combine::kAdd))
    return c.bad(Status::kInvalidArgument, "scatter(): alpha scales a src tensor that is added");
  if (!scatter_supports(a.self.dtype, a.desc.combine))
    return c.bad(Status::kUnsupported, std::string("scatter(): ") + combine_name(a.desc.combine) +
                                           " is not implemented for " + dtype_name(a.self.dtype));

  for (int d = 0; d < r; ++d) {
    if (a.out.sizes[d] != a.self.sizes[d])
      return c.bad(Status::kInvalidArgument, "scatter(): Expected out " + sizes_str(a.out) +
                                                 " to have the sizes of self " + sizes_str(a.self));
  }
  for (int d = 0; d < r; ++d) {
    const bool too_big = (d != a.dim && a.index.sizes[d] > a.self.sizes[d]) ||
                         (!a.has_value && a.index.sizes[d] > a.src.sizes[d]);
    if (too_big)
      return c.bad(Status::kInvalidArgument,
                   "Expected index " + sizes_str(a.index) + " to be no larger than self " +
                       sizes_str(a.self) + " apart from dimension " + std::to_string(a.dim) +
                       (a.has_value ? std::string()
                                    : " and to be no larger size than src " + sizes_str(a.src)));
  }
  if (detail::has_internal_overlap(a.out))
    return c.bad(Status::kInvalidArgument, detail::internal_overlap_message());
  return Status::kOk;
}

}  // namespace

bool scatter_supports(DType t, Combine c) {
  if (c == Combine::kCopy) return elem_size(t) > 0;  // bytes move; the dtype never matters
  switch (t) {
    case DType::kBool:
      return c != Combine::kMean;
    case DType::kComplex64:
    case DType::kComplex128:
      return c != Combine::kMax && c != Combine::kMin;
    case DType::kUInt8:
    case DType::kInt8:
    case DType::kInt16:
    case DType::kInt32:
    case DType::kInt64:
    case DType::kFloat16:
    case DType::kBFloat16:
    case DType::kFloat32:
    case DType::kFloat64:
      return true;
    default:  // uint16/32/64, complex32, float8: no arithmetic (ATen's kernels have none either)
      return false;
  }
}

Status plan_scatter(const ScatterArgs& args, ScatterPlan* plan, ErrorDetail* err) {
  if (plan == nullptr)
    return detail::fail_op(err, args.desc.op, Status::kInvalidArgument,
                           "plan_scatter(): null plan");
  const Status s = validate(args, err);
  if (s != Status::kOk) return s;

  const int r = args.self.rank;
  const int64_t dim = args.dim;
  ScatterPlan p;
  p.dim = dim;
  // A rank-0 out holds one element: the only valid index value is 0, as in ATen.
  p.out_dim_size = r > 0 ? args.out.sizes[dim] : 1;
  p.out_dim_stride = r > 0 ? args.out.strides[dim] : 0;
  p.line_len = r > 0 ? args.index.sizes[dim] : 1;
  p.index_dim_stride = r > 0 ? args.index.strides[dim] : 0;
  p.src_dim_stride = (r > 0 && !args.has_value) ? args.src.strides[dim] : 0;
  p.in_place = same_view(args.out, args.self);

  int64_t out_strides[kMaxRank] = {};
  int64_t src_strides[kMaxRank] = {};
  for (int d = 0; d < r; ++d) {
    out_strides[d] = d == dim ? 0 : args.out.strides[d];
    src_strides[d] = args.has_value ? 0 : args.src.strides[d];
  }
  const int64_t* strides[3] = {};
  strides[kScatterOut] = out_strides;
  strides[kScatterIndex] = args.index.strides;
  strides[kScatterSrc] = src_strides;
  int64_t extra[3] = {0, 0, 0};
  if (p.out_dim_size > 0) extra[kScatterOut] = (p.out_dim_size - 1) * p.out_dim_stride;
  p.elems = plan_loop<3>(r, args.index.sizes, strides, extra);

  int64_t line_sizes[kMaxRank] = {};
  for (int d = 0; d < r; ++d) line_sizes[d] = d == dim ? 1 : args.index.sizes[d];
  // An empty index has no lines; sizes[dim] = 1 would hide a zero along dim.
  if (r > 0 && args.index.sizes[dim] == 0) line_sizes[dim] = 0;
  int64_t line_extra[3] = {extra[0], 0, 0};
  if (p.line_len > 0) {
    line_extra[kScatterIndex] = (p.line_len - 1) * p.index_dim_stride;
    line_extra[kScatterSrc] = (p.line_len - 1) * p.src_dim_stride;
  }
  p.lines = plan_loop<3>(r, line_sizes, strides, line_extra);

  // The index's distinct elements: a stride-0 dim (an expanded index) is walked once. An
  // empty index keeps its zero so that nothing is walked.
  int64_t index_sizes[kMaxRank] = {};
  for (int d = 0; d < r; ++d)
    index_sizes[d] =
        args.index.strides[d] == 0 && args.index.sizes[d] > 0 ? 1 : args.index.sizes[d];
  const int64_t* index_strides[1] = {args.index.strides};
  p.index_elems = plan_loop<1>(r, index_sizes, index_strides);

  if (!p.in_place) {
    const int64_t* cs[2] = {args.out.strides, args.self.strides};
    p.copy = plan_loop<2>(r, args.out.sizes, cs);
  }
  *plan = p;
  if (err) *err = ErrorDetail{};
  return Status::kOk;
}

}  // namespace stridewise
