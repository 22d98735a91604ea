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

// Which operator raised an error; stored as an int in device-side error records.
enum class OpCode : int32_t {
  kUnknown = 0,
  kGather = 1,
  kScatter = 2,  // scatter (src / value, with or without reduce=)
  kScatterAdd = 3,
  kScatterReduce = 4,  // scatter_reduce.two
  // The dim-indexed ops run as gather/scatter over views (a 1-D index seen with stride 0 along
  // the other dims); their own codes make errors, records and statistics name them.
  kIndexSelect = 5,
  kIndexAdd = 6,
  kIndexCopy = 7,
  kIndexReduce = 8,
  kEmbedding = 9,
  kEmbeddingBackward = 10,  // embedding_dense_backward
  // Advanced indexing (index_k.h): k index tensors at once, or a flat position.
  kIndex = 11,     // index.Tensor (x[i], x[:, i], x[i, j], x[mask])
  kIndexPut = 12,  // index_put_ / index_put / _index_put_impl_
  kTake = 13,
  kPut = 14,
  // index_fill_ (int_Scalar / int_Tensor): a one-value write on the k-index core, wrapping.
  kIndexFill = 15,
};

const char* op_name(OpCode op);
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
