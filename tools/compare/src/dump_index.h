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
  std::string file;        // absolute path of the shard; empty when the tensor was not stored
  std::string key;         // tensor key in the shard
  std::string skipped;     // reason the tensor data was not stored (empty when stored)
  std::string index_file;  // index.jsonl path and line, for messages
  int64_t line = 0;
};

struct RankDump {
  int64_t step = -1, rank = -1;  // -1: unknown (a rank directory given directly)
  std::string dir;
  std::vector<DumpEntry> entries;  // in file order (= execution order)
  std::vector<std::string> warnings;
};

// True when path is a directory that looks like a dump root, a step directory or a rank directory.
bool is_dump_dir(const std::string& path);

// Reads every rank directory under path. path may be the dump root (step*/rank*/), one step
// directory (rank*/) or one rank directory (index.jsonl). Throws Error naming the file (and line)
// and the reason for unreadable or corrupt index files. A truncated last line (a capture that was
// killed mid-write) is skipped with a warning.
std::vector<RankDump> read_dump(const std::string& path);

}  // namespace swc
