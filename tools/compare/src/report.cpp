#include "report.h"

#include <fmt/format.h>

#include <cmath>
#include <nlohmann/json.hpp>

#include "trace.h"

namespace swc {
namespace {

std::string num(double v) {
  return std::isnan(v) ? "-" : fmt::format("{:.6g}", v);
}

nlohmann::ordered_json jnum(double v) {
  if (std::isnan(v)) return nullptr;
  if (std::isinf(v)) return v > 0 ? "inf" : "-inf";
  return v;
}

std::string where(const Entry& e) {
  if (e.op.empty()) return e.name;
  std::string s;
  if (e.step >= 0 || e.rank >= 0) s = fmt::format("s{} r{} ", e.step, e.rank);
  return s + fmt::format("{} {}[{}]", e.phase == "backward" ? "bwd" : "fwd", e.op, e.call);
}

std::string io(const Entry& e) {
  if (e.io.empty()) return "";
  return fmt::format("{}#{}{}", e.io == "input" ? "in" : "out", e.pos,
                     e.arg.empty() ? "" : "(" + e.arg + ")");
}

std::string dtype_pair(const Entry& e) {
  if (e.dtype_b.empty() || e.dtype_a == e.dtype_b) return e.dtype_a.empty() ? e.dtype_b : e.dtype_a;
  if (e.dtype_a.empty()) return e.dtype_b;
  return e.dtype_a + "/" + e.dtype_b;
}

nlohmann::ordered_json ref_json(const OpRef& r) {
  return {{"seq", r.seq},     {"op", r.op},     {"overload", r.overload}, {"call", r.call},
          {"phase", r.phase}, {"side", r.side}, {"where", r.where}};
}

nlohmann::ordered_json origin_json(const Origin& o, const Result& r) {
  nlohmann::ordered_json j = {{"step", o.step},
                              {"rank", o.rank},
                              {"seq", o.op.seq},
                              {"op", o.op.op},
                              {"overload", o.op.overload},
                              {"call", o.op.call},
                              {"phase", o.op.phase},
                              {"where", o.op.where},
                              {"kind", o.kind},
                              {"inputs_diverged", o.kind != "introduced"},
                              {"detail", o.detail}};
  j["writer"] = o.writer ? ref_json(*o.writer) : nlohmann::ordered_json(nullptr);
  j["failing"] = nlohmann::ordered_json::array();
  for (size_t i : o.failed) j["failing"].push_back(io(r.entries[i]));
  j["chain"] = nlohmann::ordered_json::array();
  for (const OpRef& c : o.chain) j["chain"].push_back(ref_json(c));
  j["chain_total"] = o.chain_total;
  return j;
}

// The lead of the table report: where the first difference starts, and what it reached.
void write_origins(std::ostream& out, const Result& r) {
  for (const Origin& o : r.first_divergent) {
    std::string failing;
    for (size_t i : o.failed) failing += (failing.empty() ? "" : ", ") + io(r.entries[i]);
    out << fmt::format("first divergent op (step {} rank {}): {} [{}] - {}\n", o.step, o.rank,
                       op_label(o.op), o.op.where, failing);
    out << "  " << o.detail << "\n";
    if (o.writer) out << fmt::format("  writer: {} [{}]\n", op_label(*o.writer), o.writer->where);
    std::string chain;
    for (const OpRef& c : o.chain)
      chain += (chain.empty() ? "" : " -> ") +
               fmt::format("{}[{}]{}", c.op, c.call, c.phase == "backward" ? " bwd" : "");
    if (o.chain_total > o.chain.size())
      chain += fmt::format(" -> ... ({} more)", o.chain_total - o.chain.size());
    out << fmt::format("  reached {} ops: {}\n", o.chain_total, chain);
  }
  size_t others = r.origins.size() - r.first_divergent.size();
  if (others) {
    out << fmt::format("other origins ({}):\n", others);
    size_t shown = 0;
    for (const Origin& o : r.origins) {
      bool first = false;
      for (const Origin& f : r.first_divergent)
        first |= f.step == o.step && f.rank == o.rank && f.op.seq == o.op.seq;
      if (first) continue;
      if (shown++ == 10) {
        out << "  ... (all of them in --format json, \"origins\")\n";
        break;
      }
      out << fmt::format("  step {} rank {}: {} [{}]: {}\n", o.step, o.rank, op_label(o.op), o.kind,
                         o.detail);
    }
  }
}

std::string csv_field(const std::string& s) {
  if (s.find_first_of(",\"\n") == std::string::npos) return s;
  std::string o = "\"";
  for (char c : s) o += c == '"' ? std::string("\"\"") : std::string(1, c);
  return o + "\"";
}

const char* kCsvColumns[] = {"status",
                             "step",
                             "rank",
                             "seq",
                             "phase",
                             "op",
                             "overload",
                             "call",
                             "io",
                             "pos",
                             "arg",
                             "name",
                             "dtype_a",
                             "dtype_b",
                             "shape_a",
                             "shape_b",
                             "standard",
                             "standard_kind",
                             "rtol",
                             "atol",
                             "max_wrong_fraction",
                             "standard_source",
                             "n",
                             "n_finite",
                             "cosine",
                             "max_abs",
                             "max_rel",
                             "mean_rel",
                             "rmse",
                             "max_ulp",
                             "frac_rel_gt_1e-3",
                             "frac_rel_gt_5e-3",
                             "nan_a",
                             "nan_b",
                             "inf_a",
                             "inf_b",
                             "nonfinite_mismatch",
                             "wrong",
                             "wrong_fraction",
                             "bit_mismatch",
                             "first_wrong_index",
                             "reason",
                             "where_a",
                             "where_b"};

const char* kind_str(Standard::Kind k) {
  return k == Standard::Kind::Bitwise  ? "bitwise"
         : k == Standard::Kind::Ignore ? "ignore"
                                       : "tolerance";
}

std::vector<std::string> csv_row(const Entry& e) {
  const Standard& s = e.standard.standard;
  const bool has_std = !s.name.empty();
  std::vector<std::string> v = {status_name(e.status),
                                e.step >= 0 ? std::to_string(e.step) : "",
                                e.rank >= 0 ? std::to_string(e.rank) : "",
                                e.seq >= 0 ? std::to_string(e.seq) : "",
                                e.phase,
                                e.op,
                                e.overload,
                                e.call >= 0 ? std::to_string(e.call) : "",
                                e.io,
                                e.pos >= 0 ? std::to_string(e.pos) : "",
                                e.arg,
                                e.name,
                                e.dtype_a,
                                e.dtype_b,
                                shape_str(e.shape_a),
                                shape_str(e.shape_b),
                                s.name,
                                has_std ? kind_str(s.kind) : "",
                                has_std ? fmt::format("{:g}", s.rtol) : "",
                                has_std ? fmt::format("{:g}", s.atol) : "",
                                has_std ? fmt::format("{:g}", s.max_wrong_fraction) : "",
                                e.standard.why};
  if (e.metrics) {
    const Metrics& m = *e.metrics;
    auto d = [](double x) { return std::isnan(x) ? std::string() : fmt::format("{:.17g}", x); };
    for (const std::string& x :
         {std::to_string(m.n), std::to_string(m.n_finite), d(m.cosine), d(m.max_abs), d(m.max_rel),
          d(m.mean_rel), d(m.rmse), m.max_ulp ? std::to_string(*m.max_ulp) : std::string(),
          d(m.frac_rel_gt_1e3), d(m.frac_rel_gt_5e3), std::to_string(m.nan_a),
          std::to_string(m.nan_b), std::to_string(m.inf_a), std::to_string(m.inf_b),
          std::to_string(m.nonfinite_mismatch), std::to_string(m.wrong), d(m.wrong_fraction),
          std::to_string(m.bit_mismatch),
          m.first_wrong == kNoIndex ? std::string() : std::to_string(m.first_wrong)})
      v.push_back(x);
  } else {
    for (int i = 0; i < 19; ++i) v.emplace_back();
  }
  v.push_back(e.reason);
  v.push_back(e.where_a);
  v.push_back(e.where_b);
  return v;
}

void write_table(std::ostream& out, const Result& r, const Policy& policy, const ReportOptions& opt,
                 uint64_t peak_rss) {
  out << fmt::format("sw-compare ({}): A = {}\n                     B = {}\n", r.mode, r.path_a,
                     r.path_b);
  if (!opt.command.empty()) out << "command: " << opt.command << "\n";
  out << "standards:\n";
  for (const auto& l : policy.header_lines()) out << "  " << l << "\n";
  for (const auto& w : r.warnings) out << "warning: " << w << "\n";
  for (const auto& u : r.unmatched_groups) out << "unmatched: " << u << "\n";
  out << "\n";
  for (const auto& m : r.incomplete) out << "INCOMPLETE: " << m << "\n";
  write_origins(out, r);
  out << fmt::format(
      "\n{:<8} {:<34} {:<16} {:<9} {:<14} {:<20} {:>10} {:>10} {:>10} {:>10} {:>10} {:>8} {:>8} "
      "{:>8} {:>7} {:>10}\n",
      "STATUS", "WHERE", "TENSOR", "DTYPE", "SHAPE", "STANDARD", "COSINE", "MAX_ABS", "MAX_REL",
      "MEAN_REL", "RMSE", "MAX_ULP", ">1e-3", ">5e-3", "NAN/INF", "WRONG");
  size_t shown = 0, hidden = 0;
  for (const Entry& e : r.entries) {
    const bool quiet =
        e.status == Status::Pass || e.status == Status::Ignored || e.status == Status::NotRead;
    if (quiet && !opt.show_all) continue;
    if (opt.max_rows && shown >= opt.max_rows) {
      ++hidden;
      continue;
    }
    ++shown;
    std::string cols[9] = {"-", "-", "-", "-", "-", "-", "-", "-", "-"};
    if (e.metrics) {
      const Metrics& m = *e.metrics;
      cols[0] = num(m.cosine);
      cols[1] = num(m.max_abs);
      cols[2] = num(m.max_rel);
      cols[3] = num(m.mean_rel);
      cols[4] = num(m.rmse);
      cols[5] = m.max_ulp ? std::to_string(*m.max_ulp) : "-";
      cols[6] = num(m.frac_rel_gt_1e3);
      cols[7] = num(m.frac_rel_gt_5e3);
      cols[8] = fmt::format("{}/{}", m.nan_a + m.nan_b, m.inf_a + m.inf_b);
    }
    const std::string wrong = e.metrics ? num(e.metrics->wrong_fraction) : "-";
    out << fmt::format(
        "{:<8} {:<34} {:<16} {:<9} {:<14} {:<20} {:>10} {:>10} {:>10} {:>10} {:>10} {:>8} {:>8} "
        "{:>8} {:>7} {:>10}\n",
        status_name(e.status), where(e), io(e), dtype_pair(e),
        shape_str(e.shape_a.empty() ? e.shape_b : e.shape_a), e.standard.standard.name, cols[0],
        cols[1], cols[2], cols[3], cols[4], cols[5], cols[6], cols[7], cols[8], wrong);
    if (!e.reason.empty() && e.status != Status::Pass) out << "         " << e.reason << "\n";
  }
  if (hidden) out << fmt::format("... {} more rows not shown (--max-rows 0 shows all)\n", hidden);
  out << "\nsummary: ";
  if (!r.incomplete.empty())
    out << fmt::format("INCOMPLETE ({} reasons: {}); ", r.incomplete.size(), r.incomplete.front());
  out << fmt::format(
      "{} pairs: {} pass, {} fail, {} error, {} skipped, {} ignored, {} not read; {} only in A, "
      "{} only in B",
      r.entries.size() - r.n_only_a - r.n_only_b, r.n_pass, r.n_fail, r.n_error, r.n_skipped,
      r.n_ignored, r.n_not_read, r.n_only_a, r.n_only_b);
  if (!r.unmatched_groups.empty())
    out << fmt::format("; {} step/rank dirs unmatched", r.unmatched_groups.size());
  out << "\n";
  for (const auto& o : r.first_divergent)
    out << fmt::format("first divergent op: step {} rank {}: {} ({})\n", o.step, o.rank,
                       op_label(o.op), o.kind);
  const double mb = static_cast<double>(r.engine.bytes_a + r.engine.bytes_b) / 1e6;
  out << fmt::format(
      "read {:.1f} MB in {:.3f} s ({:.2f} GB/s) with {} threads; peak RSS {:.1f} MiB\n", mb,
      r.engine.seconds, r.engine.seconds > 0 ? mb / 1e3 / r.engine.seconds : 0.0, r.engine.threads,
      static_cast<double>(peak_rss) / (1 << 20));
  const int code = r.exit_code();
  out << "result: " << r.verdict() << " (exit " << code << ")\n";
}

void write_json(std::ostream& out, const Result& r, const Policy& policy, const ReportOptions& opt,
                uint64_t peak_rss) {
  nlohmann::ordered_json j;
  j["tool"] = "sw-compare";
  j["mode"] = r.mode;
  j["a"] = r.path_a;
  j["b"] = r.path_b;
  if (!opt.command.empty()) j["command"] = opt.command;
  j["standards"] = policy.to_json();
  j["warnings"] = r.warnings;
  j["unmatched_groups"] = r.unmatched_groups;
  j["entries"] = nlohmann::ordered_json::array();
  for (const Entry& e : r.entries) {
    nlohmann::ordered_json o;
    o["status"] = status_name(e.status);
    o["step"] = e.step >= 0 ? nlohmann::ordered_json(e.step) : nullptr;
    o["rank"] = e.rank >= 0 ? nlohmann::ordered_json(e.rank) : nullptr;
    o["seq"] = e.seq >= 0 ? nlohmann::ordered_json(e.seq) : nullptr;
    o["phase"] = e.phase;
    o["op"] = e.op;
    o["overload"] = e.overload;
    o["call"] = e.call >= 0 ? nlohmann::ordered_json(e.call) : nullptr;
    o["io"] = e.io;
    o["pos"] = e.pos >= 0 ? nlohmann::ordered_json(e.pos) : nullptr;
    o["arg"] = e.arg;
    o["name"] = e.name;
    o["dtype_a"] = e.dtype_a;
    o["dtype_b"] = e.dtype_b;
    o["shape_a"] = e.shape_a;
    o["shape_b"] = e.shape_b;
    const Standard& s = e.standard.standard;
    if (!s.name.empty())
      o["standard"] = {{"name", s.name},
                       {"kind", kind_str(s.kind)},
                       {"rtol", s.rtol},
                       {"atol", s.atol},
                       {"max_wrong_fraction", s.max_wrong_fraction},
                       {"why", e.standard.why}};
    else
      o["standard"] = nullptr;
    if (e.metrics) {
      const Metrics& m = *e.metrics;
      o["metrics"] = {
          {"n", m.n},
          {"n_finite", m.n_finite},
          {"cosine", jnum(m.cosine)},
          {"max_abs", jnum(m.max_abs)},
          {"max_rel", jnum(m.max_rel)},
          {"mean_rel", jnum(m.mean_rel)},
          {"rmse", jnum(m.rmse)},
          {"max_ulp", m.max_ulp ? nlohmann::ordered_json(*m.max_ulp) : nullptr},
          {"frac_rel_gt_1e-3", jnum(m.frac_rel_gt_1e3)},
          {"frac_rel_gt_5e-3", jnum(m.frac_rel_gt_5e3)},
          {"nan_a", m.nan_a},
          {"nan_b", m.nan_b},
          {"inf_a", m.inf_a},
          {"inf_b", m.inf_b},
          {"nonfinite_mismatch", m.nonfinite_mismatch},
          {"wrong", m.wrong},
          {"wrong_fraction", jnum(m.wrong_fraction)},
          {"bit_mismatch", m.bit_mismatch},
          {"first_wrong_index", m.first_wrong == kNoIndex ? nlohmann::ordered_json(nullptr)
                                                          : nlohmann::ordered_json(m.first_wrong)}};
    } else {
      o["metrics"] = nullptr;
    }
    o["reason"] = e.reason;
    o["where_a"] = e.where_a;
    o["where_b"] = e.where_b;
    j["entries"].push_back(std::move(o));
  }
  j["first_divergent"] = nlohmann::ordered_json::array();
  for (const auto& d : r.first_divergent) j["first_divergent"].push_back(origin_json(d, r));
  j["introduced_by"] = nlohmann::ordered_json::array();
  for (const auto& d : r.introduced_by) j["introduced_by"].push_back(origin_json(d, r));
  j["origins"] = nlohmann::ordered_json::array();
  for (const auto& d : r.origins) j["origins"].push_back(origin_json(d, r));
  j["incomplete"] = r.incomplete;
  // The verdict and what is missing lead: a count of one-sided records is read first.
  j["summary"] = {{"verdict", r.verdict()},
                  {"exit_code", r.exit_code()},
                  {"incomplete", r.incomplete.size()},
                  {"only_a_ops", r.only_a_ops},
                  {"only_b_ops", r.only_b_ops},
                  {"only_a", r.n_only_a},
                  {"only_b", r.n_only_b},
                  {"unmatched_groups", r.unmatched_groups.size()},
                  {"pass", r.n_pass},
                  {"fail", r.n_fail},
                  {"error", r.n_error},
                  {"skipped", r.n_skipped},
                  {"ignored", r.n_ignored},
                  {"not_read", r.n_not_read}};
  j["engine"] = {{"bytes_a", r.engine.bytes_a},
                 {"bytes_b", r.engine.bytes_b},
                 {"seconds", r.engine.seconds},
                 {"threads", r.engine.threads},
                 {"peak_rss_bytes", peak_rss}};
  // replace: a tensor name or message from a corrupt file may hold bytes that are not UTF-8
  out << j.dump(1, ' ', false, nlohmann::ordered_json::error_handler_t::replace) << "\n";
}

}  // namespace

void write_report(std::ostream& out, const Result& r, const Policy& policy,
                  const ReportOptions& opt, uint64_t peak_rss) {
  switch (opt.format) {
    case Format::Table:
      write_table(out, r, policy, opt, peak_rss);
      break;
    case Format::Json:
      write_json(out, r, policy, opt, peak_rss);
      break;
    case Format::Csv: {
      std::string head;
      for (const char* c : kCsvColumns) head += (head.empty() ? "" : ",") + std::string(c);
      out << head << "\n";
      for (const Entry& e : r.entries) {
        const auto row = csv_row(e);
        std::string line;
        for (size_t i = 0; i < row.size(); ++i) line += (i ? "," : "") + csv_field(row[i]);
        out << line << "\n";
      }
      break;
    }
  }
}

}  // namespace swc
