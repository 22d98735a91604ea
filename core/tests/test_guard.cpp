// Guard pages: operands end right before a PROT_NONE page, so reading past a strided
// extent faults instead of returning garbage. A planted kernel with the seed's bug (index
// read flat, as if contiguous) must die with SIGSEGV in a child process; gather_cpu on the
// same buffers must not.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>

#include "stridewise/gather.h"
#include "test_util.h"

namespace swt {
namespace {

using stridewise::ErrorDetail;
using stridewise::GatherArgs;
using stridewise::Status;

// Runs f() in a forked child (exit status = its return value) and returns waitpid's status.
template <typename F>
int run_in_child(F f) {
  std::fflush(nullptr);
  const pid_t pid = fork();
  if (pid == 0) {
    const rlimit no_core{0, 0};
    setrlimit(RLIMIT_CORE, &no_core);
    alarm(30);
    _exit(f());
  }
  int status = 0;
  EXPECT_EQ(waitpid(pid, &status, 0), pid);
  return status;
}

std::string describe_status(int status) {
  if (WIFSIGNALED(status)) return "killed by signal " + std::to_string(WTERMSIG(status));
  if (WIFEXITED(status)) return "exited with " + std::to_string(WEXITSTATUS(status));
  return "status " + std::to_string(status);
}

// The seed's faulty kernel, transcribed: index_data[linear] treats the index as contiguous.
// Correct for a contiguous index; for an expanded one it walks off the 4 stored values.
void planted_flat_index_gather(const GatherArgs& a) {
  const int64_t* index_data = static_cast<const int64_t*>(a.index.data);
  const uint16_t* self = static_cast<const uint16_t*>(a.self.data);
  uint16_t* out = static_cast<uint16_t*>(a.out.data);
  const int64_t inner = a.index.sizes[2];
  for (int64_t linear = 0; linear < a.index.numel(); ++linear) {
    const int64_t b = linear / inner, k = linear % inner;
    out[linear] = self[b * a.self.strides[0] + index_data[linear] * a.self.strides[1] + k];
  }
}

// Strided correctly but trusts every index value: the bug the bounds check prevents.
void planted_unchecked_gather(const GatherArgs& a) {
  const int64_t* index_data = static_cast<const int64_t*>(a.index.data);
  const uint16_t* self = static_cast<const uint16_t*>(a.self.data);
  uint16_t* out = static_cast<uint16_t*>(a.out.data);
  for (int64_t b = 0; b < a.index.sizes[0]; ++b)
    for (int64_t k = 0; k < a.index.sizes[2]; ++k)
      out[b * a.out.strides[0] + k] =
          self[b * a.self.strides[0] + index_data[b * a.index.strides[0]] * a.self.strides[1] + k];
}

struct SeedBuffers {
  TestTensor self, index, out;
  GatherArgs args() const {
    GatherArgs a;
    a.self = self.view;
    a.index = index.view;
    a.out = out.view;
    a.dim = 1;
    return a;
  }
};

// The seed's shapes on guarded storages: index = 4 int64 values at the very end of its
// allocation, viewed as (4,1,384) with strides (1,1,0).
SeedBuffers seed_buffers(const int64_t (&values)[4]) {
  SeedBuffers s;
  s.self = make_tensor(DType::kFloat16, {4, 16, 384}, {6144, 384, 1}, 0);
  s.index = make_tensor(DType::kInt64, {4, 1, 384}, {1, 1, 0}, 0);
  s.out = make_tensor(DType::kFloat16, {4, 1, 384}, {384, 384, 1}, 0);
  EXPECT_EQ(s.index.storage_bytes(), 32u);
  Rng rng(test_seed() ^ 0x6A);
  fill_random_bytes(rng, s.self);
  std::memcpy(s.index.base(), values, sizeof values);
  poison(s.out);
  return s;
}

std::vector<unsigned char> reference(const SeedBuffers& s) {
  const std::vector<unsigned char> before(s.out.storage_bytes(), 0xAB);
  return reference_gather(s.out.view, s.self.view, s.index.view, 1, s.out.base(),
                          s.out.storage_bytes(), before.data());
}

TEST(GatherGuard, ExpandedIndexAtEndOfAllocation) {
  SeedBuffers s = seed_buffers({15, 0, 7, 15});
  const auto want = reference(s);
  for (const auto* ex : {&stridewise::serial_cpu_executor(), &stridewise::default_cpu_executor()}) {
    poison(s.out);
    ErrorDetail e;
    ASSERT_EQ(stridewise::gather_cpu(s.args(), *ex, &e), Status::kOk) << e.message;
    ASSERT_EQ(diff_bytes(s.out.base(), want.data(), want.size()), "");
  }
}

TEST(GatherGuard, PlantedFlatIndexKernelFaultsButGatherCpuDoesNot) {
  SeedBuffers s = seed_buffers({15, 0, 7, 15});
  const int planted = run_in_child([&] {
    planted_flat_index_gather(s.args());
    return 0;
  });
  EXPECT_TRUE(WIFSIGNALED(planted) && WTERMSIG(planted) == SIGSEGV)
      << "the guard page did not catch the flat index read: " << describe_status(planted);

  const auto want = reference(s);
  const int ours = run_in_child([&] {
    poison(s.out);
    if (stridewise::gather_cpu(s.args(), stridewise::default_cpu_executor(), nullptr) !=
        Status::kOk)
      return 2;
    return std::memcmp(s.out.base(), want.data(), want.size()) == 0 ? 0 : 3;
  });
  EXPECT_TRUE(WIFEXITED(ours) && WEXITSTATUS(ours) == 0) << describe_status(ours);
}

// self ends at a guard page; index 16 on the last batch row would address one row past it.
TEST(GatherGuard, BadIndexNeverAddressesSelf) {
  SeedBuffers s = seed_buffers({15, 0, 7, 16});
  const int planted = run_in_child([&] {
    planted_unchecked_gather(s.args());
    return 0;
  });
  EXPECT_TRUE(WIFSIGNALED(planted) && WTERMSIG(planted) == SIGSEGV)
      << "the guard page did not catch the unchecked read: " << describe_status(planted);

  const int ours = run_in_child([&] {
    ErrorDetail e;
    const Status st = stridewise::gather_cpu(s.args(), stridewise::default_cpu_executor(), &e);
    return st == Status::kIndexOutOfRange && e.value == 16 && e.position == 3 * 384 ? 0 : 4;
  });
  ASSERT_TRUE(WIFEXITED(ours) && WEXITSTATUS(ours) == 0) << describe_status(ours);
  ErrorDetail e;  // safe in-process now: the child proved the call does not fault
  EXPECT_EQ(stridewise::gather_cpu(s.args(), stridewise::serial_cpu_executor(), &e),
            Status::kIndexOutOfRange);
  EXPECT_EQ(e.message, "index 16 is out of bounds for dimension 1 with size 16");
}

}  // namespace
}  // namespace swt
