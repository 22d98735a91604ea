// Pass/fail standards and how one is chosen for a tensor.
//
// Precedence, highest first (printed in every report header):
//   op rules:     --op-standard flags (in order) > config "ops" (in file order) > built-in rules;
//                 the first rule whose pattern matches the op wins; a rule may say "dtype" to
//                 defer to the dtype rule.
//   dtype rules:  --dtype-standard flags > config "dtypes" > built-in per-dtype defaults.
//   numbers:      --rtol/--atol/--max-wrong-fraction flags > config "rtol"/"atol"/
//                 "max_wrong_fraction" > the chosen standard's own values (tolerance standards
//                 only).
#pragma once
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "dtype.h"
#include "metrics.h"

namespace swc {

struct Standard {
  enum class Kind { Bitwise, Tolerance, Ignore };
  std::string name;
  Kind kind = Kind::Tolerance;
  double rtol = 0, atol = 0, max_wrong_fraction = 0;
  std::string describe()
      const;  // "dual_thousandth (rtol=0.001 atol=0.001 max_wrong_fraction=0.001)"
  Tolerance tolerance() const { return {rtol, atol}; }
};

struct Resolved {
  Standard standard;
  std::string why;  // e.g. "op rule 'aten::gather' [built-in]", "dtype float32 [config cfg.json]"
};

class Policy {
 public:
  Policy();  // built-in standards and rules
  // Loads a JSON config; throws Error naming the file and the offending key.
  void load_config(const std::string& path);
  // "PATTERN=STANDARD"; throws UsageError.
  void add_op_flag(const std::string& spec);
  // "DTYPE=STANDARD"; throws UsageError.
  void add_dtype_flag(const std::string& spec);
  void set_flag_rtol(double v) { rtol_ = {v, "flag --rtol"}; }
  void set_flag_atol(double v) { atol_ = {v, "flag --atol"}; }
  void set_flag_max_wrong_fraction(double v) { frac_ = {v, "flag --max-wrong-fraction"}; }

  // op: "aten::gather" (or a tensor name when comparing plain files); overload: "default" or "".
  Resolved resolve(const std::string& op, const std::string& overload,
                   std::optional<DType> dtype) const;

  std::vector<std::string> header_lines() const;
  nlohmann::ordered_json to_json() const;
  const std::map<std::string, Standard>& standards() const { return standards_; }

 private:
  struct OpRule {
    std::string pattern, standard, source;
  };
  struct Value {
    double v;
    std::string source;
  };
  const Standard& lookup(const std::string& name, const std::string& source) const;
  Standard apply_numbers(Standard s, std::string* why) const;

  std::map<std::string, Standard> standards_;
  std::map<std::string, std::string> standard_source_;
  std::vector<OpRule> flag_ops_, config_ops_, builtin_ops_;
  std::map<DType, std::pair<std::string, std::string>> flag_dtypes_, config_dtypes_,
      builtin_dtypes_;
  std::optional<Value> rtol_, atol_, frac_, config_rtol_, config_atol_, config_frac_;
};

// Glob match of an op rule pattern: a pattern containing "::" is matched against "ns::name" and
// "ns::name.overload"; one without is matched against "name" and "name.overload".
bool op_pattern_matches(const std::string& pattern, const std::string& op,
                        const std::string& overload);

}  // namespace swc
