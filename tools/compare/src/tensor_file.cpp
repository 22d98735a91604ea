#include "tensor_file.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstring>
#include <nlohmann/json.hpp>

#include "errors.h"

namespace swc {

uint64_t TensorRef::numel() const {
  uint64_t n = 1;
  for (uint64_t d : shape) n *= d;
  return n;
}

std::string shape_str(const std::vector<uint64_t>& shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + "]";
}

bool checked_nbytes(const std::vector<uint64_t>& shape, uint64_t elem_size, uint64_t* out) {
  uint64_t n = elem_size;
  for (uint64_t d : shape)
    if (__builtin_mul_overflow(n, d, &n)) return false;
  *out = n;
  return true;
}

FileReader::FileReader(const std::string& path) : path_(path) {
  fd_ = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd_ < 0) throw Error(path, std::string("cannot open: ") + std::strerror(errno));
  struct stat st {};
  if (::fstat(fd_, &st) != 0) {
    const int e = errno;
    ::close(fd_);
    throw Error(path, std::string("cannot stat: ") + std::strerror(e));
  }
  if (S_ISDIR(st.st_mode)) {
    ::close(fd_);
    throw Error(path, "is a directory, expected a file");
  }
  size_ = static_cast<uint64_t>(st.st_size);
}

FileReader::~FileReader() {
  if (fd_ >= 0) ::close(fd_);
}

void FileReader::read_at(uint64_t offset, void* dst, uint64_t n) const {
  char* p = static_cast<char*>(dst);
  uint64_t done = 0;
  while (done < n) {
    const uint64_t want = std::min<uint64_t>(n - done, uint64_t{1} << 30);
    const ssize_t got = ::pread(fd_, p + done, want, static_cast<off_t>(offset + done));
    if (got < 0) {
      if (errno == EINTR) continue;
      throw Error(path_, "read of " + std::to_string(n) + " bytes at offset " +
                             std::to_string(offset) + " failed: " + std::strerror(errno));
    }
    if (got == 0)
      throw Error(path_, "unexpected end of file at offset " + std::to_string(offset + done) +
                             " while reading " + std::to_string(n) + " bytes at offset " +
                             std::to_string(offset) +
                             " (file truncated or changed while reading?)");
    done += static_cast<uint64_t>(got);
  }
}

std::shared_ptr<FileReader> FileCache::get(const std::string& path) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = files_.find(path);
  if (it != files_.end()) return it->second;
  auto r = std::make_shared<FileReader>(path);
  files_.emplace(path, r);
  return r;
}

const TensorRef* SafetensorsFile::find(const std::string& name) const {
  for (const TensorRef& t : tensors)
    if (t.name == name) return &t;
  return nullptr;
}

// ---------------------------------------------------------------------------------------------
// safetensors

namespace {
constexpr uint64_t kMaxHeader = uint64_t{100} << 20;  // the reference implementation's limit

uint64_t json_u64(const nlohmann::json& v, const std::string& path, const std::string& what) {
  if (v.is_number_unsigned()) return v.get<uint64_t>();
  if (v.is_number_integer() && v.get<int64_t>() >= 0)
    return static_cast<uint64_t>(v.get<int64_t>());
  throw Error(path, what + " must be a non-negative integer, got " + v.dump());
}
}  // namespace

SafetensorsFile read_safetensors(const std::string& path) {
  FileReader r(path);
  return parse_safetensors(path, r);
}

SafetensorsFile parse_safetensors(const std::string& path, const FileReader& reader) {
  SafetensorsFile f;
  f.path = path;
  f.file_size = reader.size();
  if (f.file_size < 8)
    throw Error(
        path,
        "file is " + std::to_string(f.file_size) +
            " bytes, too short for the 8-byte safetensors header length (empty or truncated file)");
  unsigned char len_bytes[8];
  reader.read_at(0, len_bytes, 8);
  uint64_t hlen = 0;
  for (int i = 7; i >= 0; --i) hlen = (hlen << 8) | len_bytes[i];
  if (hlen > kMaxHeader)
    throw Error(path, "header length " + std::to_string(hlen) +
                          " is larger than the 100 MiB limit "
                          "(not a safetensors file, or a corrupt length field)");
  if (hlen > f.file_size - 8)
    throw Error(path, "header length " + std::to_string(hlen) + " runs past the end of the file (" +
                          std::to_string(f.file_size) +
                          " bytes): file truncated or not a safetensors file");
  std::string text(hlen, '\0');
  reader.read_at(8, text.data(), hlen);
  // JSON allows no control bytes; a parser may stop at a NUL and accept what came before.
  if (const size_t at = find_control_byte(text); at != std::string::npos)
    throw Error(path, fmt::format("safetensors header holds the control byte 0x{:02x} at byte {} "
                                  "of the header: corrupt header",
                                  static_cast<unsigned char>(text[at]), 8 + at));
  nlohmann::json h;
  try {
    h = nlohmann::json::parse(text);
  } catch (const nlohmann::json::exception& e) {
    throw Error(path, std::string("safetensors header is not valid JSON: ") + e.what());
  }
  if (!h.is_object())
    throw Error(path,
                "safetensors header must be a JSON object, got " + std::string(h.type_name()));
  f.data_start = 8 + hlen;
  const uint64_t data_size = f.file_size - f.data_start;
  uint64_t max_end = 0;
  for (auto it = h.begin(); it != h.end(); ++it) {
    const std::string& key = it.key();
    const nlohmann::json& v = it.value();
    if (key == "__metadata__") {
      if (!v.is_object()) throw Error(path, "__metadata__ must be an object of strings");
      for (auto m = v.begin(); m != v.end(); ++m)
        f.metadata[m.key()] =
            m.value().is_string() ? m.value().get<std::string>() : m.value().dump();
      continue;
    }
    const std::string where = "tensor '" + key + "'";
    if (!v.is_object()) throw Error(path, where + ": entry must be an object");
    if (!v.contains("dtype") || !v["dtype"].is_string())
      throw Error(path, where + ": missing string field 'dtype'");
    if (!v.contains("shape") || !v["shape"].is_array())
      throw Error(path, where + ": missing array field 'shape'");
    if (!v.contains("data_offsets") || !v["data_offsets"].is_array() ||
        v["data_offsets"].size() != 2)
      throw Error(path, where + ": 'data_offsets' must be an array of two integers");
    TensorRef t;
    t.path = path;
    t.name = key;
    t.dtype_code = v["dtype"].get<std::string>();
    t.dtype = dtype_from_st_code(t.dtype_code);
    for (const auto& d : v["shape"]) t.shape.push_back(json_u64(d, path, where + " shape entry"));
    const uint64_t begin = json_u64(v["data_offsets"][0], path, where + " data_offsets[0]");
    const uint64_t end = json_u64(v["data_offsets"][1], path, where + " data_offsets[1]");
    if (begin > end)
      throw Error(path, where + ": data_offsets [" + std::to_string(begin) + ", " +
                            std::to_string(end) + "] has begin after end");
    if (end > data_size)
      throw Error(path, where + ": data_offsets end " + std::to_string(end) +
                            " is past the end of the data section (" + std::to_string(data_size) +
                            " bytes after the header): file truncated");
    const size_t esize = st_code_size(t.dtype_code);
    if (esize == 0) throw Error(path, where + ": unknown dtype '" + t.dtype_code + "'");
    uint64_t need = 0;
    if (!checked_nbytes(t.shape, esize, &need))
      throw Error(path, where + ": shape " + shape_str(t.shape) + " x " + std::to_string(esize) +
                            " bytes overflows 64 bits");
    if (end - begin != need)
      throw Error(path, where + ": data_offsets span " + std::to_string(end - begin) +
                            " bytes but " + t.dtype_code + " x " + shape_str(t.shape) + " needs " +
                            std::to_string(need) + " bytes");
    t.offset = f.data_start + begin;
    t.nbytes = need;
    max_end = std::max(max_end, end);
    f.tensors.push_back(std::move(t));
  }
  if (max_end < data_size)
    f.warnings.push_back(
        path + ": " + std::to_string(data_size - max_end) +
        " bytes after the last tensor are not described by the header (capture interrupted?)");
  return f;
}

// ---------------------------------------------------------------------------------------------
// .npy

bool looks_like_npy(const FileReader& reader) {
  if (reader.size() < 6) return false;
  char m[6];
  reader.read_at(0, m, 6);
  return std::memcmp(m, "\x93NUMPY", 6) == 0;
}

namespace {
// A parser for the Python dict literal of a .npy header, e.g.
//   {'descr': '<f4', 'fortran_order': False, 'shape': (3, 4), }
struct NpyHeaderParser {
  const std::string& s;
  const std::string& path;
  size_t i = 0;
  [[noreturn]] void fail(const std::string& what) const {
    throw Error(path,
                "bad .npy header at character " + std::to_string(i) + ": " + what + " in: " + s);
  }
  void ws() {
    while (i < s.size() && (s[i] == ' ' || s[i] == '\t' || s[i] == '\n' || s[i] == '\r')) ++i;
  }
  bool eat(char c) {
    ws();
    if (i < s.size() && s[i] == c) {
      ++i;
      return true;
    }
    return false;
  }
  std::string str() {
    ws();
    if (i >= s.size() || (s[i] != '\'' && s[i] != '"')) fail("expected a string");
    const char q = s[i++];
    std::string out;
    while (i < s.size() && s[i] != q) out += s[i++];
    if (i >= s.size()) fail("unterminated string");
    ++i;
    return out;
  }
  bool boolean() {
    ws();
    if (s.compare(i, 4, "True") == 0) {
      i += 4;
      return true;
    }
    if (s.compare(i, 5, "False") == 0) {
      i += 5;
      return false;
    }
    fail("expected True or False");
  }
  std::vector<uint64_t> tuple() {
    if (!eat('(')) fail("expected a tuple for 'shape'");
    std::vector<uint64_t> out;
    while (!eat(')')) {
      ws();
      if (i >= s.size() || !std::isdigit(static_cast<unsigned char>(s[i])))
        fail("expected a non-negative integer");
      uint64_t v = 0;
      while (i < s.size() && std::isdigit(static_cast<unsigned char>(s[i]))) {
        if (__builtin_mul_overflow(v, 10, &v) ||
            __builtin_add_overflow(v, uint64_t(s[i] - '0'), &v))
          fail("dimension overflows 64 bits");
        ++i;
      }
      ws();
      if (i < s.size() && s[i] == 'L') ++i;  // Python 2 long suffix
      out.push_back(v);
      if (!eat(',')) {
        if (!eat(')')) fail("expected ',' or ')'");
        break;
      }
    }
    return out;
  }
};

void descr_to_dtype(const std::string& path, const std::string& descr, TensorRef* t) {
  if (descr.size() < 3) throw Error(path, ".npy descr '" + descr + "' is not a simple dtype");
  const char order = descr[0], kind = descr[1];
  const std::string size = descr.substr(2);
  if (order != '<' && order != '>' && order != '|' && order != '=')
    throw Error(path, ".npy descr '" + descr + "' has an unknown byte order '" +
                          std::string(1, order) + "'");
  static const bool host_big = [] {
    const uint16_t x = 1;
    unsigned char c;
    std::memcpy(&c, &x, 1);
    return c == 0;
  }();
  t->big_endian = order == '>' || (order == '=' && host_big);
  struct M {
    char kind;
    const char* size;
    DType t;
  };
  static const M table[] = {
      {'b', "1", DType::Bool}, {'u', "1", DType::U8},  {'i', "1", DType::I8},
      {'u', "2", DType::U16},  {'i', "2", DType::I16}, {'u', "4", DType::U32},
      {'i', "4", DType::I32},  {'u', "8", DType::U64}, {'i', "8", DType::I64},
      {'f', "2", DType::F16},  {'f', "4", DType::F32}, {'f', "8", DType::F64}};
  t->dtype_code = descr;
  for (const M& m : table)
    if (m.kind == kind && size == m.size) {
      t->dtype = m.t;
      return;
    }
  throw Error(path, ".npy dtype '" + descr +
                        "' is not supported (supported: bool, int8-64, uint8-64, float16/32/64)");
}
}  // namespace

TensorRef read_npy(const std::string& path, std::vector<std::string>* warnings) {
  FileReader r(path);
  return parse_npy(path, r, warnings);
}

TensorRef parse_npy(const std::string& path, const FileReader& reader,
                    std::vector<std::string>* warnings) {
  const uint64_t size = reader.size();
  if (size < 10)
    throw Error(path, "file is " + std::to_string(size) +
                          " bytes, too short for a .npy header (truncated?)");
  unsigned char pre[12] = {};
  reader.read_at(0, pre, std::min<uint64_t>(size, 12));
  if (std::memcmp(pre, "\x93NUMPY", 6) != 0)
    throw Error(path, "missing the .npy magic string \\x93NUMPY");
  const int major = pre[6];
  uint64_t hlen = 0, hstart = 0;
  if (major == 1) {
    hlen = pre[8] | (uint64_t(pre[9]) << 8);
    hstart = 10;
  } else if (major == 2 || major == 3) {
    if (size < 12) throw Error(path, ".npy v" + std::to_string(major) + " header truncated");
    hlen = pre[8] | (uint64_t(pre[9]) << 8) | (uint64_t(pre[10]) << 16) | (uint64_t(pre[11]) << 24);
    hstart = 12;
  } else {
    throw Error(path, ".npy format version " + std::to_string(major) + "." +
                          std::to_string(pre[7]) + " is not supported (1, 2 and 3 are)");
  }
  if (hstart + hlen > size)
    throw Error(path, ".npy header length " + std::to_string(hlen) +
                          " runs past the end of the file (" + std::to_string(size) +
                          " bytes): file truncated");
  std::string text(hlen, '\0');
  reader.read_at(hstart, text.data(), hlen);
  NpyHeaderParser p{text, path};
  std::optional<std::string> descr;
  std::optional<bool> fortran;
  std::optional<std::vector<uint64_t>> shape;
  if (!p.eat('{')) p.fail("expected '{'");
  while (!p.eat('}')) {
    const std::string key = p.str();
    if (!p.eat(':')) p.fail("expected ':'");
    if (key == "descr") {
      p.ws();
      if (p.i < text.size() && text[p.i] == '[')
        throw Error(path, ".npy structured dtypes (a list in 'descr') are not supported");
      descr = p.str();
    } else if (key == "fortran_order") {
      fortran = p.boolean();
    } else if (key == "shape") {
      shape = p.tuple();
    } else {
      p.fail("unexpected key '" + key + "'");
    }
    if (!p.eat(',')) {
      if (!p.eat('}')) p.fail("expected ',' or '}'");
      break;
    }
  }
  if (!descr || !fortran || !shape)
    throw Error(path, ".npy header lacks one of 'descr', 'fortran_order', 'shape': " + text);
  TensorRef t;
  t.path = path;
  t.name = path;
  descr_to_dtype(path, *descr, &t);
  t.shape = *shape;
  t.fortran_order = *fortran;
  t.offset = hstart + hlen;
  if (!checked_nbytes(t.shape, dtype_size(*t.dtype), &t.nbytes))
    throw Error(path, ".npy shape " + shape_str(t.shape) + " overflows 64 bits");
  const uint64_t avail = size - t.offset;
  if (avail < t.nbytes)
    throw Error(path, ".npy header says " + *descr + " x " + shape_str(t.shape) + " = " +
                          std::to_string(t.nbytes) + " bytes, but only " + std::to_string(avail) +
                          " bytes follow the header: file truncated");
  if (avail > t.nbytes && warnings)
    warnings->push_back(path + ": " + std::to_string(avail - t.nbytes) +
                        " extra bytes after the array data");
  return t;
}

}  // namespace swc
