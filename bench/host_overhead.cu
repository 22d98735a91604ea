// Host time per call of the core's CUDA gather, split into its parts, on the seed's shape
// (x (4,16,384) fp16, index (4,1,1) expanded to (4,1,384), dim 1): the plan (argument checks
// and loop planning), the launch path of gather_cuda with a ready plan (cudaGetDevice, the
// error record, kernel choice, the launch, cudaGetLastError), the whole convenience call, and
// a bare launch of an empty kernel as the floor. Torch is not involved: what the adapter and
// Python add on top is measured by bench/bench_host.py.
//
//   build-gpu/bench/sw_host_overhead [calls_per_batch=256] [batches=200]
//
// Launches are timed in batches of at most 256 (the stream's queue holds more, so a launch
// never waits for the GPU), the stream is drained between batches, outside the timing.
// Prints the median ns per call of each part.
#include <cuda_runtime.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "stridewise/gather.h"

namespace {

__global__ void empty_kernel(int) {}

using Clock = std::chrono::steady_clock;

template <typename F>
double median_ns(int calls, int batches, cudaStream_t s, F&& f) {
  std::vector<double> per_call;
  for (int b = 0; b < batches + 3; ++b) {  // 3 warm-up batches
    const auto t0 = Clock::now();
    for (int i = 0; i < calls; ++i) f();
    const auto t1 = Clock::now();
    cudaStreamSynchronize(s);
    if (b >= 3)
      per_call.push_back(std::chrono::duration<double, std::nano>(t1 - t0).count() / calls);
  }
  std::sort(per_call.begin(), per_call.end());
  return per_call[per_call.size() / 2];
}

bool ok(cudaError_t e, const char* what) {
  if (e == cudaSuccess) return true;
  std::fprintf(stderr, "%s: %s\n", what, cudaGetErrorString(e));
  return false;
}

}  // namespace

int main(int argc, char** argv) {
  const int calls = argc > 1 ? std::atoi(argv[1]) : 256;
  const int batches = argc > 2 ? std::atoi(argv[2]) : 200;
  void *x = nullptr, *idx = nullptr, *out = nullptr;
  if (!ok(cudaMalloc(&x, 4 * 16 * 384 * 2), "cudaMalloc") ||
      !ok(cudaMalloc(&idx, 4 * 8), "cudaMalloc") ||
      !ok(cudaMalloc(&out, 4 * 384 * 2), "cudaMalloc"))
    return 1;
  const int64_t fifteen[4] = {15, 15, 15, 15};
  cudaMemcpy(idx, fifteen, sizeof fifteen, cudaMemcpyHostToDevice);
  cudaStream_t s;
  cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking);

  using stridewise::DType;
  stridewise::GatherArgs a;
  a.dim = 1;
  a.self = stridewise::make_view(x, DType::kFloat16, {4, 16, 384}, {6144, 384, 1});
  a.index = stridewise::make_view(idx, DType::kInt64, {4, 1, 384}, {1, 1, 0});
  a.out = stridewise::make_view(out, DType::kFloat16, {4, 1, 384}, {384, 384, 1});
  stridewise::GatherPlan plan;
  stridewise::ErrorDetail err;
  if (stridewise::plan_gather(a, &plan, &err) != stridewise::Status::kOk) {
    std::fprintf(stderr, "plan_gather: %s\n", err.message.c_str());
    return 1;
  }
  bool failed = false;
  const auto check = [&](stridewise::Status st) { failed |= st != stridewise::Status::kOk; };

  int device = 0;
  const double get_device = median_ns(calls, batches, s, [&] { cudaGetDevice(&device); });
  const double bare = median_ns(calls, batches, s, [&] { empty_kernel<<<1, 32, 0, s>>>(0); });
  const double planning = median_ns(calls, batches, s, [&] {
    stridewise::GatherPlan p;
    check(stridewise::plan_gather(a, &p, &err));
  });
  const double launch =
      median_ns(calls, batches, s, [&] { check(stridewise::gather_cuda(a, plan, s, &err)); });
  const double whole =
      median_ns(calls, batches, s, [&] { check(stridewise::gather_cuda(a, s, &err)); });
  if (failed || !ok(cudaStreamSynchronize(s), "gather")) {
    std::fprintf(stderr, "a gather call failed: %s\n", err.message.c_str());
    return 1;
  }
  std::printf("host ns per call (median of %d batches of %d), seed shape fp16:\n", batches, calls);
  std::printf("  cudaGetDevice                          %8.0f\n", get_device);
  std::printf("  bare launch of an empty kernel         %8.0f\n", bare);
  std::printf("  plan_gather (checks + loop plan)       %8.0f\n", planning);
  std::printf("  gather_cuda with a plan (launch path)  %8.0f\n", launch);
  std::printf("  gather_cuda, plan included             %8.0f\n", whole);
  cudaFree(x);
  cudaFree(idx);
  cudaFree(out);
  cudaStreamDestroy(s);
  return 0;
}
