// CPU executors; see cpu_exec.h for the contract.
//
// The default executor starts its worker threads per call instead of keeping a pool: a
// call that is worth splitting moves at least 2 * grain elements, so thread start-up
// (tens of microseconds) is small next to the work, and there is no pool state that a
// nested call, a fork() or static destruction order could deadlock on.
#include "stridewise/cpu_exec.h"

#include <algorithm>
#include <system_error>
#include <thread>
#include <vector>

namespace stridewise {
namespace {

// Set on threads that are running chunks. A nested parallel_for from inside a chunk runs
// serially: the outer call already uses every core, more threads would only oversubscribe.
thread_local bool t_in_parallel = false;

struct ParallelScope {
  ParallelScope() : prev(t_in_parallel) { t_in_parallel = true; }
  ~ParallelScope() { t_in_parallel = prev; }
  bool prev;
};

int hardware_threads() {
  static const int n = [] {
    const unsigned hc = std::thread::hardware_concurrency();
    return hc == 0 ? 1 : static_cast<int>(std::min(hc, 256u));
  }();
  return n;
}

void serial_parallel_for(void*, int64_t n, int64_t, RangeFn fn, void* ctx) {
  if (n > 0) fn(ctx, 0, n);
}

// Chunk i is [i*n/c, (i+1)*n/c): sizes differ by at most one and, because c <= n / grain,
// every chunk is at least `grain` long.
int64_t chunk_begin(int64_t n, int64_t chunks, int64_t i) {
  // n * i can overflow int64 only for n > 2^55 with 256 chunks; split the product.
  return (n / chunks) * i + ((n % chunks) * i) / chunks;
}

void threaded_parallel_for(void*, int64_t n, int64_t grain, RangeFn fn, void* ctx) {
  if (n <= 0) return;
  grain = std::max<int64_t>(grain, 1);
  const int64_t chunks = std::min<int64_t>(hardware_threads(), n / grain);
  if (chunks <= 1 || t_in_parallel) {
    ParallelScope scope;
    fn(ctx, 0, n);
    return;
  }

  std::vector<std::thread> workers;
  workers.reserve(static_cast<size_t>(chunks - 1));
  int64_t spawned = 1;  // chunk 0 runs on the calling thread
  try {
    for (; spawned < chunks; ++spawned) {
      const int64_t b = chunk_begin(n, chunks, spawned);
      const int64_t e = chunk_begin(n, chunks, spawned + 1);
      workers.emplace_back([=] {
        ParallelScope scope;
        fn(ctx, b, e);
      });
    }
  } catch (const std::system_error&) {
    // Out of threads: the chunks not handed out run here, so the contract still holds.
  }
  {
    ParallelScope scope;
    fn(ctx, 0, chunk_begin(n, chunks, 1));
    for (int64_t i = spawned; i < chunks; ++i)
      fn(ctx, chunk_begin(n, chunks, i), chunk_begin(n, chunks, i + 1));
  }
  for (auto& t : workers) t.join();
}

}  // namespace

const CpuExecutor& default_cpu_executor() {
  static const CpuExecutor exec{&threaded_parallel_for, nullptr};
  return exec;
}

const CpuExecutor& serial_cpu_executor() {
  static const CpuExecutor exec{&serial_parallel_for, nullptr};
  return exec;
}

}  // namespace stridewise
