// Using stridewise from C++: route at::gather to stridewise, run the seed case (an expand()ed
// index whose storage holds 4 elements for 1536 logical ones), compare bitwise with ATen's
// native kernel and read the statistics. Runs on CPU; built and run by ctest
// (adapter.cpp_gather) when torch is found.
#include <ATen/ATen.h>
#include <stridewise/torch.h>

#include <cstdio>
#include <string>

namespace {

int failures = 0;

void expect(bool ok, const std::string& what) {
  std::printf("%s %s\n", ok ? "ok  " : "FAIL", what.c_str());
  if (!ok) ++failures;
}

bool bitwise_equal(const at::Tensor& a, const at::Tensor& b) {
  return a.sizes() == b.sizes() && a.scalar_type() == b.scalar_type() &&
         at::equal(a.contiguous().view(at::kShort), b.contiguous().view(at::kShort));
}

bool contains(const std::string& s, const std::string& part) {
  return s.find(part) != std::string::npos;
}

}  // namespace

int main() {
  at::manual_seed(0);
  const at::Tensor x = at::randn({4, 16, 384}, at::kHalf);
  const at::Tensor idx = at::full({4, 1, 1}, 15, at::kLong).expand({4, 1, 384});
  const at::Tensor native = at::gather(x, 1, idx);

  stridewise::reset_stats();
  stridewise::enable({"gather"});
  expect(stridewise::enabled_ops() == std::vector<std::string>{"gather"}, "enabled_ops()");
  const at::Tensor ours = at::gather(x, 1, idx);  // through the aten::gather override
  const std::string stats = stridewise::stats_json();
  std::printf("stats: %s\n", stats.c_str());
  expect(bitwise_equal(ours, native), "at::gather(x, 1, expanded idx) bitwise equal to native");
  expect(contains(stats, "\"calls\": 1"), "one call counted");
  expect(contains(stats, "\"expanded_index\": 1"), "expanded index counted");
  expect(contains(stats, "\"copies\": 0"), "no copies");

  // A bad index raises ATen's error (on CPU) and counts as an error.
  try {
    (void)at::gather(x, 1, at::full({4, 1, 384}, 16, at::kLong));
    expect(false, "out-of-range index raises");
  } catch (const c10::Error& e) {
    expect(contains(e.what(), "index 16 is out of bounds for dimension 1 with size 16"),
           "out-of-range index raises ATen's message");
  }

  stridewise::disable();
  expect(stridewise::enabled_ops().empty(), "disable() clears enabled_ops()");
  const std::string before = stridewise::stats_json();
  const at::Tensor again = at::gather(x, 1, idx);  // native kernel again
  expect(bitwise_equal(again, native), "native result after disable()");
  expect(stridewise::stats_json() == before, "no stridewise call after disable()");

  std::printf(failures ? "%d check(s) failed\n" : "all checks passed\n", failures);
  return failures ? 1 : 0;
}
