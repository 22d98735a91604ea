// Status codes and error details returned by every host entry point of the core.
// Contract: core functions never throw across this boundary; they return a Status
// and, when the caller passes a non-null ErrorDetail*, fill it with what went wrong.
#pragma once

#include <cstdint>
#include <string>

namespace stridewise {

enum class Status : int32_t {
  kOk = 0,
  kInvalidArgument = 1,  // shapes, ranks or dtypes the adapter should have rejected
  kIndexOutOfRange = 2,  // an index value outside [lo, hi); see ErrorDetail
  kUnsupported = 3,      // e.g. rank above kMaxRank, or a dtype this op does not handle
  kDeviceError = 4,      // a CUDA runtime call failed; ErrorDetail::message says which
  kNotCompiled = 5,      // CUDA entry point called in a build without CUDA
};

// Which operator raised an error; stored as an int in device-side error records. The
// enumerators and their numbers come from the op table (ops.def).
enum class OpCode : int32_t {
  kUnknown = 0,
#define SW_OP(code, number, key, error_name, family, packets) code = number,
#include "stridewise/ops.def"
#undef SW_OP
};

// The adapter folder that holds an op's entry (ops.def's family column).
enum class Family : uint8_t { kGather, kScatter, kIndexDim, kIndexK };

// One row of the op table (ops.def).
struct OpInfo {
  OpCode code;
  const char* key;         // the routed name: enable(include=[key]), stats()[key]
  const char* error_name;  // how errors name the op
  Family family;
  const char* packets;  // aten:: overload packets replaced, space-separated
};

// The table's rows in table order, and their count.
const OpInfo* op_table();
int op_count();

// The row of `op`; null for kUnknown or a number no row has.
const OpInfo* op_info(OpCode op);

// The op's error name ("index_put_"); "unknown op" for kUnknown.
const char* op_name(OpCode op);
const char* family_name(Family f);
const char* status_name(Status s);

struct ErrorDetail {
  Status status = Status::kOk;
  OpCode op = OpCode::kUnknown;
  int64_t dim = -1;   // dimension the bad index addresses
  int64_t value = 0;  // the offending index value
  int64_t lo = 0;     // valid range is [lo, hi)
  int64_t hi = 0;
  int64_t position = -1;  // linear position of the offending element in iteration order
  std::string message;    // free text for kInvalidArgument / kDeviceError / kUnsupported
};

// ATen's wording for an out-of-range gather/scatter index:
// "index 16 is out of bounds for dimension 1 with size 16".
std::string format_index_error(const ErrorDetail& e);

}  // namespace stridewise
