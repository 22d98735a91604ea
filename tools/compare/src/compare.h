// Aligns two dumps (or two tensor files), compares every matched tensor pair under its standard,
// and finds the first divergent op in execution order.
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "engine.h"
#include "metrics.h"
#include "standards.h"

namespace swc {

enum class Status { Pass, Fail, Ignored, Skipped, Error, OnlyA, OnlyB };
const char* status_name(Status s);

struct Entry {
  int64_t step = -1, rank = -1, seq = -1, call = -1, pos = -1;
  std::string phase, op, overload, io, arg;
  std::string name;  // tensor name (files mode) or a readable label (dumps mode)
  std::string dtype_a, dtype_b;
  std::vector<uint64_t> shape_a, shape_b;
  std::string where_a, where_b;  // file and key (and index line) of each side
  Status status = Status::Pass;
  std::string reason;
  Resolved standard;
  std::optional<Metrics> metrics;
};

struct Divergence {
  int64_t step = -1, rank = -1, seq = -1, call = -1;
  std::string phase, op;
  bool inputs_diverged = false;  // some input of this op already differed
  std::vector<size_t> failed;    // indices into Result::entries
};

struct Options {
  EngineOptions engine;
  std::vector<int64_t> steps, ranks;  // empty: all
  std::string tensor_glob;            // files mode: only tensors whose name matches
  bool strict_unmatched = false;      // unmatched entries count as divergence
};

struct Result {
  std::string mode;  // "dumps" or "files"
  std::string path_a, path_b;
  std::vector<Entry> entries;
  std::vector<std::string> unmatched_groups;  // step/rank directories present on one side only
  std::vector<std::string> warnings;
  // Per compared (step, rank): the first op (in A's execution order) with a failing tensor, and
  // the first op whose outputs fail while all its inputs pass (the op that introduced divergence).
  std::vector<Divergence> first_divergent, introduced_by;
  size_t n_pass = 0, n_fail = 0, n_ignored = 0, n_skipped = 0, n_error = 0, n_only_a = 0,
         n_only_b = 0;
  EngineStats engine;
  bool strict_unmatched = false;
  int exit_code() const;  // 0 all pass, 1 divergence, 2 an entry could not be read
};

// Throws Error (exit status 2) when an input as a whole cannot be read.
Result compare_paths(const std::string& a, const std::string& b, const Policy& policy,
                     const Options& opt);

// "[1, 2, 3]" position of a C-order linear index.
std::string unravel(uint64_t index, const std::vector<uint64_t>& shape);

}  // namespace swc
