// sw-compare: compares two stridewise dumps, or two tensor files (safetensors / .npy).
// Exit status: 0 every compared tensor passes and nothing is missing, 1 divergence, 2 usage or
// I/O error, 3 incomplete (records on one side only, a cut-short or damaged index).
#include <CLI/CLI.hpp>
#include <cctype>
#include <fstream>
#include <iostream>

#include "compare.h"
#include "errors.h"
#include "report.h"

int main(int argc, char** argv) {
  CLI::App app{
      "sw-compare: compare two stridewise dumps (DIR/step{N}/rank{R}/index.jsonl + safetensors "
      "shards) or two tensor\n"
      "files (.safetensors or .npy). Exit status: 0 all pass, 1 divergence, 2 usage or I/O error,\n"
      "3 incomplete (records on one side only, a cut-short or damaged index; see --subset).\n"
      "Standards: flag > config > built-in (see docs/compare.md); the report header lists what is "
      "in force."};
  std::string a, b, config, format = "table", output, show = "problems", tensor;
  std::vector<std::string> op_rules, dtype_rules;
  std::vector<int64_t> steps, ranks;
  double rtol = -1, atol = -1, frac = -1;
  unsigned threads = 0;
  uint64_t chunk_mib = 4;
  size_t max_rows = 200;
  bool strict = false;
  std::string subset;
  app.add_option("A", a, "reference: dump directory or tensor file")->required();
  app.add_option("B", b, "candidate: dump directory or tensor file")->required();
  app.add_option("--config", config,
                 "JSON file with standards, dtype and op rules (docs/compare.md)");
  app.add_option("--op-standard", op_rules,
                 "PATTERN=STANDARD, e.g. 'aten::gather=bitwise' (repeatable)")
      ->allow_extra_args(false);
  app.add_option("--dtype-standard", dtype_rules,
                 "DTYPE=STANDARD, e.g. float16=dual_thousandth (repeatable)")
      ->allow_extra_args(false);
  app.add_option("--rtol", rtol, "override rtol of every tolerance standard");
  app.add_option("--atol", atol, "override atol of every tolerance standard");
  app.add_option("--max-wrong-fraction", frac, "override the allowed fraction of wrong elements");
  app.add_option("--format", format, "table, csv or json")
      ->check(CLI::IsMember({"table", "csv", "json"}));
  app.add_option("-o,--output", output, "write the report to this file instead of stdout");
  app.add_option("--show", show, "table rows: problems (default) or all")
      ->check(CLI::IsMember({"problems", "all"}));
  app.add_option("--max-rows", max_rows, "table: at most this many rows (0: no limit)");
  app.add_option("--steps", steps, "only these steps (dumps), comma separated")
      ->delimiter(',')
      ->allow_extra_args(false);
  app.add_option("--ranks", ranks, "only these ranks (dumps), comma separated")
      ->delimiter(',')
      ->allow_extra_args(false);
  app.add_option("--tensor", tensor, "files: only tensors whose name matches this glob");
  app.add_option("--threads", threads, "worker threads (default: all cores)");
  app.add_option("--chunk-mib", chunk_mib, "chunk size per side and thread in MiB (default 4)")
      ->check(CLI::Range(1, 1024));
  app.add_flag("--strict-unmatched", strict,
               "treat unmatched entries and step/rank directories as divergence (exit 1)");
  app.add_option("--subset", subset,
                 "A or B: that side may hold fewer ops (a run stopped early, an op filter on one "
                 "side); its missing records and missing end record do not make the result "
                 "INCOMPLETE")
      ->check(CLI::IsMember({"A", "B", "a", "b"}));
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    const int rc = app.exit(e);
    return rc == 0 ? 0 : 2;
  }
  std::string command;
  for (int i = 0; i < argc; ++i) command += (i ? " " : "") + std::string(argv[i]);
  try {
    swc::Policy policy;
    if (!config.empty()) policy.load_config(config);  // config first: flags may name its standards
    for (const auto& r : op_rules) policy.add_op_flag(r);
    for (const auto& r : dtype_rules) policy.add_dtype_flag(r);
    if (rtol >= 0) policy.set_flag_rtol(rtol);
    if (atol >= 0) policy.set_flag_atol(atol);
    if (frac >= 0) policy.set_flag_max_wrong_fraction(frac);
    swc::Options opt;
    opt.engine.threads = threads;
    opt.engine.chunk_bytes = chunk_mib << 20;
    opt.steps = steps;
    opt.ranks = ranks;
    opt.tensor_glob = tensor;
    opt.strict_unmatched = strict;
    if (!subset.empty()) opt.subset = static_cast<char>(std::toupper(subset[0]));
    const swc::Result res = swc::compare_paths(a, b, policy, opt);
    swc::ReportOptions ro;
    ro.format = format == "csv"    ? swc::Format::Csv
                : format == "json" ? swc::Format::Json
                                   : swc::Format::Table;
    ro.show_all = show == "all";
    ro.max_rows = max_rows;
    ro.command = command;
    const uint64_t rss = swc::peak_rss_bytes();
    if (output.empty()) {
      swc::write_report(std::cout, res, policy, ro, rss);
    } else {
      std::ofstream out(output);
      if (!out) throw swc::Error(output, "cannot open the output file for writing");
      swc::write_report(out, res, policy, ro, rss);
      out.close();
      if (!out) throw swc::Error(output, "write failed (disk full?)");
    }
    for (const auto& e : res.entries)
      if (e.status == swc::Status::Error) std::cerr << "sw-compare: error: " << e.reason << "\n";
    return res.exit_code();
  } catch (const swc::Error& e) {
    std::cerr << "sw-compare: error: " << e.what() << "\n";
    return 2;
  } catch (const std::exception& e) {
    std::cerr << "sw-compare: internal error: " << e.what() << "\n";
    return 2;
  }
}
