// Test helpers: temporary directories and hand-built safetensors / .npy files.
#pragma once
#include <fcntl.h>
#include <unistd.h>

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace swc_test {

class TempDir {
 public:
  TempDir() {
    std::string tmpl = (std::filesystem::temp_directory_path() / "swc_test_XXXXXX").string();
    if (!mkdtemp(tmpl.data())) std::abort();
    path_ = tmpl;
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  std::string file(const std::string& name) const {
    return (std::filesystem::path(path_) / name).string();
  }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

inline void write_bytes(const std::string& path, const std::string& bytes) {
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  f.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

template <class T>
std::string raw(const std::vector<T>& v) {
  return std::string(reinterpret_cast<const char*>(v.data()), v.size() * sizeof(T));
}

inline std::string le64(uint64_t n) {
  std::string s(8, '\0');
  for (int i = 0; i < 8; ++i) s[i] = static_cast<char>((n >> (8 * i)) & 0xff);
  return s;
}

struct StTensor {
  std::string name, dtype;
  std::vector<uint64_t> shape;
  std::string data;
};

// A safetensors file with the tensors laid out back to back in the given order.
inline std::string safetensors_bytes(const std::vector<StTensor>& ts) {
  nlohmann::ordered_json h;
  std::string data;
  for (const auto& t : ts) {
    h[t.name] = {{"dtype", t.dtype},
                 {"shape", t.shape},
                 {"data_offsets", {data.size(), data.size() + t.data.size()}}};
    data += t.data;
  }
  std::string hs = h.dump();
  while (hs.size() % 8) hs += ' ';
  return le64(hs.size()) + hs + data;
}

// A .npy file: version 1, 2 or 3, with the given descr, order and shape.
inline std::string npy_bytes(int version, const std::string& descr, bool fortran,
                             const std::vector<uint64_t>& shape, const std::string& data) {
  std::string sh = "(";
  for (size_t i = 0; i < shape.size(); ++i)
    sh += std::to_string(shape[i]) + (shape.size() == 1 || i + 1 < shape.size() ? ", " : "");
  sh += ")";
  std::string dict = "{'descr': '" + descr + "', 'fortran_order': " + (fortran ? "True" : "False") +
                     ", 'shape': " + sh + ", }";
  const size_t pre = version == 1 ? 10 : 12;
  while ((pre + dict.size() + 1) % 64) dict += ' ';
  dict += '\n';
  std::string s = "\x93NUMPY";
  s += static_cast<char>(version);
  s += '\0';
  const uint64_t n = dict.size();
  if (version == 1) {
    s += static_cast<char>(n & 0xff);
    s += static_cast<char>(n >> 8);
  } else {
    for (int i = 0; i < 4; ++i) s += static_cast<char>((n >> (8 * i)) & 0xff);
  }
  return s + dict + data;
}

}  // namespace swc_test
