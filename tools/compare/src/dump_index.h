// Reading a stridewise dump: DIR/step{N}/rank{R}/index.jsonl plus safetensors shards.
// The layout is specified in docs/compare.md.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace swc {

struct DumpEntry {
  int64_t seq = -1;      // op sequence number in execution order within (step, rank)
  std::string op;        // "aten::gather"
  std::string overload;  // "default"
  int64_t call = -1;     // per (op, phase) call counter
  std::string phase;     // "forward" | "backward"
  std::string io;        // "input" | "output"
  int64_t pos = -1;      // position among the op's tensor inputs or outputs
  std::string arg;       // argument name when known
  std::string dtype;     // torch dtype name as recorded
  std::vector<uint64_t> shape;
  std::string file;     // absolute path of the shard; empty when the tensor was not stored
  std::string key;      // tensor key in the shard
  std::string skipped;  // reason the tensor data was not stored (empty when stored)
  int64_t offset = -1, nbytes = -1;  // where the index says the data is (-1: not recorded)
  bool not_read = false;  // "read": false: the op overwrites this input without reading it
  bool has_addr = false;  // "addr" present: [addr_lo, addr_hi) bytes the view spans
  uint64_t addr_lo = 0, addr_hi = 0;
  std::string alias;       // "written" (input the op writes), "new" | "written" | "view" (output)
  std::string index_file;  // index.jsonl path and line, for messages
  int64_t line = 0;

  // True when the op wrote these bytes: a written input, or an output that is fresh or written.
  bool is_write() const { return alias == "written" || (io == "output" && alias == "new"); }
};

// One recorded op call and its tensor records (entries[first, first + count) of its RankDump).
struct DumpOp {
  int64_t seq = -1, call = -1, line = 0;
  int64_t listed_inputs = -1;  // the op record's "inputs" count (-1: not recorded)
  std::string op, overload, phase;
  std::string signature;  // name() + input dtypes and shapes: the alignment key
  size_t first = 0, count = 0;

  // "phase|op.overload": what pairs an op whose shapes changed.
  std::string name() const { return phase + "|" + op + "." + overload; }
};

struct RankDump {
  int64_t step = -1, rank = -1;  // -1: unknown (a rank directory given directly)
  std::string dir;
  std::vector<DumpEntry> entries;  // in file order (= execution order), grouped by op
  std::vector<DumpOp> ops;         // in execution order
  std::vector<std::string> warnings;
  // Completeness. cut_short: the run may have stopped early (a torn last line, or the meta
  // record promised an end record that is missing); allowed on the side --subset names.
  // damage: records duplicated, lost or contradicting the end record; never allowed.
  std::vector<std::string> cut_short, damage;
};

// True when path is a directory that looks like a dump root, a step directory or a rank directory.
bool is_dump_dir(const std::string& path);

// Reads every rank directory under path. path may be the dump root (step*/rank*/), one step
// directory (rank*/) or one rank directory (index.jsonl). Throws Error naming the file (and line)
// and the reason for unreadable index files and records that are not valid JSON or lack a field.
// A torn last line, a duplicated record and a count that contradicts the end record are listed
// in cut_short / damage instead: the comparison still runs and the verdict says INCOMPLETE.
std::vector<RankDump> read_dump(const std::string& path);

}  // namespace swc
