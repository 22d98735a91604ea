// TORCH_LIBRARY(stridewise): the op schemas, the control ops behind the Python API, and the
// switchable aten:: overrides (heap-held torch::Library objects: destroying one removes its
// kernels, so disable() brings ATen's native kernels back). Also the C++ API of torch.h.
#include <ATen/core/enum_tag.h>
#include <c10/util/Exception.h>
#include <torch/library.h>

#include <algorithm>
#include <memory>
#include <mutex>
#include <string>
#include <type_traits>
#include <vector>

#include "common.h"
#include "stridewise/cuda_errors.h"
#include "stridewise/torch.h"

namespace stridewise {
namespace adapter {
namespace {

// Registering a kernel for a key that has one (aten::gather on CPU) makes the dispatcher warn
// "Overriding a previously registered kernel ..." (once per process, for all operators). When
// the kernel we replace is ATen's own, that is the point of enable(), so the warning is dropped
// while our registrations run. When it is someone else's (another library overrode the op), it
// is passed on, as is every other warning. Note: the dispatcher's warning fires only once per
// process, so after a dropped one a later third-party override does not warn either.
class DropOverrideWarning : public c10::WarningHandler {
 public:
  explicit DropOverrideWarning(c10::WarningHandler* prev) : prev_(prev) {}
  void process(const c10::Warning& w) override {
    const std::string& m = w.msg();
    const size_t prev_at = m.find("previous kernel:");
    const bool ours = m.find("Overriding a previously registered kernel") != std::string::npos &&
                      prev_at != std::string::npos &&
                      m.find("aten/src/ATen", prev_at) != std::string::npos;
    if (ours) return;
    if (prev_ != nullptr) prev_->process(w);
  }

 private:
  c10::WarningHandler* prev_;
};

struct OverrideState {
  std::mutex mu;
  std::vector<std::string> enabled;
  std::vector<std::unique_ptr<torch::Library>> libs;
};

OverrideState& state() {
  static auto* s = new OverrideState();  // leaked: outlives kernels running at exit
  return *s;
}

bool contains(const std::vector<std::string>& v, const std::string& x) {
  return std::find(v.begin(), v.end(), x) != v.end();
}

void check_names(const std::vector<std::string>& names, const std::vector<std::string>& known,
                 const char* what) {
  for (const std::string& n : names) {
    if (contains(known, n)) continue;
    std::string list;
    for (const std::string& k : known) list += (list.empty() ? "" : ", ") + k;
    TORCH_CHECK_VALUE(false, "stridewise.enable: unknown op '", n, "' in ", what,
                      "; supported ops: ", list);
  }
}

void disable_locked(OverrideState& s) {
  s.libs.clear();  // ~Library deregisters; the native kernels become active again
  s.enabled.clear();
}

std::vector<std::string> enable_ops(const std::vector<std::string>& include,
                                    const std::vector<std::string>& exclude) {
  const std::vector<std::string> known = supported_ops();
  check_names(include, known, "include");
  check_names(exclude, known, "exclude");
  std::vector<std::string> want;
  for (const std::string& op : known)
    if ((include.empty() || contains(include, op)) && !contains(exclude, op)) want.push_back(op);

  OverrideState& s = state();
  std::lock_guard<std::mutex> lock(s.mu);
  disable_locked(s);
  DropOverrideWarning filter(c10::WarningUtils::get_warning_handler());
  c10::WarningUtils::WarningHandlerGuard guard(&filter);
  for (const OverrideSpec& spec : overrides()) {
    if (!contains(want, op_info(spec.op)->key)) continue;
    auto lib = std::make_unique<torch::Library>(torch::Library::IMPL, "aten", spec.key, spec.file,
                                                spec.line);
    spec.install(*lib);
    s.libs.push_back(std::move(lib));
  }
  s.enabled = want;
  return want;
}

std::vector<std::string> op_enable(std::vector<std::string> include,
                                   std::vector<std::string> exclude) {
  return enable_ops(include, exclude);
}

void op_disable() {
  OverrideState& s = state();
  std::lock_guard<std::mutex> lock(s.mu);
  disable_locked(s);
}

std::vector<std::string> op_enabled() {
  OverrideState& s = state();
  std::lock_guard<std::mutex> lock(s.mu);
  return s.enabled;
}

std::string op_stats_json() {
  return stats_json();
}
void op_reset_stats() {
  reset_stats();
}

CudaCheckMode parse_mode(const std::string& mode) {
  if (mode == "deferred") return CudaCheckMode::kDeferred;
  if (mode == "sync") return CudaCheckMode::kSync;
  TORCH_CHECK_VALUE(false, "stridewise.set_cuda_check_mode: unknown mode '", mode,
                    "'; use 'deferred' (default, no host sync) or 'sync' (raise from the "
                    "faulting call, one sync per call)");
}

void op_set_cuda_check_mode(std::string mode) {
  ::stridewise::set_cuda_check_mode(parse_mode(mode));
}

std::string op_cuda_check_mode() {
  return ::stridewise::cuda_check_mode() == CudaCheckMode::kSync ? "sync" : "deferred";
}

void op_check_errors(bool sync) {
  if (cuda_hooks().check_errors != nullptr) cuda_hooks().check_errors(sync);
}

}  // namespace
}  // namespace adapter

// ---- C++ API (stridewise/torch.h) -------------------------------------------------------------

void enable(const std::vector<std::string>& include, const std::vector<std::string>& exclude) {
  adapter::enable_ops(include, exclude);
}
void disable() {
  adapter::op_disable();
}
std::vector<std::string> enabled_ops() {
  return adapter::op_enabled();
}
std::vector<std::string> supported_ops() {
  return adapter::supported_ops();
}
std::string stats_json() {
  return adapter::stats_json();
}
void reset_stats() {
  adapter::reset_stats();
}
void set_cuda_check_mode(const std::string& mode) {
  adapter::op_set_cuda_check_mode(mode);
}
std::string get_cuda_check_mode() {
  return adapter::op_cuda_check_mode();
}
void check_errors(bool sync) {
  adapter::op_check_errors(sync);
}

}  // namespace stridewise

// Tags (torch's custom-op conventions, checked by tests/test_custom_op.py with opcheck):
// - pt2_compliant_tag: the op passes torch.library.opcheck (schema, fake/Meta, autograd
//   registration, AOT dispatch), so Dynamo/export may treat it as a PT2 op.
// - out on gather.out: its only mutable argument is a write-only output buffer that the
//   return aliases. Without the tag, functionalization (torch.compile, export) refuses a custom
//   op whose return has an alias annotation; with it, auto_functionalize handles the op.
namespace {
// at::Tag::out is newer than torch 2.11 (the GPU image's): the tag is added where it exists.
template <typename T, typename = void>
struct HasOutTag : std::false_type {};
template <typename T>
struct HasOutTag<T, std::void_t<decltype(T::out)>> : std::true_type {};

template <typename T = at::Tag>
std::vector<T> out_op_tags() {
  if constexpr (HasOutTag<T>::value) {
    return {T::out, T::pt2_compliant_tag};
  } else {
    return {};  // not PT2-compliant there: functionalization refuses an aliased custom return
  }
}
}  // namespace

TORCH_LIBRARY(stridewise, m) {
  m.def("gather(Tensor self, int dim, Tensor index, *, bool sparse_grad=False) -> Tensor",
        {at::Tag::pt2_compliant_tag});
  m.def(
      "gather.out(Tensor self, int dim, Tensor index, *, bool sparse_grad=False, "
      "Tensor(a!) out) -> Tensor(a!)",
      out_op_tags(), torch::_RegisterOrVerify::REGISTER);  // 3 args: not def(schema, function)
  m.def("_enable(str[] include, str[] exclude) -> str[]", &stridewise::adapter::op_enable);
  m.def("_disable() -> ()", &stridewise::adapter::op_disable);
  m.def("_enabled() -> str[]", &stridewise::adapter::op_enabled);
  m.def("_supported() -> str[]", []() { return stridewise::adapter::supported_ops(); });
  m.def("_stats() -> str", &stridewise::adapter::op_stats_json);
  // The op table (ops.def), a row per op: "key family packet packet ...".
  m.def("_op_table() -> str[]", []() {
    std::vector<std::string> rows;
    for (int i = 0; i < stridewise::op_count(); ++i) {
      const stridewise::OpInfo& op = stridewise::op_table()[i];
      rows.push_back(std::string(op.key) + " " + stridewise::family_name(op.family) + " " +
                     op.packets);
    }
    return rows;
  });
  m.def("_fallback_rules() -> str[]", []() {
    std::vector<std::string> names;
    for (int r = 0; r < static_cast<int>(stridewise::adapter::Fallback::kNumFallbacks); ++r)
      names.emplace_back(
          stridewise::adapter::fallback_name(static_cast<stridewise::adapter::Fallback>(r)));
    return names;
  });
  m.def("_reset_stats() -> ()", &stridewise::adapter::op_reset_stats);
  m.def("_set_cuda_check_mode(str mode) -> ()", &stridewise::adapter::op_set_cuda_check_mode);
  m.def("_cuda_check_mode() -> str", &stridewise::adapter::op_cuda_check_mode);
  m.def("_check_errors(bool sync) -> ()", &stridewise::adapter::op_check_errors);
}
