// sw-compare's dump mode: step/rank pairing, op alignment, tensor pairing, origins and
// completeness (docs/compare.md, "Alignment").
#include <fmt/format.h>

#include <algorithm>
#include <filesystem>
#include <map>
#include <memory>

#include "align.h"
#include "compare_impl.h"
#include "dump_index.h"
#include "errors.h"
#include "trace.h"

namespace fs = std::filesystem;

namespace swc {
namespace detail {
namespace {

std::string group_name(const RankDump& d) {
  return fmt::format("step {} rank {}", d.step < 0 ? std::string("?") : std::to_string(d.step),
                     d.rank < 0 ? std::string("?") : std::to_string(d.rank));
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

// Every shard read so far, or why it could not be read.
struct Shards {
  std::map<std::string, std::shared_ptr<SafetensorsFile>> files;
  std::map<std::string, std::string> errors;
};

// Looks a dump entry's tensor up in its shard; returns nullptr and sets the entry's error.
const TensorRef* find_tensor(const DumpEntry& d, Shards& sh, Entry& e, Result& res) {
  if (!sh.errors.count(d.file) && !sh.files.count(d.file)) {
    try {
      auto f = std::make_shared<SafetensorsFile>(read_safetensors(d.file));
      res.warnings.insert(res.warnings.end(), f->warnings.begin(), f->warnings.end());
      sh.files[d.file] = f;
    } catch (const Error& err) {
      sh.errors[d.file] = err.what();
    }
  }
  if (sh.errors.count(d.file)) {
    e.status = Status::Error;
    e.reason = sh.errors[d.file];
    return nullptr;
  }
  const TensorRef* t = sh.files[d.file]->find(d.key);
  if (!t) {
    e.status = Status::Error;
    e.reason = fmt::format("{}: tensor '{}' (listed at {}:{}) is missing from the shard header",
                           d.file, d.key, d.index_file, d.line);
  } else if ((d.offset >= 0 && static_cast<uint64_t>(d.offset) != t->offset) ||
             (d.nbytes >= 0 && static_cast<uint64_t>(d.nbytes) != t->nbytes)) {
    // Both were written together; a header that moved (a corrupt length field) would otherwise
    // read other bytes as this tensor.
    e.status = Status::Error;
    e.reason = printable(fmt::format(
        "{}: tensor '{}': {}:{} places it at bytes [{}, +{}), the shard header at [{}, +{}): "
        "corrupt shard header or index",
        d.file, d.key, d.index_file, d.line, d.offset, d.nbytes, t->offset, t->nbytes));
    return nullptr;
  }
  return t;
}

void one_sided_rows(Result& res, const DumpOp& op, const RankDump& g, bool in_a, TracedOp& traced) {
  for (size_t k = op.first; k < op.first + op.count; ++k) {
    const DumpEntry& d = g.entries[k];
    Entry e;
    fill_identity(e, d, g);
    (in_a ? e.dtype_a : e.dtype_b) = d.dtype;
    (in_a ? e.shape_a : e.shape_b) = d.shape;
    (in_a ? e.where_a : e.where_b) = fmt::format("{}:{}", d.index_file, d.line);
    e.status = in_a ? Status::OnlyA : Status::OnlyB;
    e.reason = in_a ? "the op call ran in A only" : "the op call ran in B only";
    traced.tensors.push_back({res.entries.size(), in_a ? &d : nullptr, in_a ? nullptr : &d});
    res.entries.push_back(std::move(e));
  }
}

// The rows of two op calls the alignment paired: tensors by (io, pos).
void paired_rows(Result& res, const RankDump& ga, const DumpOp& oa, const RankDump& gb,
                 const DumpOp& ob, const Policy& policy, Shards& sh, Work& w, TracedOp& traced) {
  std::map<std::pair<std::string, int64_t>, const DumpEntry*> bmap;
  for (size_t k = ob.first; k < ob.first + ob.count; ++k)
    bmap.emplace(std::make_pair(gb.entries[k].io, gb.entries[k].pos), &gb.entries[k]);
  for (size_t k = oa.first; k < oa.first + oa.count; ++k) {
    const DumpEntry& d = ga.entries[k];
    Entry e;
    fill_identity(e, d, ga);
    e.dtype_a = d.dtype;
    e.where_a = fmt::format("{}:{}", d.index_file, d.line);
    auto it = bmap.find({d.io, d.pos});
    const size_t index = res.entries.size();
    if (it == bmap.end()) {
      e.status = Status::OnlyA;
      e.reason = "no matching tensor record in B's call";
      e.shape_a = d.shape;
      traced.tensors.push_back({index, &d, nullptr});
      res.entries.push_back(std::move(e));
      continue;
    }
    const DumpEntry& o = *it->second;
    bmap.erase(it);
    e.dtype_b = o.dtype;
    e.where_b = fmt::format("{}:{}", o.index_file, o.line);
    e.shape_a = d.shape;
    e.shape_b = o.shape;
    if (d.call != o.call)
      e.name += fmt::format(" (B call {})", o.call);  // an extra call in one run shifts counts
    traced.tensors.push_back({index, &d, &o});
    res.entries.push_back(std::move(e));
    Entry& ent = res.entries.back();
    if (d.not_read || o.not_read) {
      ent.status = Status::NotRead;
      ent.reason = d.not_read && o.not_read
                       ? "not read: the op overwrites this input (the dump stores no bytes)"
                       : fmt::format("not read in {} (the op overwrites it): not compared",
                                     d.not_read ? "A" : "B");
      continue;
    }
    if (!d.skipped.empty() || !o.skipped.empty()) {
      ent.status = Status::Skipped;
      ent.reason = "tensor not stored: " + (d.skipped.empty() ? o.skipped : d.skipped);
      continue;
    }
    const TensorRef* ta = find_tensor(d, sh, ent, res);
    const TensorRef* tb = ta ? find_tensor(o, sh, ent, res) : nullptr;
    if (!ta || !tb) continue;
    prepare(ent, index, *ta, *tb, policy, w);
  }
  for (const auto& kv : bmap) {  // tensors of B's call that A's call lacks
    const DumpEntry& o = *kv.second;
    Entry e;
    fill_identity(e, o, gb);
    e.dtype_b = o.dtype;
    e.shape_b = o.shape;
    e.where_b = fmt::format("{}:{}", o.index_file, o.line);
    e.status = Status::OnlyB;
    e.reason = "no matching tensor record in A's call";
    traced.tensors.push_back({res.entries.size(), nullptr, &o});
    res.entries.push_back(std::move(e));
  }
}

std::vector<TracedOp> compare_group(Result& res, const RankDump& ga, const RankDump& gb,
                                    const Policy& policy, Shards& sh, Work& w) {
  auto keys = [](const RankDump& g, bool full) {
    std::vector<std::string> v;
    v.reserve(g.ops.size());
    for (const DumpOp& op : g.ops) v.push_back(full ? op.signature : op.name());
    return v;
  };
  const std::vector<OpPair> pairs =
      align_ops(keys(ga, true), keys(ga, false), keys(gb, true), keys(gb, false));
  std::vector<TracedOp> traced(pairs.size());
  for (size_t i = 0; i < pairs.size(); ++i) {
    const OpPair& p = pairs[i];
    TracedOp& t = traced[i];
    t.a = p.a >= 0 ? &ga.ops[p.a] : nullptr;
    t.b = p.b >= 0 ? &gb.ops[p.b] : nullptr;
    if (t.a && t.b) {
      paired_rows(res, ga, *t.a, gb, *t.b, policy, sh, w, t);
    } else {
      ++(t.a ? res.only_a_ops : res.only_b_ops);
      one_sided_rows(res, t.a ? *t.a : *t.b, t.a ? ga : gb, t.a != nullptr, t);
    }
  }
  return traced;
}

// Why the comparison cannot vouch for every op: one-sided ops and records, cut-short and
// damaged indexes, then dir_gaps (step/rank directories on one side only, already
// filtered). opt.subset names the side allowed to hold fewer ops.
void completeness(Result& res, const std::vector<RankDump>& da, const std::vector<RankDump>& db,
                  const std::vector<std::string>& dir_gaps, const Options& opt) {
  auto& inc = res.incomplete;
  if ((res.only_a_ops || res.n_only_a) && opt.subset != 'B')
    inc.push_back(fmt::format("{} op calls ran in A only ({} tensor records without a pair in B)",
                              res.only_a_ops, res.n_only_a));
  if ((res.only_b_ops || res.n_only_b) && opt.subset != 'A')
    inc.push_back(fmt::format("{} op calls ran in B only ({} tensor records without a pair in A)",
                              res.only_b_ops, res.n_only_b));
  for (const auto* side : {&da, &db}) {
    const char name = side == &da ? 'A' : 'B';
    for (const RankDump& d : *side) {
      for (const auto& m : d.damage) inc.push_back(fmt::format("{}: damaged index: {}", name, m));
      for (const auto& m : d.cut_short)
        (opt.subset == name ? res.warnings : inc).push_back(fmt::format("{}: {}", name, m));
    }
  }
  inc.insert(inc.end(), dir_gaps.begin(), dir_gaps.end());
}

}  // namespace

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
  std::vector<std::string> dir_gaps;
  const bool direct = da.size() == 1 && db.size() == 1 &&
                      (fs::exists(fs::path(res.path_a) / "index.jsonl") ||
                       fs::exists(fs::path(res.path_b) / "index.jsonl"));
  if (direct) {
    groups.emplace_back(&da[0], &db[0]);
  } else {
    auto unmatched = [&](const RankDump& d, char side) {
      res.unmatched_groups.push_back(
          fmt::format("{}: only in {} ({})", group_name(d), side, d.dir));
      if (opt.subset != (side == 'A' ? 'B' : 'A'))  // the subset side may lack directories
        dir_gaps.push_back("step/rank directory " + res.unmatched_groups.back());
    };
    std::map<std::pair<int64_t, int64_t>, const RankDump*> bmap;
    for (const auto& d : db) bmap[{d.step, d.rank}] = &d;
    for (const auto& d : da) {
      auto it = bmap.find({d.step, d.rank});
      if (it == bmap.end()) {
        unmatched(d, 'A');
        continue;
      }
      groups.emplace_back(&d, it->second);
      bmap.erase(it);
    }
    for (const auto& kv : bmap) unmatched(*kv.second, 'B');
  }
  size_t total = 0;
  for (const auto& g : groups) total += g.first->entries.size() + g.second->entries.size();
  res.entries.reserve(total);
  Shards sh;
  Work w;
  std::vector<std::vector<TracedOp>> traced;
  for (const auto& g : groups)
    traced.push_back(compare_group(res, *g.first, *g.second, policy, sh, w));
  run_and_judge(res, w, opt);
  for (size_t k = 0; k < groups.size(); ++k) {
    std::vector<Origin> o =
        trace_origins(traced[k], res.entries, groups[k].first->step, groups[k].first->rank);
    if (o.empty()) continue;
    res.first_divergent.push_back(o.front());
    for (const Origin& x : o)
      if (x.kind == "introduced") {
        res.introduced_by.push_back(x);
        break;
      }
    res.origins.insert(res.origins.end(), o.begin(), o.end());
  }
  count(res);
  completeness(res, da, db, dir_gaps, opt);
}

}  // namespace detail
}  // namespace swc
