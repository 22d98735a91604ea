#include "compare.h"

#include <fmt/format.h>
#include <fnmatch.h>

#include <filesystem>
#include <map>

#include "compare_impl.h"
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
    case Status::NotRead:
      return "NOT_READ";
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
  return incomplete.empty() ? 0 : kExitIncomplete;
}

const char* Result::verdict() const {
  switch (exit_code()) {
    case 0:
      return "PASS";
    case 1:
      return "DIVERGED";
    case kExitIncomplete:
      return "INCOMPLETE";
  }
  return "ERROR";
}

namespace detail {

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

}  // namespace detail

namespace {

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
  detail::Work w;
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
    detail::prepare(res.entries.back(), res.entries.size() - 1, a, b, policy, w);
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
  detail::run_and_judge(res, w, opt);
}

}  // namespace

namespace detail {

void run_and_judge(Result& res, Work& w, const Options& opt) {
  FileCache files;
  res.engine = run_jobs(w.jobs, files, opt.engine);
  for (size_t k = 0; k < w.jobs.size(); ++k) judge(res.entries[w.job_entry[k]], w.jobs[k]);
}

void count(Result& res) {
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
      case Status::NotRead:
        ++res.n_not_read;
        break;
    }
  }
}

}  // namespace detail

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
    detail::compare_dumps(res, policy, opt);
  } else {
    res.mode = "files";
    compare_files(res, policy, opt);
  }
  if (res.mode == "files") {
    detail::count(res);
    if (res.n_only_a && opt.subset != 'B')
      res.incomplete.push_back(fmt::format("{} tensors in A only", res.n_only_a));
    if (res.n_only_b && opt.subset != 'A')
      res.incomplete.push_back(fmt::format("{} tensors in B only", res.n_only_b));
  }
  return res;
}

}  // namespace swc
