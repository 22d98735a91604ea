#include "dump_index.h"

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

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
  int64_t line_no = 0;
  while (start < text.size()) {
    size_t end = text.find('\n', start);
    const bool terminated = end != std::string::npos;
    if (!terminated) end = text.size();
    const std::string line = text.substr(start, end - start);
    start = end + 1;
    ++line_no;
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    const std::string where = index.string() + ":" + std::to_string(line_no);
    nlohmann::json j;
    try {
      j = nlohmann::json::parse(line);
    } catch (const nlohmann::json::exception& e) {
      if (!terminated) {
        rd.warnings.push_back(
            where + ": ignored an incomplete last record (capture interrupted while writing it)");
        break;
      }
      throw Error(where, std::string("invalid JSON record: ") + e.what());
    }
    if (!j.is_object()) throw Error(where, "record is not a JSON object");
    const std::string kind = j.value("kind", std::string("tensor"));
    if (kind != "tensor") continue;  // "meta" and future record kinds
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
    if (j.contains("shape")) e.shape = field<std::vector<uint64_t>>(j, "shape", where);
    if (j.contains("skipped") && !j["skipped"].is_null()) {
      e.skipped = j["skipped"].is_string() ? j["skipped"].get<std::string>() : j["skipped"].dump();
    } else {
      const std::string file = field<std::string>(j, "file", where);
      e.file = (fs::path(file).is_absolute() ? fs::path(file) : dir / file).string();
      e.key = field<std::string>(j, "key", where);
    }
    rd.entries.push_back(std::move(e));
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
