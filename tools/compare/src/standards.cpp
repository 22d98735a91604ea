#include "standards.h"

#include <fmt/format.h>
#include <fnmatch.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>

#include "errors.h"

namespace swc {
namespace {

const char* kind_name(Standard::Kind k) {
  switch (k) {
    case Standard::Kind::Bitwise:
      return "bitwise";
    case Standard::Kind::Tolerance:
      return "tolerance";
    case Standard::Kind::Ignore:
      return "ignore";
  }
  return "?";
}

Standard tol_std(const char* name, double rtol, double atol, double frac) {
  Standard s;
  s.name = name;
  s.kind = Standard::Kind::Tolerance;
  s.rtol = rtol;
  s.atol = atol;
  s.max_wrong_fraction = frac;
  return s;
}

// Ops that only move data: their outputs must be bit-identical to the reference.
const char* const kBitwiseOps[] = {
    "gather",         "index_select",
    "index",          "take",
    "take_along_dim", "scatter",
    "scatter_",       "cat",
    "stack",          "copy",
    "copy_",          "_to_copy",
    "clone",          "contiguous",
    "view",           "_unsafe_view",
    "reshape",        "_reshape_alias",
    "expand",         "permute",
    "transpose",      "t",
    "select",         "slice",
    "narrow",         "squeeze",
    "unsqueeze",      "flatten",
    "split",          "split_with_sizes",
    "chunk",          "unbind",
    "masked_select",  "embedding",
    "roll",           "flip",
    "repeat",         "tile",
    "unfold",         "as_strided",
    "alias",          "detach",
    "lift_fresh",     "movedim",
    "diagonal",       "view_as",
};
// Overloads of the ops above that accumulate, and so follow the dtype standard.
const char* const kReduceOverloads[] = {"scatter.reduce", "scatter.value_reduce", "scatter_.reduce",
                                        "scatter_.value_reduce"};
// Outputs that are uninitialized memory: empty, and resize_ (its new elements; the old ones are
// whatever the not-read self held).
const char* const kIgnoreOps[] = {"empty*", "new_empty*", "resize_", "resize_as_",
                                  "_resize_output_"};

std::string fmt_num(double v) {
  return fmt::format("{:g}", v);
}

}  // namespace

std::string Standard::describe() const {
  if (kind != Kind::Tolerance) return fmt::format("{} ({})", name, kind_name(kind));
  return fmt::format("{} (tolerance rtol={} atol={} max_wrong_fraction={})", name, fmt_num(rtol),
                     fmt_num(atol), fmt_num(max_wrong_fraction));
}

bool op_pattern_matches(const std::string& pattern, const std::string& op,
                        const std::string& overload) {
  std::string full = op, bare = op;
  const size_t ns = op.find("::");
  if (ns != std::string::npos) bare = op.substr(ns + 2);
  const bool with_ns = pattern.find("::") != std::string::npos;
  const std::string& subject = with_ns ? full : bare;
  if (fnmatch(pattern.c_str(), subject.c_str(), 0) == 0) return true;
  if (!overload.empty() && fnmatch(pattern.c_str(), (subject + "." + overload).c_str(), 0) == 0)
    return true;
  return false;
}

Policy::Policy() {
  Standard bitwise;
  bitwise.name = "bitwise";
  bitwise.kind = Standard::Kind::Bitwise;
  Standard ignore;
  ignore.name = "ignore";
  ignore.kind = Standard::Kind::Ignore;
  for (const Standard& s :
       {bitwise, ignore, tol_std("exact", 0, 0, 0), tol_std("dual_thousandth", 1e-3, 1e-3, 1e-3),
        tol_std("dual_five_thousandth", 5e-3, 5e-3, 5e-3),
        tol_std("dual_ten_thousandth", 1e-4, 1e-4, 1e-4)}) {
    standards_[s.name] = s;
    standard_source_[s.name] = "built-in";
  }
  const std::string b = "built-in";
  for (const char* o : kReduceOverloads)
    builtin_ops_.push_back({std::string("aten::") + o, "dtype", b});
  for (const char* o : kIgnoreOps) builtin_ops_.push_back({std::string("aten::") + o, "ignore", b});
  for (const char* o : kBitwiseOps)
    builtin_ops_.push_back({std::string("aten::") + o, "bitwise", b});
  builtin_dtypes_[DType::F16] = {"dual_thousandth", b};
  builtin_dtypes_[DType::BF16] = {"dual_five_thousandth", b};
  builtin_dtypes_[DType::F32] = {"dual_ten_thousandth", b};
  builtin_dtypes_[DType::F64] = {"dual_ten_thousandth", b};
  for (DType t : {DType::Bool, DType::U8, DType::I8, DType::U16, DType::I16, DType::U32, DType::I32,
                  DType::U64, DType::I64})
    builtin_dtypes_[t] = {"exact", b};
}

const Standard& Policy::lookup(const std::string& name, const std::string& source) const {
  auto it = standards_.find(name);
  if (it == standards_.end()) {
    std::string known;
    for (const auto& kv : standards_) known += (known.empty() ? "" : ", ") + kv.first;
    throw UsageError("", source + ": unknown standard '" + name + "' (known: " + known + ")");
  }
  return it->second;
}

void Policy::load_config(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw Error(path, std::string("cannot open config file: ") + std::strerror(errno));
  nlohmann::ordered_json cfg;
  try {
    cfg = nlohmann::ordered_json::parse(in);
  } catch (const nlohmann::json::exception& e) {
    throw Error(path, std::string("config is not valid JSON: ") + e.what());
  }
  if (!cfg.is_object()) throw Error(path, "config must be a JSON object");
  const std::string src = "config " + path;
  auto number = [&](const nlohmann::ordered_json& v, const std::string& key) {
    if (!v.is_number()) throw Error(path, "'" + key + "' must be a number, got " + v.dump());
    const double d = v.get<double>();
    if (!(d >= 0)) throw Error(path, "'" + key + "' must be >= 0, got " + v.dump());
    return d;
  };
  if (cfg.contains("standards")) {
    const auto& ss = cfg["standards"];
    if (!ss.is_object())
      throw Error(
          path, "'standards' must be an object of name -> {kind, rtol, atol, max_wrong_fraction}");
    for (auto it = ss.begin(); it != ss.end(); ++it) {
      const std::string where = "standards." + it.key();
      if (!it.value().is_object()) throw Error(path, "'" + where + "' must be an object");
      Standard s;
      s.name = it.key();
      std::string kind = "tolerance";
      for (auto f = it.value().begin(); f != it.value().end(); ++f) {
        if (f.key() == "kind") {
          if (!f.value().is_string()) throw Error(path, "'" + where + ".kind' must be a string");
          kind = f.value().get<std::string>();
        } else if (f.key() == "rtol") {
          s.rtol = number(f.value(), where + ".rtol");
        } else if (f.key() == "atol") {
          s.atol = number(f.value(), where + ".atol");
        } else if (f.key() == "max_wrong_fraction") {
          s.max_wrong_fraction = number(f.value(), where + ".max_wrong_fraction");
        } else if (f.key() != "comment") {
          throw Error(path, "unknown key '" + where + "." + f.key() +
                                "' (expected kind, rtol, atol, max_wrong_fraction, comment)");
        }
      }
      if (kind == "tolerance")
        s.kind = Standard::Kind::Tolerance;
      else if (kind == "bitwise")
        s.kind = Standard::Kind::Bitwise;
      else if (kind == "ignore")
        s.kind = Standard::Kind::Ignore;
      else
        throw Error(
            path, "'" + where + ".kind' must be tolerance, bitwise or ignore, got '" + kind + "'");
      standards_[s.name] = s;
      standard_source_[s.name] = src;
    }
  }
  auto std_name = [&](const nlohmann::ordered_json& v, const std::string& where, bool allow_dtype) {
    if (!v.is_string()) throw Error(path, "'" + where + "' must be the name of a standard");
    const std::string n = v.get<std::string>();
    if (!(allow_dtype && n == "dtype")) {
      try {
        lookup(n, src);
      } catch (const Error& e) {
        throw Error(path, "'" + where + "': " + e.reason());
      }
    }
    return n;
  };
  for (auto it = cfg.begin(); it != cfg.end(); ++it) {
    const std::string& key = it.key();
    const auto& v = it.value();
    if (key == "standards" || key == "comment") continue;
    if (key == "ops") {
      if (!v.is_object())
        throw Error(path, "'ops' must be an object of op pattern -> standard name");
      for (auto r = v.begin(); r != v.end(); ++r)
        config_ops_.push_back({r.key(), std_name(r.value(), "ops." + r.key(), true), src});
    } else if (key == "dtypes") {
      if (!v.is_object()) throw Error(path, "'dtypes' must be an object of dtype -> standard name");
      for (auto r = v.begin(); r != v.end(); ++r) {
        auto dt = dtype_parse(r.key());
        if (!dt) throw Error(path, "'dtypes." + r.key() + "': unknown dtype");
        config_dtypes_[*dt] = {std_name(r.value(), "dtypes." + r.key(), false), src};
      }
    } else if (key == "rtol") {
      config_rtol_ = Value{number(v, key), src};
    } else if (key == "atol") {
      config_atol_ = Value{number(v, key), src};
    } else if (key == "max_wrong_fraction") {
      config_frac_ = Value{number(v, key), src};
    } else {
      throw Error(
          path, "unknown key '" + key +
                    "' (expected standards, ops, dtypes, rtol, atol, max_wrong_fraction, comment)");
    }
  }
}

void Policy::add_op_flag(const std::string& spec) {
  const size_t eq = spec.rfind('=');
  if (eq == std::string::npos || eq == 0 || eq + 1 == spec.size())
    throw UsageError("", "--op-standard expects PATTERN=STANDARD, got '" + spec + "'");
  const std::string pat = spec.substr(0, eq), name = spec.substr(eq + 1);
  if (name != "dtype") lookup(name, "--op-standard " + spec);
  flag_ops_.push_back({pat, name, "flag --op-standard"});
}

void Policy::add_dtype_flag(const std::string& spec) {
  const size_t eq = spec.rfind('=');
  if (eq == std::string::npos)
    throw UsageError("", "--dtype-standard expects DTYPE=STANDARD, got '" + spec + "'");
  auto dt = dtype_parse(spec.substr(0, eq));
  if (!dt)
    throw UsageError("",
                     "--dtype-standard " + spec + ": unknown dtype '" + spec.substr(0, eq) + "'");
  const std::string name = spec.substr(eq + 1);
  lookup(name, "--dtype-standard " + spec);
  flag_dtypes_[*dt] = {name, "flag --dtype-standard"};
}

Standard Policy::apply_numbers(Standard s, std::string* why) const {
  if (s.kind != Standard::Kind::Tolerance) return s;
  auto pick = [&](const std::optional<Value>& flag, const std::optional<Value>& cfg, double* dst,
                  const char* what) {
    const std::optional<Value>& v = flag ? flag : cfg;
    if (!v) return;
    *dst = v->v;
    *why += fmt::format("; {}={} [{}]", what, fmt_num(v->v), v->source);
  };
  pick(rtol_, config_rtol_, &s.rtol, "rtol");
  pick(atol_, config_atol_, &s.atol, "atol");
  pick(frac_, config_frac_, &s.max_wrong_fraction, "max_wrong_fraction");
  return s;
}

Resolved Policy::resolve(const std::string& op, const std::string& overload,
                         std::optional<DType> dtype) const {
  Resolved r;
  const OpRule* hit = nullptr;
  for (const auto* rules : {&flag_ops_, &config_ops_, &builtin_ops_}) {
    for (const OpRule& rule : *rules)
      if (!hit && op_pattern_matches(rule.pattern, op, overload)) hit = &rule;
  }
  if (hit && hit->standard != "dtype") {  // "dtype" defers to the dtype rule
    r.why = fmt::format("op rule '{}' [{}]", hit->pattern, hit->source);
    r.standard = apply_numbers(lookup(hit->standard, hit->source), &r.why);
    return r;
  }
  if (!dtype) {
    r.standard = lookup("exact", "built-in");
    r.why = "unsupported dtype [built-in]";
    return r;
  }
  for (const auto* rules : {&flag_dtypes_, &config_dtypes_, &builtin_dtypes_}) {
    auto it = rules->find(*dtype);
    if (it == rules->end()) continue;
    r.why = fmt::format("dtype {} [{}]", dtype_name(*dtype), it->second.second);
    r.standard = apply_numbers(lookup(it->second.first, it->second.second), &r.why);
    return r;
  }
  r.standard = lookup("exact", "built-in");
  r.why = "no rule [built-in]";
  return r;
}

std::vector<std::string> Policy::header_lines() const {
  std::vector<std::string> out;
  out.push_back(
      "precedence: flag > config > built-in; op rules (first match wins) before dtype rules");
  auto num = [&](const char* what, const std::optional<Value>& f, const std::optional<Value>& c) {
    const std::optional<Value>& v = f ? f : c;
    return v ? fmt::format("{}={} [{}]", what, fmt_num(v->v), v->source)
             : fmt::format("{}: per standard", what);
  };
  out.push_back("overrides: " + num("rtol", rtol_, config_rtol_) + ", " +
                num("atol", atol_, config_atol_) + ", " +
                num("max_wrong_fraction", frac_, config_frac_));
  for (int i = 0; i < kNumDTypes; ++i) {
    const DType t = static_cast<DType>(i);
    for (const auto* rules : {&flag_dtypes_, &config_dtypes_, &builtin_dtypes_}) {
      auto it = rules->find(t);
      if (it == rules->end()) continue;
      std::string why;
      const Standard s = apply_numbers(standards_.at(it->second.first), &why);
      out.push_back(
          fmt::format("dtype {:<8} -> {} [{}]", dtype_name(t), s.describe(), it->second.second));
      break;
    }
  }
  for (const auto* rules : {&flag_ops_, &config_ops_, &builtin_ops_}) {
    // Consecutive rules with the same standard and source are printed on one line.
    for (size_t i = 0; i < rules->size();) {
      size_t j = i;
      std::string pats;
      while (j < rules->size() && (*rules)[j].standard == (*rules)[i].standard &&
             (*rules)[j].source == (*rules)[i].source) {
        pats += (pats.empty() ? "" : " ") + (*rules)[j].pattern;
        ++j;
      }
      out.push_back(
          fmt::format("ops -> {} [{}]: {}", (*rules)[i].standard, (*rules)[i].source, pats));
      i = j;
    }
  }
  return out;
}

nlohmann::ordered_json Policy::to_json() const {
  nlohmann::ordered_json j;
  j["precedence"] = "flag > config > built-in; op rules (first match wins) before dtype rules";
  for (const auto& kv : standards_) {
    const Standard& s = kv.second;
    j["standards"][kv.first] = {{"kind", kind_name(s.kind)},
                                {"rtol", s.rtol},
                                {"atol", s.atol},
                                {"max_wrong_fraction", s.max_wrong_fraction},
                                {"source", standard_source_.at(kv.first)}};
  }
  auto num = [&](const std::optional<Value>& f,
                 const std::optional<Value>& c) -> nlohmann::ordered_json {
    const std::optional<Value>& v = f ? f : c;
    if (!v) return nullptr;
    return {{"value", v->v}, {"source", v->source}};
  };
  j["overrides"] = {{"rtol", num(rtol_, config_rtol_)},
                    {"atol", num(atol_, config_atol_)},
                    {"max_wrong_fraction", num(frac_, config_frac_)}};
  for (int i = 0; i < kNumDTypes; ++i) {
    const DType t = static_cast<DType>(i);
    for (const auto* rules : {&flag_dtypes_, &config_dtypes_, &builtin_dtypes_}) {
      auto it = rules->find(t);
      if (it == rules->end()) continue;
      j["dtypes"][dtype_name(t)] = {{"standard", it->second.first}, {"source", it->second.second}};
      break;
    }
  }
  j["ops"] = nlohmann::ordered_json::array();
  for (const auto* rules : {&flag_ops_, &config_ops_, &builtin_ops_})
    for (const OpRule& r : *rules)
      j["ops"].push_back({{"pattern", r.pattern}, {"standard", r.standard}, {"source", r.source}});
  return j;
}

}  // namespace swc
