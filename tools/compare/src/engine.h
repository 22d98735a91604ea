// Multithreaded, streaming comparison of tensor pairs: each tensor is read in chunks of bounded
// size (pread into per-thread buffers), chunks are reduced in parallel and merged in chunk order,
// so memory stays bounded by threads x chunk size whatever the tensor size, and the result does
// not depend on the number of threads.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "metrics.h"
#include "tensor_file.h"

namespace swc {

struct Job {
  TensorRef a, b;  // same numel, both dtypes supported (the caller checks)
  Tolerance tol;
  Partial total;
  std::string error;  // set when reading failed (names the file and the reason)
};

struct EngineOptions {
  unsigned threads = 0;             // 0: std::thread::hardware_concurrency()
  uint64_t chunk_bytes = 4u << 20;  // per side and thread
  uint64_t window_tasks = 4096;     // chunks in flight before an ordered merge
};

struct EngineStats {
  uint64_t bytes_a = 0, bytes_b = 0;
  double seconds = 0;
  unsigned threads = 0;
};

EngineStats run_jobs(std::vector<Job>& jobs, FileCache& files, const EngineOptions& opt);

// Peak resident set size of this process in bytes (VmHWM from /proc/self/status, or getrusage).
uint64_t peak_rss_bytes();

}  // namespace swc
