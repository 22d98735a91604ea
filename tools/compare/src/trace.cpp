#include "trace.h"

#include <fmt/format.h>

#include <map>

namespace swc {
namespace {

bool bad(const Entry& e) {
  return e.status == Status::Fail || e.status == Status::Error;
}

// Whether the two runs' bytes differ at all. A producer judged by a tolerance can pass while a
// bitwise reader of the same bytes (a view, a copy) fails: the reader's difference still came
// from it.
bool differs(const Entry& e) {
  return bad(e) || (e.metrics && e.metrics->bit_mismatch > 0);
}

// The last writer of every byte range seen so far in one run: lo -> (hi, op index).
class WriteMap {
 public:
  void assign(uint64_t lo, uint64_t hi, int w) {
    if (lo >= hi) return;
    auto it = m_.lower_bound(lo);
    if (it != m_.begin()) {
      auto p = std::prev(it);
      if (p->second.first > lo) {  // a range that starts before lo and runs into [lo, hi)
        const auto tail = p->second;
        p->second.first = lo;
        if (tail.first > hi) m_[hi] = tail;
      }
    }
    it = m_.lower_bound(lo);
    while (it != m_.end() && it->first < hi) {
      const auto cur = it->second;
      it = m_.erase(it);
      if (cur.first > hi) {
        m_[hi] = cur;
        break;
      }
    }
    m_[lo] = {hi, w};
  }
  // The most recent writer of any byte of [lo, hi), or -1.
  int latest(uint64_t lo, uint64_t hi) const {
    if (lo >= hi) return -1;
    int w = -1;
    auto it = m_.lower_bound(lo);
    if (it != m_.begin() && std::prev(it)->second.first > lo) it = std::prev(it);
    for (; it != m_.end() && it->first < hi; ++it) w = std::max(w, it->second.second);
    return w;
  }

 private:
  std::map<uint64_t, std::pair<uint64_t, int>> m_;
};

// producer[side][op][k]: the op that last wrote tensor k's memory before op ran, on that side;
// -1 when none did, -2 when the record has no address.
using Producers = std::vector<std::vector<int>>;

Producers producers(const std::vector<TracedOp>& ops, bool side_b) {
  Producers out(ops.size());
  WriteMap writes;
  for (size_t i = 0; i < ops.size(); ++i) {
    const auto& t = ops[i].tensors;
    out[i].assign(t.size(), -2);
    for (size_t k = 0; k < t.size(); ++k) {
      const DumpEntry* d = side_b ? t[k].b : t[k].a;
      if (d && d->io == "input" && d->has_addr) out[i][k] = writes.latest(d->addr_lo, d->addr_hi);
    }
    for (size_t k = 0; k < t.size(); ++k) {
      const DumpEntry* d = side_b ? t[k].b : t[k].a;
      if (d && d->has_addr && d->is_write())
        writes.assign(d->addr_lo, d->addr_hi, static_cast<int>(i));
    }
  }
  return out;
}

// An op whose outputs are uninitialized memory (empty, resize_: standard 'ignore').
bool uninitialized(const TracedOp& op, const std::vector<Entry>& entries) {
  for (const TracedTensor& t : op.tensors)
    if (entries[t.entry].io == "output" && entries[t.entry].status == Status::Ignored) return true;
  return false;
}

std::string where(const DumpOp* d) {
  return d ? fmt::format("index.jsonl:{}", d->line) : std::string();
}

}  // namespace

OpRef op_ref(const TracedOp& t) {
  const DumpOp& d = t.a ? *t.a : *t.b;
  OpRef r;
  r.seq = d.seq;
  r.call = d.call;
  r.op = d.op;
  r.overload = d.overload;
  r.phase = d.phase;
  r.side = t.a && t.b ? "both" : t.a ? "A" : "B";
  if (t.a && t.b)
    r.where = fmt::format("A {}, B {}", where(t.a), where(t.b));
  else
    r.where = r.side + " " + where(t.a ? t.a : t.b);
  return r;
}

std::string op_label(const OpRef& r) {
  return fmt::format("{} call {} ({})", r.op, r.call, r.phase);
}

std::vector<Origin> trace_origins(const std::vector<TracedOp>& ops,
                                  const std::vector<Entry>& entries, int64_t step, int64_t rank,
                                  size_t max_chain) {
  const Producers pa = producers(ops, false), pb = producers(ops, true);
  std::vector<int> root(ops.size(), -1);  // index into `out` of the origin an op descends from
  std::vector<char> out_bad(ops.size(), 0);
  std::vector<Origin> out;
  std::map<std::string, int> causes;  // cause of a differing input -> the origin it made
  for (size_t i = 0; i < ops.size(); ++i) {
    const TracedOp& op = ops[i];
    if (!op.a || !op.b) continue;  // one-sided ops are counted by completeness, not here
    bool in_bad = false;           // an input fails its standard
    std::vector<size_t> failed_out;
    for (const TracedTensor& t : op.tensors) {
      const Entry& e = entries[t.entry];
      if (e.io == "input") {
        in_bad |= bad(e);
      } else {
        if (bad(e)) failed_out.push_back(t.entry);
        out_bad[i] |= differs(e);
      }
    }
    // Bytes that differ within tolerance still carry a difference: such an op descends from
    // the origin of what it read, and passes it on.
    for (size_t k = 0; k < op.tensors.size() && root[i] < 0; ++k) {
      const Entry& e = entries[op.tensors[k].entry];
      const int w = std::max(pa[i][k], pb[i][k]);
      if (e.io == "input" && differs(e) && w >= 0) root[i] = root[w];
    }
    if (!in_bad && failed_out.empty()) continue;
    Origin o;
    o.step = step;
    o.rank = rank;
    o.op = op_ref(op);
    if (!in_bad) {  // its inputs pass their standards; an output fails its own
      o.kind = "introduced";
      o.failed = failed_out;
      o.detail =
          "its inputs agree (or are not read) and its outputs differ: this op made the difference";
      root[i] = static_cast<int>(out.size());
      out.push_back(std::move(o));
      continue;
    }
    // Every differing input either descends from an earlier difference or is an origin.
    for (size_t k = 0; k < op.tensors.size(); ++k) {
      const TracedTensor& t = op.tensors[k];
      if (!bad(entries[t.entry]) || entries[t.entry].io != "input") continue;
      const int wa = pa[i][k], wb = pb[i][k];
      const int w = std::max(wa, wb);
      const Entry& e = entries[t.entry];
      Origin c;
      const std::string arg = fmt::format("input {} ({})", e.pos, e.arg.empty() ? "?" : e.arg);
      if (w >= 0 && (!ops[w].a || !ops[w].b)) {
        const int one = (wb >= 0 && !ops[wb].a) ? wb : (wa >= 0 && !ops[wa].b) ? wa : w;
        c.kind = "one_sided";
        c.writer = op_ref(ops[one]);
        const int other = ops[one].a ? wb : wa;
        c.detail = fmt::format(
            "{} differs: its memory was last written by {}, which ran in {} only; in {} {}", arg,
            op_label(*c.writer), c.writer->side, c.writer->side == "A" ? "B" : "A",
            other >= 0 ? "it was written by " + op_label(op_ref(ops[other]))
                       : std::string("no recorded op wrote it"));
      } else if (w >= 0 && out_bad[w]) {
        if (root[i] < 0) root[i] = root[w];  // propagated from an earlier difference
        continue;
      } else if (w >= 0 && uninitialized(ops[w], entries)) {
        c.kind = "uninitialized";
        c.writer = op_ref(ops[w]);
        c.detail = fmt::format(
            "{} differs: it reads memory that {} left uninitialized (no op wrote it since)", arg,
            op_label(*c.writer));
      } else if (w >= 0) {
        c.kind = "unexplained";
        c.writer = op_ref(ops[w]);
        c.detail = fmt::format(
            "{} differs, but its last recorded writer, {}, produced the same bytes in both runs: "
            "something the dump did not see wrote it (an op filtered out, a write outside the "
            "dispatcher)",
            arg, op_label(*c.writer));
      } else if (wa == -1 && wb == -1) {
        c.kind = "outside";
        c.detail = fmt::format(
            "{} differs and no recorded op wrote its memory in either run: it entered from "
            "outside the dump (a parameter, a loaded buffer, a model input)",
            arg);
      } else if (!out.empty()) {
        if (root[i] < 0) root[i] = static_cast<int>(out.size()) - 1;  // no addresses: assume
        continue;                                                     // the latest origin
      } else {
        c.kind = "unknown";
        c.detail = fmt::format(
            "{} differs; the dump records no memory addresses, so where it came from is unknown",
            arg);
      }
      // A later reader of the same one-sided write, or of the same memory from outside, shows
      // the same difference: it descends from the first op that read it.
      const DumpEntry* d = t.b ? t.b : t.a;
      const std::string cause = c.kind == "one_sided"
                                    ? fmt::format("w{}{}", c.writer->side, c.writer->seq)
                                : c.kind == "unknown" ? std::string()
                                : c.writer            ? fmt::format("w{}", c.writer->seq)
                                           : fmt::format("m{}", d->has_addr ? d->addr_lo : 0);
      if (!cause.empty()) {
        const auto known = causes.find(cause);
        if (known != causes.end()) {
          if (root[i] < 0) root[i] = known->second;
          continue;
        }
        causes.emplace(cause, static_cast<int>(out.size()));
      }
      if (o.kind.empty()) {
        o.kind = c.kind;
        o.detail = c.detail;
        o.writer = c.writer;
      }
      o.failed.push_back(t.entry);
    }
    if (o.kind.empty()) continue;
    root[i] = static_cast<int>(out.size());
    out.push_back(std::move(o));
  }
  for (size_t i = 0; i < ops.size(); ++i) {
    if (root[i] < 0) continue;
    Origin& o = out[root[i]];
    ++o.chain_total;
    if (o.chain.size() < max_chain) o.chain.push_back(op_ref(ops[i]));
  }
  return out;
}

}  // namespace swc
