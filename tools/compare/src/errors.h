// Error type for sw-compare: every error names the file it is about and the reason.
#pragma once
#include <stdexcept>
#include <string>

namespace swc {

class Error : public std::runtime_error {
 public:
  Error(std::string file, std::string reason)
      : std::runtime_error(file.empty() ? reason : file + ": " + reason),
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
