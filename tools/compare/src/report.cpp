#include "report.h"

#include <fmt/format.h>

#include <cmath>
#include <nlohmann/json.hpp>

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

std::string div_str(const Divergence& d, const Result& r) {
  std::string s = fmt::format("step {} rank {}: op #{} {} call {} ({})", d.step, d.rank, d.seq,
                              d.op, d.call, d.phase);
  std::string tensors;
  for (size_t i : d.failed) tensors += (tensors.empty() ? "" : ", ") + io(r.entries[i]);
  return s + " - failing: " + tensors;
}

nlohmann::ordered_json div_json(const Divergence& d, const Result& r) {
  nlohmann::ordered_json j = {{"step", d.step},
                              {"rank", d.rank},
                              {"seq", d.seq},
                              {"op", d.op},
                              {"call", d.call},
                              {"phase", d.phase},
                              {"inputs_diverged", d.inputs_diverged}};
  j["failing"] = nlohmann::ordered_json::array();
  for (size_t i : d.failed) j["failing"].push_back(io(r.entries[i]));
  return j;
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
  out << fmt::format(
      "\n{:<8} {:<34} {:<16} {:<9} {:<14} {:<20} {:>10} {:>10} {:>10} {:>10} {:>10} {:>8} {:>8} "
      "{:>8} {:>7} {:>10}\n",
      "STATUS", "WHERE", "TENSOR", "DTYPE", "SHAPE", "STANDARD", "COSINE", "MAX_ABS", "MAX_REL",
      "MEAN_REL", "RMSE", "MAX_ULP", ">1e-3", ">5e-3", "NAN/INF", "WRONG");
  size_t shown = 0, hidden = 0;
  for (const Entry& e : r.entries) {
    const bool quiet = e.status == Status::Pass || e.status == Status::Ignored;
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
  out << fmt::format(
      "\nsummary: {} pairs: {} pass, {} fail, {} error, {} skipped, {} ignored; {} only in A, {} "
      "only in B",
      r.entries.size() - r.n_only_a - r.n_only_b, r.n_pass, r.n_fail, r.n_error, r.n_skipped,
      r.n_ignored, r.n_only_a, r.n_only_b);
  if (!r.unmatched_groups.empty())
    out << fmt::format("; {} step/rank dirs unmatched", r.unmatched_groups.size());
  out << "\n";
  for (const auto& d : r.first_divergent)
    out << "first divergent op: " << div_str(d, r)
        << (d.inputs_diverged ? " (its inputs already differ)"
                              : " (its inputs match: this op introduced it)")
        << "\n";
  for (const auto& d : r.introduced_by)
    if (!r.first_divergent.empty() && d.seq != r.first_divergent.front().seq)
      out << "first op whose inputs match but outputs differ: " << div_str(d, r) << "\n";
  const double mb = static_cast<double>(r.engine.bytes_a + r.engine.bytes_b) / 1e6;
  out << fmt::format(
      "read {:.1f} MB in {:.3f} s ({:.2f} GB/s) with {} threads; peak RSS {:.1f} MiB\n", mb,
      r.engine.seconds, r.engine.seconds > 0 ? mb / 1e3 / r.engine.seconds : 0.0, r.engine.threads,
      static_cast<double>(peak_rss) / (1 << 20));
  const int code = r.exit_code();
  out << "result: "
      << (code == 0   ? "PASS"
          : code == 1 ? "DIVERGED"
                      : "ERROR")
      << " (exit " << code << ")\n";
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
  for (const auto& d : r.first_divergent) j["first_divergent"].push_back(div_json(d, r));
  j["introduced_by"] = nlohmann::ordered_json::array();
  for (const auto& d : r.introduced_by) j["introduced_by"].push_back(div_json(d, r));
  j["summary"] = {{"pass", r.n_pass},          {"fail", r.n_fail},
                  {"error", r.n_error},        {"skipped", r.n_skipped},
                  {"ignored", r.n_ignored},    {"only_a", r.n_only_a},
                  {"only_b", r.n_only_b},      {"unmatched_groups", r.unmatched_groups.size()},
                  {"exit_code", r.exit_code()}};
  j["engine"] = {{"bytes_a", r.engine.bytes_a},
                 {"bytes_b", r.engine.bytes_b},
                 {"seconds", r.engine.seconds},
                 {"threads", r.engine.threads},
                 {"peak_rss_bytes", peak_rss}};
  out << j.dump(1) << "\n";
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
