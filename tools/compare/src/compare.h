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

// NotRead: the op overwrites that input without reading it (the dump marks it "read": false);
// its values are not compared and it counts as agreeing.
enum class Status { Pass, Fail, Ignored, Skipped, Error, OnlyA, OnlyB, NotRead };
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

// An op call as the report names it.
struct OpRef {
  int64_t seq = -1, call = -1;
  std::string op, overload, phase;
  std::string side;   // "A", "B" (one run only) or "both"
  std::string where;  // index file:line of each side that has it
};

// Where a difference between the runs starts. kind:
//   introduced   the op's inputs agree (or are not read) and an output differs: it made the
//                difference;
//   one_sided    an input differs, and the last op that wrote its memory ran in one run only
//                (`writer`);
//   outside      an input differs and no recorded op wrote its memory in either run: it
//                entered from outside the dump (a parameter, a loaded buffer, a model input);
//   unexplained  an input differs although its last recorded writer (`writer`) agreed: a write
//                the dump did not see (a filtered op, a write outside the dispatcher);
//   uninitialized an input differs and its last writer left it uninitialized (empty, resize_);
//   unknown      an input differs and the dump has no addresses to say where it came from.
struct Origin {
  int64_t step = -1, rank = -1;
  OpRef op;
  std::string kind, detail;
  std::optional<OpRef> writer;
  std::vector<size_t> failed;  // indices into Result::entries: the differing tensors
  std::vector<OpRef> chain;    // ops the difference reached from here, in order (first ones)
  size_t chain_total = 0;      // how many ops it reached in all (the chain is cut for the report)
};

struct Options {
  EngineOptions engine;
  std::vector<int64_t> steps, ranks;  // empty: all
  std::string tensor_glob;            // files mode: only tensors whose name matches
  bool strict_unmatched = false;      // unmatched entries count as divergence
  char subset = 0;                    // 'A' or 'B': that side may hold fewer ops (stopped early,
                                      // filtered); its missing records do not make it incomplete
};

constexpr int kExitIncomplete = 3;

struct Result {
  std::string mode;  // "dumps" or "files"
  std::string path_a, path_b;
  std::vector<Entry> entries;
  std::vector<std::string> unmatched_groups;  // step/rank directories present on one side only
  std::vector<std::string> warnings;
  // Every origin of a difference, in execution order per (step, rank); first_divergent holds
  // the earliest one of each (step, rank), introduced_by the earliest `introduced` one.
  std::vector<Origin> origins, first_divergent, introduced_by;
  // Why the comparison is incomplete (records on one side only, a damaged or cut-short index);
  // empty when complete. The side named by Options::subset may lack ops without this.
  std::vector<std::string> incomplete;
  size_t n_pass = 0, n_fail = 0, n_ignored = 0, n_skipped = 0, n_error = 0, n_only_a = 0,
         n_only_b = 0, n_not_read = 0;
  size_t only_a_ops = 0, only_b_ops = 0;  // op calls recorded in one run only
  EngineStats engine;
  bool strict_unmatched = false;
  // 0 every pair passes and nothing is missing, 1 divergence, 2 an entry could not be read,
  // 3 incomplete (kExitIncomplete). Divergence outranks incompleteness: it is a finding.
  int exit_code() const;
  const char* verdict() const;
};

// Throws Error (exit status 2) when an input as a whole cannot be read.
Result compare_paths(const std::string& a, const std::string& b, const Policy& policy,
                     const Options& opt);

// "[1, 2, 3]" position of a C-order linear index.
std::string unravel(uint64_t index, const std::vector<uint64_t>& shape);

}  // namespace swc
