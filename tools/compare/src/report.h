// Writing a comparison result as a table (for people), CSV or JSON (for scripts).
#pragma once
#include <cstdint>
#include <ostream>
#include <string>

#include "compare.h"
#include "standards.h"

namespace swc {

enum class Format { Table, Csv, Json };

struct ReportOptions {
  Format format = Format::Table;
  bool show_all = false;  // table: also PASS and IGNORED rows
  size_t max_rows = 200;  // table: 0 = no limit
  std::string command;    // the command line, echoed in the header
};

void write_report(std::ostream& out, const Result& r, const Policy& policy,
                  const ReportOptions& opt, uint64_t peak_rss);

}  // namespace swc
