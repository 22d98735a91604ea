#include <gtest/gtest.h>

#include "errors.h"
#include "helpers.h"
#include "standards.h"

using namespace swc;

TEST(Standards, BuiltInRules) {
  Policy p;
  EXPECT_EQ(p.resolve("aten::gather", "default", DType::F32).standard.name, "bitwise");
  EXPECT_EQ(p.resolve("aten::index_select", "default", DType::BF16).standard.name, "bitwise");
  EXPECT_EQ(p.resolve("aten::cat", "default", DType::F16).standard.name, "bitwise");
  EXPECT_EQ(p.resolve("aten::scatter", "reduce", DType::F32).standard.name, "dual_ten_thousandth");
  EXPECT_EQ(p.resolve("aten::scatter", "src", DType::F32).standard.name, "bitwise");
  EXPECT_EQ(p.resolve("aten::empty_like", "default", DType::F32).standard.name, "ignore");
  EXPECT_EQ(p.resolve("aten::mm", "default", DType::F16).standard.name, "dual_thousandth");
  EXPECT_EQ(p.resolve("aten::mm", "default", DType::BF16).standard.name, "dual_five_thousandth");
  EXPECT_EQ(p.resolve("aten::mm", "default", DType::F32).standard.name, "dual_ten_thousandth");
  EXPECT_EQ(p.resolve("aten::sum", "default", DType::I64).standard.name, "exact");
  const Resolved r = p.resolve("aten::gather", "default", DType::F32);
  EXPECT_EQ(r.why, "op rule 'aten::gather' [built-in]");
}

TEST(Standards, PatternMatching) {
  EXPECT_TRUE(op_pattern_matches("gather", "aten::gather", "default"));
  EXPECT_TRUE(op_pattern_matches("aten::gather", "aten::gather", "default"));
  EXPECT_TRUE(op_pattern_matches("aten::gather.default", "aten::gather", "default"));
  EXPECT_TRUE(op_pattern_matches("*index*", "aten::index_select", ""));
  EXPECT_FALSE(op_pattern_matches("aten::gather", "gather",
                                  ""));  // file-mode tensor names have no namespace
  EXPECT_FALSE(op_pattern_matches("gather", "aten::gather_backward", ""));
}

// flag > config > built-in, and every decision says where it came from.
TEST(Standards, Precedence) {
  swc_test::TempDir d;
  const std::string cfg = d.file("cfg.json");
  swc_test::write_bytes(cfg, R"({
    "standards": {"loose": {"kind": "tolerance", "rtol": 0.01, "atol": 0.02, "max_wrong_fraction": 0.05}},
    "ops": {"aten::gather": "loose", "aten::add": "dtype"},
    "dtypes": {"float32": "dual_thousandth"},
    "rtol": 0.5
  })");
  Policy p;
  p.load_config(cfg);
  Resolved r = p.resolve("aten::gather", "default", DType::F32);
  EXPECT_EQ(r.standard.name, "loose");
  EXPECT_EQ(r.standard.rtol, 0.5);  // config rtol override applies to every tolerance standard
  EXPECT_EQ(r.standard.atol, 0.02);
  EXPECT_NE(r.why.find("[config " + cfg + "]"), std::string::npos) << r.why;
  r = p.resolve("aten::add", "Tensor", DType::F32);
  EXPECT_EQ(r.standard.name, "dual_thousandth");
  EXPECT_NE(r.why.find("dtype float32 [config"), std::string::npos) << r.why;
  EXPECT_EQ(p.resolve("aten::index_select", "default", DType::F32).standard.name,
            "bitwise");  // built-in kept

  p.add_op_flag("gather=exact");
  p.add_dtype_flag("float32=dual_ten_thousandth");
  p.set_flag_rtol(0.25);
  r = p.resolve("aten::gather", "default", DType::F32);
  EXPECT_EQ(r.standard.name, "exact");
  EXPECT_EQ(r.standard.rtol, 0.25);
  EXPECT_NE(r.why.find("[flag --op-standard]"), std::string::npos) << r.why;
  EXPECT_NE(r.why.find("rtol=0.25 [flag --rtol]"), std::string::npos) << r.why;
  r = p.resolve("aten::add", "Tensor", DType::F32);
  EXPECT_EQ(r.standard.name, "dual_ten_thousandth");
  bool saw = false;
  for (const auto& l : p.header_lines())
    saw |= l.find("rtol=0.25 [flag --rtol]") != std::string::npos;
  EXPECT_TRUE(saw);
  EXPECT_EQ(p.to_json()["overrides"]["rtol"]["source"], "flag --rtol");
}

TEST(Standards, ConfigErrorsNameFileAndKey) {
  swc_test::TempDir d;
  const std::string cfg = d.file("cfg.json");
  auto expect = [&](const std::string& text, const std::string& needle) {
    swc_test::write_bytes(cfg, text);
    Policy p;
    try {
      p.load_config(cfg);
      FAIL() << "no error for " << text;
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(cfg), std::string::npos) << e.what();
      EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
    }
  };
  expect("{", "not valid JSON");
  expect(R"({"dtype": {}})", "unknown key 'dtype'");
  expect(R"({"ops": {"gather": "nope"}})", "unknown standard 'nope'");
  expect(R"({"dtypes": {"float33": "exact"}})", "'dtypes.float33': unknown dtype");
  expect(R"({"rtol": "big"})", "'rtol' must be a number");
  expect(R"({"standards": {"s": {"kind": "fuzzy"}}})", "must be tolerance, bitwise or ignore");
  expect(R"({"standards": {"s": {"rtl": 1}}})", "unknown key 'standards.s.rtl'");
  Policy p;
  EXPECT_THROW(p.load_config(d.file("absent.json")), Error);
  EXPECT_THROW(p.add_op_flag("gather"), UsageError);
  EXPECT_THROW(p.add_op_flag("gather=nope"), UsageError);
  EXPECT_THROW(p.add_dtype_flag("float33=exact"), UsageError);
}
