// Checks and names shared by every indexed op (indexed_op.h).
#include "stridewise/indexed_op.h"

#include <string>

namespace stridewise {

const char* combine_name(Combine c) {
  switch (c) {
    case Combine::kCopy:
      return "copy";
    case Combine::kAdd:
      return "add";
    case Combine::kMul:
      return "multiply";
    case Combine::kMean:
      return "mean";
    case Combine::kMax:
      return "amax";
    case Combine::kMin:
      return "amin";
  }
  return "unknown";
}

namespace detail {

// std::to_string rather than iostreams: the core never touches locale machinery, which a
// statically linked C++ runtime duplicates (see cmake/StdcxxRuntime.cmake).
std::string sizes_str(const StridedView& v) {
  std::string s = "[";
  for (int d = 0; d < v.rank; ++d) s += (d ? ", " : "") + std::to_string(v.sizes[d]);
  return s + "]";
}

Status fail_op(ErrorDetail* err, OpCode op, Status s, const std::string& message) {
  if (err) {
    *err = ErrorDetail{};
    err->status = s;
    err->op = op;
    err->message = message;
  }
  return s;
}

Status check_operand(OpCode op, const char* fn, const char* name, const StridedView& v,
                     ErrorDetail* err) {
  const std::string who = std::string(fn) + ": " + name;
  if (v.rank < 0)
    return fail_op(err, op, Status::kInvalidArgument,
                   who + " has negative rank " + std::to_string(v.rank));
  if (v.rank > kMaxRank)
    return fail_op(err, op, Status::kUnsupported,
                   who + " has " + std::to_string(v.rank) +
                       " dimensions; stridewise supports at most " + std::to_string(kMaxRank));
  for (int d = 0; d < v.rank; ++d) {
    if (v.sizes[d] < 0 || v.strides[d] < 0)
      return fail_op(err, op, Status::kInvalidArgument,
                     who + " has a negative size or stride at dimension " + std::to_string(d) +
                         " (sizes " + sizes_str(v) + ")");
  }
  if (v.data == nullptr && v.numel() != 0)
    return fail_op(err, op, Status::kInvalidArgument,
                   who + " has no data but " + std::to_string(v.numel()) + " elements");
  return Status::kOk;
}

bool has_internal_overlap(const StridedView& v) {
  if (v.numel() <= 1) return false;
  for (int d = 0; d < v.rank; ++d)
    if (v.sizes[d] > 1 && v.strides[d] == 0) return true;
  return false;
}

const char* internal_overlap_message() {
  return "unsupported operation: more than one element of the written-to tensor refers to a "
         "single memory location. Please clone() the tensor before performing the operation.";
}

}  // namespace detail
}  // namespace stridewise
