// Reading tensors from safetensors and .npy files without loading them: headers are parsed and
// validated against the file size; element data is read later, chunk by chunk, with pread.
#pragma once
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "dtype.h"

namespace swc {

// A tensor stored contiguously in a file.
struct TensorRef {
  std::string path;            // file that holds the data
  std::string name;            // key in a safetensors file; the file name for .npy
  std::string dtype_code;      // as written in the file ("F32", "<f4", "F8_E4M3", ...)
  std::optional<DType> dtype;  // empty: a dtype we do not compare (the reason is dtype_code)
  std::vector<uint64_t> shape;
  uint64_t offset = 0;  // absolute byte offset of the first element
  uint64_t nbytes = 0;
  bool big_endian = false;
  bool fortran_order = false;
  uint64_t numel() const;  // product of shape (1 for a 0-d tensor)
};

std::string shape_str(const std::vector<uint64_t>& shape);

// numel * elem_size with overflow detection; returns false on overflow.
bool checked_nbytes(const std::vector<uint64_t>& shape, uint64_t elem_size, uint64_t* out);

// An open file read with pread. Thread-safe (pread has no shared file position).
class FileReader {
 public:
  explicit FileReader(const std::string& path);  // throws Error naming the file and errno text
  ~FileReader();
  FileReader(const FileReader&) = delete;
  FileReader& operator=(const FileReader&) = delete;
  const std::string& path() const { return path_; }
  uint64_t size() const { return size_; }
  // Reads exactly n bytes at offset; throws Error (with the offset and the reason) when the file
  // is shorter than expected (truncated after the header was read) or the read fails.
  void read_at(uint64_t offset, void* dst, uint64_t n) const;

 private:
  std::string path_;
  int fd_ = -1;
  uint64_t size_ = 0;
};

// Opens each path once and shares the reader between threads.
class FileCache {
 public:
  std::shared_ptr<FileReader> get(const std::string& path);

 private:
  std::mutex mu_;
  std::map<std::string, std::shared_ptr<FileReader>> files_;
};

struct SafetensorsFile {
  std::string path;
  uint64_t file_size = 0;
  uint64_t data_start = 0;         // 8 + header length
  std::vector<TensorRef> tensors;  // in header order
  std::map<std::string, std::string> metadata;
  std::vector<std::string> warnings;  // e.g. trailing bytes after the last tensor
  const TensorRef* find(const std::string& name) const;
};

// Parses and validates a safetensors header (8-byte little-endian length, JSON header, data).
// Throws Error naming the file and what is wrong (truncated, bad JSON, offsets past the end of
// the file, offsets that disagree with dtype x shape, ...).
SafetensorsFile read_safetensors(const std::string& path);
SafetensorsFile parse_safetensors(const std::string& path, const FileReader& reader);

// Parses and validates a .npy header (format versions 1, 2 and 3; '<', '>', '|' and '=' byte
// orders; C or Fortran order). Throws Error naming the file and the reason.
TensorRef read_npy(const std::string& path, std::vector<std::string>* warnings = nullptr);
TensorRef parse_npy(const std::string& path, const FileReader& reader,
                    std::vector<std::string>* warnings = nullptr);

// True when the file starts with the .npy magic string.
bool looks_like_npy(const FileReader& reader);

}  // namespace swc
