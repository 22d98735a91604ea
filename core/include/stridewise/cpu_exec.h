// How CPU kernels get threads. The core does not own a thread pool policy: the torch
// adapter passes one backed by at::parallel_for (so torch.set_num_threads applies and no
// second OpenMP runtime is loaded); C++ users without torch get a std::thread default.
#pragma once

#include <cstdint>

namespace stridewise {

using RangeFn = void (*)(void* ctx, int64_t begin, int64_t end);

struct CpuExecutor {
  // Calls fn(ctx, b, e) on disjoint chunks covering [0, n), each at least `grain` long
  // (except the last), possibly concurrently. Must return after every chunk finished.
  void (*parallel_for)(void* self, int64_t n, int64_t grain, RangeFn fn, void* ctx) = nullptr;
  void* self = nullptr;
};

// std::thread-based executor using hardware_concurrency() threads.
const CpuExecutor& default_cpu_executor();

// Runs on the calling thread only; for tests and for callers already inside a parallel region.
const CpuExecutor& serial_cpu_executor();

}  // namespace stridewise
