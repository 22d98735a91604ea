// Internal to sw-compare: the pieces compare.cpp (files) and compare_dumps.cpp (dumps) share.
#pragma once
#include <vector>

#include "compare.h"
#include "engine.h"
#include "tensor_file.h"

namespace swc {
namespace detail {

// Tensor pairs waiting for the engine, and the entry each one judges.
struct Work {
  std::vector<Job> jobs;
  std::vector<size_t> job_entry;
};

// Decides what to do with a matched pair: a status now, or a job for the engine.
void prepare(Entry& e, size_t index, const TensorRef& a, const TensorRef& b, const Policy& policy,
             Work& w);
// Runs the queued jobs and judges their entries.
void run_and_judge(Result& res, Work& w, const Options& opt);
// Fills Result's per-status counters from its entries.
void count(Result& res);
void compare_dumps(Result& res, const Policy& policy, const Options& opt);

}  // namespace detail
}  // namespace swc
