#include "dump_index.h"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <tuple>

#include "errors.h"

namespace fs = std::filesystem;

namespace swc {
namespace {

bool numbered(const std::string& name, const char* prefix, int64_t* n) {
  const size_t p = std::strlen(prefix);
  if (name.size() <= p || name.compare(0, p, prefix) != 0) return false;
  for (size_t i = p; i < name.size(); ++i)
    if (!std::isdigit(static_cast<unsigned char>(name[i]))) return false;
  *n = std::stoll(name.substr(p));
  return true;
}

std::vector<std::pair<int64_t, fs::path>> numbered_dirs(const fs::path& dir, const char* prefix) {
  std::vector<std::pair<int64_t, fs::path>> out;
  std::error_code ec;
  for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    int64_t n;
    if (it->is_directory() && numbered(it->path().filename().string(), prefix, &n))
      out.emplace_back(n, it->path());
  }
  if (ec) throw Error(dir.string(), "cannot list directory: " + ec.message());
  std::sort(out.begin(), out.end());
  return out;
}

template <class T>
T field(const nlohmann::json& j, const char* key, const std::string& where) {
  auto it = j.find(key);
  if (it == j.end()) throw Error(where, std::string("record lacks field '") + key + "'");
  try {
    return it->get<T>();
  } catch (const nlohmann::json::exception&) {
    throw Error(where, std::string("field '") + key + "' has the wrong type: " + it->dump());
  }
}

std::string signature(const DumpOp& op, const std::vector<DumpEntry>& entries) {
  std::string s = op.name();
  for (size_t i = op.first; i < op.first + op.count; ++i) {
    const DumpEntry& e = entries[i];
    if (e.io != "input") continue;
    s += "|" + e.dtype + "[";
    for (uint64_t d : e.shape) s += std::to_string(d) + ",";
    s += "]";
  }
  return s;
}

// Groups the entries by op (in op order), checks each op's input count and fills signatures.
// by_seq: seq -> index in rd.ops of every op record read.
void group_ops(RankDump& rd, std::map<int64_t, size_t>& by_seq) {
  std::vector<size_t> owner(rd.entries.size());
  for (size_t i = 0; i < rd.entries.size(); ++i) {
    const DumpEntry& e = rd.entries[i];
    auto it = by_seq.find(e.seq);
    if (it == by_seq.end()) {  // a tensor record without its op record (older dumps)
      DumpOp op;
      op.seq = e.seq;
      op.call = e.call;
      op.line = e.line;
      op.op = e.op;
      op.overload = e.overload;
      op.phase = e.phase;
      it = by_seq.emplace(e.seq, rd.ops.size()).first;
      rd.ops.push_back(std::move(op));
    }
    owner[i] = it->second;
  }
  std::vector<size_t> order(rd.entries.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::stable_sort(order.begin(), order.end(),
                   [&](size_t x, size_t y) { return owner[x] < owner[y]; });
  std::vector<DumpEntry> sorted;
  sorted.reserve(order.size());
  for (size_t i : order) sorted.push_back(std::move(rd.entries[i]));
  rd.entries.swap(sorted);
  size_t k = 0;
  for (size_t o = 0; o < rd.ops.size(); ++o) {
    DumpOp& op = rd.ops[o];
    op.first = k;
    int64_t inputs = 0;
    while (k < rd.entries.size() && owner[order[k]] == o) inputs += rd.entries[k++].io == "input";
    op.count = k - op.first;
    op.signature = signature(op, rd.entries);
    if (op.listed_inputs >= 0 && op.listed_inputs != inputs)
      rd.damage.push_back(
          fmt::format("{}:{}: op record {} call {} lists {} tensor inputs, {} found",
                      rd.dir + "/index.jsonl", op.line, op.op, op.call, op.listed_inputs, inputs));
  }
}

RankDump read_rank(const fs::path& dir, int64_t step, int64_t rank) {
  RankDump rd;
  rd.step = step;
  rd.rank = rank;
  rd.dir = dir.string();
  const fs::path index = dir / "index.jsonl";
  std::ifstream in(index, std::ios::binary);
  if (!in)
    throw Error(index.string(), std::string("cannot open dump index: ") + std::strerror(errno));
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (in.bad()) throw Error(index.string(), "read error");
  size_t start = 0;
  int64_t line_no = 0, n_ops = 0, n_tensors = 0, end_line = 0;
  bool end_promised = false;
  std::optional<nlohmann::json> end_rec;
  std::map<int64_t, size_t> by_seq;                                   // seq -> index in rd.ops
  std::map<std::tuple<int64_t, std::string, int64_t>, int64_t> seen;  // (seq, io, pos) -> line
  while (start < text.size()) {
    size_t end = text.find('\n', start);
    const bool terminated = end != std::string::npos;
    if (!terminated) end = text.size();
    const std::string line = text.substr(start, end - start);
    start = end + 1;
    ++line_no;
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    const std::string where = index.string() + ":" + std::to_string(line_no);
    if (const size_t at = find_control_byte(line); at != std::string::npos) {
      if (!terminated) {  // a crash can leave the unwritten tail of the file zero-filled
        rd.cut_short.push_back(where + ": an incomplete last record (zero bytes after a crash)");
        break;
      }
      throw Error(where, fmt::format("record holds the control byte 0x{:02x} at column {}: corrupt "
                                     "index (a newline or bytes overwritten)",
                                     static_cast<unsigned char>(line[at]), at + 1));
    }
    nlohmann::json j;
    try {
      j = nlohmann::json::parse(line);
    } catch (const nlohmann::json::exception& e) {
      if (!terminated) {
        rd.cut_short.push_back(
            where + ": an incomplete last record (the capture was interrupted while writing it)");
        break;
      }
      throw Error(where, std::string("invalid JSON record: ") + e.what());
    }
    if (!j.is_object()) throw Error(where, "record is not a JSON object");
    if (end_rec) {
      rd.damage.push_back(where + ": a record after the end record (line " +
                          std::to_string(end_line) + ")");
      continue;
    }
    const std::string kind = j.value("kind", std::string("tensor"));
    if (kind == "meta") {
      const auto it = j.find("end_record");
      end_promised = it != j.end() && it->is_boolean() && it->get<bool>();
      continue;
    }
    if (kind == "end") {
      end_rec = j;
      end_line = line_no;
      continue;
    }
    if (kind == "op") {
      ++n_ops;
      DumpOp op;
      op.line = line_no;
      op.seq = field<int64_t>(j, "seq", where);
      op.op = field<std::string>(j, "op", where);
      op.overload = j.value("overload", std::string());
      op.call = field<int64_t>(j, "call", where);
      op.phase = field<std::string>(j, "phase", where);
      const auto it = j.find("inputs");
      if (it != j.end() && it->is_number_integer()) op.listed_inputs = it->get<int64_t>();
      if (by_seq.emplace(op.seq, rd.ops.size()).second)
        rd.ops.push_back(std::move(op));
      else
        rd.damage.push_back(where + ": a second op record for seq " + std::to_string(op.seq));
      continue;
    }
    if (kind != "tensor") continue;  // future record kinds
    ++n_tensors;
    DumpEntry e;
    e.index_file = index.string();
    e.line = line_no;
    e.op = field<std::string>(j, "op", where);
    e.overload = j.value("overload", std::string());
    e.call = field<int64_t>(j, "call", where);
    e.phase = field<std::string>(j, "phase", where);
    e.io = field<std::string>(j, "io", where);
    e.pos = field<int64_t>(j, "pos", where);
    e.seq = j.contains("seq") ? field<int64_t>(j, "seq", where) : line_no;
    e.arg = j.value("arg", std::string());
    e.dtype = j.value("dtype", std::string());
    e.alias = j.value("alias", std::string());
    if (j.contains("offset") && j["offset"].is_number_unsigned())
      e.offset = j["offset"].get<uint64_t>();
    if (j.contains("nbytes") && j["nbytes"].is_number_unsigned())
      e.nbytes = j["nbytes"].get<uint64_t>();
    if (j.contains("shape")) e.shape = field<std::vector<uint64_t>>(j, "shape", where);
    if (j.contains("addr") && !j["addr"].is_null()) {
      const auto addr = field<std::vector<uint64_t>>(j, "addr", where);
      if (addr.size() != 2 || addr[1] < addr[0])
        throw Error(where, "field 'addr' is not [lo, hi] with lo <= hi: " + j["addr"].dump());
      e.has_addr = true;
      e.addr_lo = addr[0];
      e.addr_hi = addr[1];
    }
    const auto rd_it = j.find("read");
    e.not_read = rd_it != j.end() && rd_it->is_boolean() && !rd_it->get<bool>();
    if (j.contains("skipped") && !j["skipped"].is_null()) {
      e.skipped = j["skipped"].is_string() ? j["skipped"].get<std::string>() : j["skipped"].dump();
    } else if (!e.not_read) {
      const std::string file = field<std::string>(j, "file", where);
      e.file = (fs::path(file).is_absolute() ? fs::path(file) : dir / file).string();
      e.key = field<std::string>(j, "key", where);
    }
    const auto ins = seen.emplace(std::make_tuple(e.seq, e.io, e.pos), line_no);
    if (!ins.second) {
      rd.damage.push_back(fmt::format("{}: a second record for {} call {} {} {} (first at line {})",
                                      where, e.op, e.call, e.io, e.pos, ins.first->second));
      continue;
    }
    rd.entries.push_back(std::move(e));
  }
  group_ops(rd, by_seq);
  const std::string idx = index.string();
  if (end_rec) {
    const int64_t want_ops = end_rec->value("ops", int64_t{-1});
    const int64_t want_tensors = end_rec->value("tensors", int64_t{-1});
    if (want_ops != n_ops || want_tensors != n_tensors)
      rd.damage.push_back(fmt::format(
          "{}:{}: the end record counts {} op and {} tensor records; the index holds {} and {}",
          idx, end_line, want_ops, want_tensors, n_ops, n_tensors));
  } else if (end_promised && rd.cut_short.empty()) {
    rd.cut_short.push_back(idx +
                           ": no end record (the run did not close its dump: it stopped early, "
                           "or the index was cut short)");
  }
  return rd;
}

}  // namespace

bool is_dump_dir(const std::string& path) {
  std::error_code ec;
  if (!fs::is_directory(path, ec)) return false;
  if (fs::exists(fs::path(path) / "index.jsonl", ec)) return true;
  return !numbered_dirs(path, "step").empty() || !numbered_dirs(path, "rank").empty();
}

std::vector<RankDump> read_dump(const std::string& path) {
  std::error_code ec;
  const fs::path p(path);
  if (!fs::exists(p, ec)) throw Error(path, "does not exist");
  if (!fs::is_directory(p, ec)) throw Error(path, "is not a directory");
  std::vector<RankDump> out;
  if (fs::exists(p / "index.jsonl", ec)) {
    // A rank directory given directly: step and rank from its path when they follow the layout.
    int64_t step = -1, rank = -1;
    const fs::path abs = fs::absolute(p).lexically_normal();
    const fs::path r = abs.filename().empty() ? abs.parent_path() : abs;
    numbered(r.filename().string(), "rank", &rank);
    numbered(r.parent_path().filename().string(), "step", &step);
    out.push_back(read_rank(p, step, rank));
    return out;
  }
  auto steps = numbered_dirs(p, "step");
  if (!steps.empty()) {
    for (const auto& s : steps)
      for (const auto& r : numbered_dirs(s.second, "rank"))
        out.push_back(read_rank(r.second, s.first, r.first));
    return out;
  }
  auto ranks = numbered_dirs(p, "rank");
  if (!ranks.empty()) {
    int64_t step = -1;
    numbered(fs::absolute(p).lexically_normal().filename().string(), "step", &step);
    for (const auto& r : ranks) out.push_back(read_rank(r.second, step, r.first));
    return out;
  }
  throw Error(path, "not a stridewise dump: no index.jsonl, no step*/ and no rank*/ directories");
}

}  // namespace swc
