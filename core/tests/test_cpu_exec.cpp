// Executors: chunks are disjoint, cover [0, n) exactly, respect grain, and a nested call
// from inside a chunk completes.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <mutex>
#include <thread>
#include <utility>
#include <vector>

#include "stridewise/cpu_exec.h"

namespace swt {
namespace {

using stridewise::CpuExecutor;

struct Record {
  std::mutex mu;
  std::vector<std::pair<int64_t, int64_t>> chunks;
  std::vector<std::thread::id> threads;
};

void record_chunk(void* ctx, int64_t b, int64_t e) {
  auto& r = *static_cast<Record*>(ctx);
  std::lock_guard<std::mutex> lock(r.mu);
  r.chunks.emplace_back(b, e);
  r.threads.push_back(std::this_thread::get_id());
}

void expect_partition(const CpuExecutor& ex, int64_t n, int64_t grain) {
  Record r;
  ex.parallel_for(ex.self, n, grain, &record_chunk, &r);
  SCOPED_TRACE("n " + std::to_string(n) + " grain " + std::to_string(grain));
  if (n <= 0) {
    EXPECT_TRUE(r.chunks.empty());
    return;
  }
  std::sort(r.chunks.begin(), r.chunks.end());
  int64_t next = 0;
  for (size_t i = 0; i < r.chunks.size(); ++i) {
    const auto& c = r.chunks[i];
    ASSERT_EQ(c.first, next) << "gap or overlap before chunk " << i;
    ASSERT_LT(c.first, c.second);
    if (i + 1 < r.chunks.size()) {
      EXPECT_GE(c.second - c.first, std::max<int64_t>(grain, 1));
    }
    next = c.second;
  }
  EXPECT_EQ(next, n);
}

TEST(CpuExec, DefaultCoversRangeWithChunksOfAtLeastGrain) {
  const auto& ex = stridewise::default_cpu_executor();
  for (int64_t n : {0, 1, 2, 7, 100, 1000, 4097, 100000, 1000003})
    for (int64_t grain : {-1, 0, 1, 3, 64, 1000, 32768, 1 << 22}) expect_partition(ex, n, grain);
}

TEST(CpuExec, SerialRunsOneChunkOnCallingThread) {
  const auto& ex = stridewise::serial_cpu_executor();
  Record r;
  ex.parallel_for(ex.self, 12345, 1, &record_chunk, &r);
  ASSERT_EQ(r.chunks.size(), 1u);
  EXPECT_EQ(r.chunks[0], std::make_pair(int64_t{0}, int64_t{12345}));
  EXPECT_EQ(r.threads[0], std::this_thread::get_id());
  expect_partition(ex, 0, 1);
}

TEST(CpuExec, UsesSeveralThreadsWhenWorthIt) {
  if (std::thread::hardware_concurrency() < 2) GTEST_SKIP() << "single core";
  const auto& ex = stridewise::default_cpu_executor();
  Record r;
  ex.parallel_for(ex.self, 1 << 20, 1024, &record_chunk, &r);
  std::sort(r.threads.begin(), r.threads.end());
  const auto distinct = std::unique(r.threads.begin(), r.threads.end()) - r.threads.begin();
  EXPECT_GE(distinct, 2);
}

struct Nested {
  std::atomic<int64_t> total{0};
};

void inner_sum(void* ctx, int64_t b, int64_t e) {
  static_cast<Nested*>(ctx)->total += e - b;
}

void outer_chunk(void* ctx, int64_t b, int64_t e) {
  const auto& ex = stridewise::default_cpu_executor();
  for (int64_t i = b; i < e; ++i) ex.parallel_for(ex.self, 5000, 10, &inner_sum, ctx);
}

TEST(CpuExec, NestedCallsComplete) {
  const auto& ex = stridewise::default_cpu_executor();
  Nested n;
  ex.parallel_for(ex.self, 64, 1, &outer_chunk, &n);
  EXPECT_EQ(n.total.load(), 64 * 5000);
}

}  // namespace
}  // namespace swt
