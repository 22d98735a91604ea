// Error type for sw-compare: every error names the file it is about and the reason.
#pragma once
#include <stdexcept>
#include <string>

namespace swc {

// s with every byte outside printable ASCII written as \xNN: a message may quote a corrupt
// file's bytes (a parser's error does), and must stay one valid line of UTF-8 on stderr and in a
// JSON report.
inline std::string printable(const std::string& s) {
  static const char* hex = "0123456789abcdef";
  std::string out;
  out.reserve(s.size());
  for (unsigned char c : s) {
    if (c >= 0x20 && c < 0x7f) {
      out += static_cast<char>(c);
    } else {
      out += "\\x";
      out += hex[c >> 4];
      out += hex[c & 15];
    }
  }
  return out;
}

// The first byte of s that no text record may hold (a control byte other than tab and CR, so NUL
// included), or npos.
inline size_t find_control_byte(const std::string& s) {
  for (size_t i = 0; i < s.size(); ++i) {
    const unsigned char c = static_cast<unsigned char>(s[i]);
    if (c < 0x20 && c != '\t' && c != '\r' && c != '\n') return i;
  }
  return std::string::npos;
}

class Error : public std::runtime_error {
 public:
  Error(std::string file, std::string reason)
      : std::runtime_error(printable(file.empty() ? reason : file + ": " + reason)),
        file_(std::move(file)),
        reason_(std::move(reason)) {}
  const std::string& file() const { return file_; }
  const std::string& reason() const { return reason_; }

 private:
  std::string file_;
  std::string reason_;
};

// Usage errors (bad flags, bad config values) also exit with status 2, but are not about a file
// unless one is given.
class UsageError : public Error {
 public:
  using Error::Error;
};

}  // namespace swc
