#include "compare.h"

#include <fmt/format.h>
#include <fnmatch.h>

#include <filesystem>
#include <map>
#include <memory>
#include <set>

#include "dump_index.h"
#include "errors.h"

namespace fs = std::filesystem;

namespace swc {

const char* status_name(Status s) {
  switch (s) {
    case Status::Pass:
      return "PASS";
    case Status::Fail:
      return "FAIL";
    case Status::Ignored:
      return "IGNORED";
    case Status::Skipped:
      return "SKIPPED";
    case Status::Error:
      return "ERROR";
    case Status::OnlyA:
      return "ONLY_A";
    case Status::OnlyB:
      return "ONLY_B";
  }
  return "?";
}

std::string unravel(uint64_t index, const std::vector<uint64_t>& shape) {
  std::vector<uint64_t> idx(shape.size());
  for (size_t k = shape.size(); k-- > 0;) {
    if (shape[k] == 0) return "[]";
    idx[k] = index % shape[k];
    index /= shape[k];
  }
  return shape_str(idx);
}

int Result::exit_code() const {
  if (n_error) return 2;
  if (n_fail || (strict_unmatched && (n_only_a || n_only_b || !unmatched_groups.empty()))) return 1;
  return 0;
}

namespace {

struct Work {
  std::vector<Job> jobs;
  std::vector<size_t> job_entry;
};

// Decides what to do with a matched pair: a status now, or a job for the engine.
void prepare(Entry& e, size_t index, const TensorRef& a, const TensorRef& b, const Policy& policy,
             Work& w) {
  e.shape_a = a.shape;
  e.shape_b = b.shape;
  if (e.dtype_a.empty()) e.dtype_a = a.dtype ? dtype_name(*a.dtype) : a.dtype_code;
  if (e.dtype_b.empty()) e.dtype_b = b.dtype ? dtype_name(*b.dtype) : b.dtype_code;
  e.standard = policy.resolve(e.op.empty() ? e.name : e.op, e.overload, a.dtype);
  const Standard& s = e.standard.standard;
  if (s.kind == Standard::Kind::Ignore) {
    e.status = Status::Ignored;
    e.reason = "standard 'ignore' (" + e.standard.why + ")";
    return;
  }
  if (!a.dtype || !b.dtype) {
    e.status = Status::Skipped;
    e.reason = "dtype " + (a.dtype ? b.dtype_code : a.dtype_code) + " is not compared";
    return;
  }
  if (a.shape != b.shape) {
    e.status = Status::Fail;
    e.reason = "shape mismatch: " + shape_str(a.shape) + " vs " + shape_str(b.shape);
    return;
  }
  if (s.kind == Standard::Kind::Bitwise && *a.dtype != *b.dtype) {
    e.status = Status::Fail;
    e.reason = fmt::format("dtype mismatch under a bitwise standard: {} vs {}",
                           dtype_name(*a.dtype), dtype_name(*b.dtype));
    return;
  }
  Job j;
  j.a = a;
  j.b = b;
  j.tol = s.kind == Standard::Kind::Tolerance ? s.tolerance() : Tolerance{0, 0};
  w.jobs.push_back(std::move(j));
  w.job_entry.push_back(index);
}

void judge(Entry& e, const Job& j) {
  if (!j.error.empty()) {
    e.status = Status::Error;
    e.reason = j.error;
    return;
  }
  const bool same = *j.a.dtype == *j.b.dtype;
  e.metrics = finalize(j.total, same);
  const Metrics& m = *e.metrics;
  const Standard& s = e.standard.standard;
  if (s.kind == Standard::Kind::Bitwise) {
    if (m.bit_mismatch == 0) {
      e.status = Status::Pass;
    } else {
      e.status = Status::Fail;
      e.reason = fmt::format("{} of {} elements differ bitwise; first at {}: a={:.9g} b={:.9g}",
                             m.bit_mismatch, m.n, unravel(m.first_bit_mismatch, j.a.shape),
                             m.first_bit_a, m.first_bit_b);
    }
    return;
  }
  if (m.wrong_fraction <= s.max_wrong_fraction) {
    e.status = Status::Pass;
    return;
  }
  e.status = Status::Fail;
  e.reason = fmt::format(
      "{} of {} elements wrong (fraction {:.3g} > {:g}; wrong = |a-b| > {:g} and rel > {:g}",
      m.wrong, m.n, m.wrong_fraction, s.max_wrong_fraction, s.atol, s.rtol);
  if (m.nonfinite_mismatch)
    e.reason += fmt::format(", or NaN/Inf mismatch: {}", m.nonfinite_mismatch);
  e.reason += fmt::format("); first at {}: a={:.9g} b={:.9g}", unravel(m.first_wrong, j.a.shape),
                          m.first_wrong_a, m.first_wrong_b);
}

std::vector<TensorRef> load_tensor_file(const std::string& path,
                                        std::vector<std::string>* warnings) {
  FileReader r(path);
  if (looks_like_npy(r)) return {parse_npy(path, r, warnings)};
  SafetensorsFile f = parse_safetensors(path, r);
  warnings->insert(warnings->end(), f.warnings.begin(), f.warnings.end());
  return f.tensors;
}

void run_and_judge(Result& res, Work& w, const Options& opt) {
  FileCache files;
  res.engine = run_jobs(w.jobs, files, opt.engine);
  for (size_t k = 0; k < w.jobs.size(); ++k) judge(res.entries[w.job_entry[k]], w.jobs[k]);
}

void compare_files(Result& res, const Policy& policy, const Options& opt) {
  std::vector<TensorRef> ta = load_tensor_file(res.path_a, &res.warnings);
  std::vector<TensorRef> tb = load_tensor_file(res.path_b, &res.warnings);
  auto keep = [&](std::vector<TensorRef>& v) {
    if (opt.tensor_glob.empty()) return;
    std::vector<TensorRef> out;
    for (auto& t : v)
      if (fnmatch(opt.tensor_glob.c_str(), t.name.c_str(), 0) == 0 || v.size() == 1)
        out.push_back(t);
    v.swap(out);
  };
  keep(ta);
  keep(tb);
  std::vector<std::pair<const TensorRef*, const TensorRef*>> pairs;
  std::vector<const TensorRef*> only_b;
  if (ta.size() == 1 && tb.size() == 1) {
    pairs.emplace_back(&ta[0], &tb[0]);
  } else {
    std::map<std::string, const TensorRef*> bmap;
    for (const auto& t : tb) bmap[t.name] = &t;
    for (const auto& t : ta) {
      auto it = bmap.find(t.name);
      pairs.emplace_back(&t, it == bmap.end() ? nullptr : it->second);
      if (it != bmap.end()) bmap.erase(it);
    }
    for (const auto& kv : bmap) only_b.push_back(kv.second);
  }
  res.entries.reserve(pairs.size() + only_b.size());
  Work w;
  for (const auto& pr : pairs) {
    Entry e;
    const TensorRef& a = *pr.first;
    e.name = a.name == a.path ? fs::path(a.path).filename().string() : a.name;
    e.where_a = a.name == a.path ? a.path : a.path + ":" + a.name;
    if (!pr.second) {
      e.status = Status::OnlyA;
      e.reason = "tensor only in A";
      e.shape_a = a.shape;
      e.dtype_a = a.dtype ? dtype_name(*a.dtype) : a.dtype_code;
      res.entries.push_back(std::move(e));
      continue;
    }
    const TensorRef& b = *pr.second;
    e.where_b = b.name == b.path ? b.path : b.path + ":" + b.name;
    res.entries.push_back(std::move(e));
    prepare(res.entries.back(), res.entries.size() - 1, a, b, policy, w);
  }
  for (const TensorRef* b : only_b) {
    Entry e;
    e.name = b->name;
    e.where_b = b->path + ":" + b->name;
    e.status = Status::OnlyB;
    e.reason = "tensor only in B";
    e.shape_b = b->shape;
    e.dtype_b = b->dtype ? dtype_name(*b->dtype) : b->dtype_code;
    res.entries.push_back(std::move(e));
  }
  run_and_judge(res, w, opt);
}

std::string group_name(const RankDump& d) {
  return fmt::format("step {} rank {}", d.step < 0 ? std::string("?") : std::to_string(d.step),
                     d.rank < 0 ? std::string("?") : std::to_string(d.rank));
}

std::string entry_key(const DumpEntry& e) {
  return fmt::format("{}|{}|{}|{}|{}", e.phase, e.op, e.call, e.io, e.pos);
}

void fill_identity(Entry& e, const DumpEntry& d, const RankDump& g) {
  e.step = g.step;
  e.rank = g.rank;
  e.seq = d.seq;
  e.call = d.call;
  e.pos = d.pos;
  e.phase = d.phase;
  e.op = d.op;
  e.overload = d.overload;
  e.io = d.io;
  e.arg = d.arg;
  e.name = fmt::format("{}[{}] {} {}#{}", d.op, d.call, d.phase, d.io, d.pos);
}

// Looks a dump entry's tensor up in its shard; returns nullptr and sets the entry's error.
const TensorRef* find_tensor(const DumpEntry& d,
                             std::map<std::string, std::shared_ptr<SafetensorsFile>>& shards,
                             std::map<std::string, std::string>& shard_errors, Entry& e,
                             Result& res) {
  if (!shard_errors.count(d.file) && !shards.count(d.file)) {
    try {
      auto f = std::make_shared<SafetensorsFile>(read_safetensors(d.file));
      res.warnings.insert(res.warnings.end(), f->warnings.begin(), f->warnings.end());
      shards[d.file] = f;
    } catch (const Error& err) {
      shard_errors[d.file] = err.what();
    }
  }
  if (shard_errors.count(d.file)) {
    e.status = Status::Error;
    e.reason = shard_errors[d.file];
    return nullptr;
  }
  const TensorRef* t = shards[d.file]->find(d.key);
  if (!t) {
    e.status = Status::Error;
    e.reason = fmt::format("{}: tensor '{}' (listed at {}:{}) is missing from the shard header",
                           d.file, d.key, d.index_file, d.line);
  }
  return t;
}

void compare_dumps(Result& res, const Policy& policy, const Options& opt) {
  std::vector<RankDump> da = read_dump(res.path_a), db = read_dump(res.path_b);
  auto wanted = [&](const RankDump& d) {
    auto in = [](const std::vector<int64_t>& v, int64_t x) {
      return v.empty() || std::count(v.begin(), v.end(), x);
    };
    return in(opt.steps, d.step) && in(opt.ranks, d.rank);
  };
  for (auto* v : {&da, &db}) {
    for (const RankDump& d : *v)
      res.warnings.insert(res.warnings.end(), d.warnings.begin(), d.warnings.end());
    v->erase(std::remove_if(v->begin(), v->end(), [&](const RankDump& d) { return !wanted(d); }),
             v->end());
  }
  std::vector<std::pair<const RankDump*, const RankDump*>> groups;
  const bool direct = da.size() == 1 && db.size() == 1 &&
                      (fs::exists(fs::path(res.path_a) / "index.jsonl") ||
                       fs::exists(fs::path(res.path_b) / "index.jsonl"));
  if (direct) {
    groups.emplace_back(&da[0], &db[0]);
  } else {
    std::map<std::pair<int64_t, int64_t>, const RankDump*> bmap;
    for (const auto& d : db) bmap[{d.step, d.rank}] = &d;
    for (const auto& d : da) {
      auto it = bmap.find({d.step, d.rank});
      if (it == bmap.end()) {
        res.unmatched_groups.push_back(group_name(d) + ": only in A (" + d.dir + ")");
        continue;
      }
      groups.emplace_back(&d, it->second);
      bmap.erase(it);
    }
    for (const auto& kv : bmap)
      res.unmatched_groups.push_back(group_name(*kv.second) + ": only in B (" + kv.second->dir +
                                     ")");
  }
  size_t total = 0;
  for (const auto& g : groups) total += g.first->entries.size() + g.second->entries.size();
  res.entries.reserve(total);
  std::map<std::string, std::shared_ptr<SafetensorsFile>> shards;
  std::map<std::string, std::string> shard_errors;
  Work w;
  std::vector<std::pair<size_t, size_t>> ranges;
  for (const auto& g : groups) {
    const RankDump &ga = *g.first, &gb = *g.second;
    const size_t begin = res.entries.size();
    std::map<std::string, const DumpEntry*> bmap;
    for (const DumpEntry& d : gb.entries)
      if (!bmap.emplace(entry_key(d), &d).second)
        res.warnings.push_back(
            fmt::format("{}:{}: duplicate record {} ignored", d.index_file, d.line, entry_key(d)));
    std::set<const DumpEntry*> used;
    for (const DumpEntry& d : ga.entries) {
      Entry e;
      fill_identity(e, d, ga);
      e.dtype_a = d.dtype;
      e.where_a = fmt::format("{}:{}", d.index_file, d.line);
      auto it = bmap.find(entry_key(d));
      if (it == bmap.end() || used.count(it->second)) {
        e.status = Status::OnlyA;
        e.reason = "no matching record in B";
        e.shape_a = d.shape;
        res.entries.push_back(std::move(e));
        continue;
      }
      const DumpEntry& o = *it->second;
      used.insert(&o);
      e.dtype_b = o.dtype;
      e.where_b = fmt::format("{}:{}", o.index_file, o.line);
      res.entries.push_back(std::move(e));
      Entry& ent = res.entries.back();
      if (!d.skipped.empty() || !o.skipped.empty()) {
        ent.status = Status::Skipped;
        ent.reason = "tensor not stored: " + (d.skipped.empty() ? o.skipped : d.skipped);
        ent.shape_a = d.shape;
        ent.shape_b = o.shape;
        continue;
      }
      const TensorRef* ta = find_tensor(d, shards, shard_errors, ent, res);
      const TensorRef* tb = ta ? find_tensor(o, shards, shard_errors, ent, res) : nullptr;
      if (!ta || !tb) continue;
      prepare(ent, res.entries.size() - 1, *ta, *tb, policy, w);
    }
    for (const DumpEntry& o : gb.entries) {
      if (used.count(&o)) continue;
      Entry e;
      fill_identity(e, o, gb);
      e.dtype_b = o.dtype;
      e.shape_b = o.shape;
      e.where_b = fmt::format("{}:{}", o.index_file, o.line);
      e.status = Status::OnlyB;
      e.reason = "no matching record in A";
      res.entries.push_back(std::move(e));
    }
    ranges.emplace_back(begin, res.entries.size());
  }
  run_and_judge(res, w, opt);
  // First divergence per group, in A's execution order (entries are already in that order).
  for (const auto& r : ranges) {
    std::optional<Divergence> first, intro;
    for (size_t i = r.first; i < r.second;) {
      const int64_t seq = res.entries[i].seq;
      size_t j = i;
      Divergence d;
      bool in_bad = false, out_bad = false;
      while (j < r.second && res.entries[j].seq == seq && res.entries[j].status != Status::OnlyB) {
        const Entry& e = res.entries[j];
        if (e.status == Status::Fail || e.status == Status::Error) {
          d.failed.push_back(j);
          (e.io == "input" ? in_bad : out_bad) = true;
        }
        ++j;
      }
      if (j == i) break;  // reached the ONLY_B tail
      const Entry& e0 = res.entries[i];
      d.step = e0.step;
      d.rank = e0.rank;
      d.seq = seq;
      d.call = e0.call;
      d.phase = e0.phase;
      d.op = e0.op;
      d.inputs_diverged = in_bad;
      if (!d.failed.empty() && !first) first = d;
      if (out_bad && !in_bad && !intro) intro = d;
      i = j;
    }
    if (first) res.first_divergent.push_back(*first);
    if (intro) res.introduced_by.push_back(*intro);
  }
}

}  // namespace

Result compare_paths(const std::string& a, const std::string& b, const Policy& policy,
                     const Options& opt) {
  Result res;
  res.path_a = a;
  res.path_b = b;
  res.strict_unmatched = opt.strict_unmatched;
  std::error_code ec;
  const bool da = fs::is_directory(a, ec), db = fs::is_directory(b, ec);
  if (da != db)
    throw UsageError(
        da ? b : a,
        "cannot compare a directory (dump) with a file; give two dumps or two tensor files");
  if (da) {
    res.mode = "dumps";
    compare_dumps(res, policy, opt);
  } else {
    res.mode = "files";
    compare_files(res, policy, opt);
  }
  for (const Entry& e : res.entries) {
    switch (e.status) {
      case Status::Pass:
        ++res.n_pass;
        break;
      case Status::Fail:
        ++res.n_fail;
        break;
      case Status::Ignored:
        ++res.n_ignored;
        break;
      case Status::Skipped:
        ++res.n_skipped;
        break;
      case Status::Error:
        ++res.n_error;
        break;
      case Status::OnlyA:
        ++res.n_only_a;
        break;
      case Status::OnlyB:
        ++res.n_only_b;
        break;
    }
  }
  return res;
}

}  // namespace swc
