#include "stridewise/status.h"

#include "stridewise/dtype.h"

namespace stridewise {

const char* op_name(OpCode op) {
  switch (op) {
    case OpCode::kGather:
      return "gather";
    case OpCode::kScatter:
      return "scatter";
    case OpCode::kScatterAdd:
      return "scatter_add";
    case OpCode::kScatterReduce:
      return "scatter_reduce";
    case OpCode::kIndexSelect:
      return "index_select";
    case OpCode::kIndexAdd:
      return "index_add";
    case OpCode::kIndexCopy:
      return "index_copy";
    case OpCode::kIndexReduce:
      return "index_reduce";
    case OpCode::kEmbedding:
      return "embedding";
    case OpCode::kEmbeddingBackward:
      return "embedding_dense_backward";
    case OpCode::kIndex:
      return "index";
    case OpCode::kIndexPut:
      return "index_put_";
    case OpCode::kTake:
      return "take";
    case OpCode::kPut:
      return "put";
    case OpCode::kIndexFill:
      return "index_fill";
    case OpCode::kUnknown:
      break;
  }
  return "unknown op";
}

const char* status_name(Status s) {
  switch (s) {
    case Status::kOk:
      return "ok";
    case Status::kInvalidArgument:
      return "invalid argument";
    case Status::kIndexOutOfRange:
      return "index out of range";
    case Status::kUnsupported:
      return "unsupported";
    case Status::kDeviceError:
      return "device error";
    case Status::kNotCompiled:
      return "not compiled in this build";
  }
  return "unknown status";
}

std::string format_index_error(const ErrorDetail& e) {
  return "index " + std::to_string(e.value) + " is out of bounds for dimension " +
         std::to_string(e.dim) + " with size " + std::to_string(e.hi);
}

const char* dtype_name(DType t) {
  switch (t) {
    case DType::kBool:
      return "bool";
    case DType::kUInt8:
      return "uint8";
    case DType::kInt8:
      return "int8";
    case DType::kInt16:
      return "int16";
    case DType::kUInt16:
      return "uint16";
    case DType::kInt32:
      return "int32";
    case DType::kUInt32:
      return "uint32";
    case DType::kInt64:
      return "int64";
    case DType::kUInt64:
      return "uint64";
    case DType::kFloat16:
      return "float16";
    case DType::kBFloat16:
      return "bfloat16";
    case DType::kFloat32:
      return "float32";
    case DType::kFloat64:
      return "float64";
    case DType::kComplex32:
      return "complex32";
    case DType::kComplex64:
      return "complex64";
    case DType::kComplex128:
      return "complex128";
    case DType::kFloat8E4M3FN:
      return "float8_e4m3fn";
    case DType::kFloat8E5M2:
      return "float8_e5m2";
    case DType::kFloat8E4M3FNUZ:
      return "float8_e4m3fnuz";
    case DType::kFloat8E5M2FNUZ:
      return "float8_e5m2fnuz";
    case DType::kFloat8E8M0FNU:
      return "float8_e8m0fnu";
  }
  return "unknown dtype";
}

}  // namespace stridewise
