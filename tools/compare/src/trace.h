// Finds where differences between two aligned runs start: the ops that introduced one, and for
// an input that differs with no divergent producer, where its bytes came from (an op of one run
// only, or outside the dump), by following each run's writes through memory addresses.
#pragma once
#include <vector>

#include "compare.h"
#include "dump_index.h"

namespace swc {

struct TracedTensor {
  size_t entry = 0;  // index into Result::entries
  const DumpEntry* a = nullptr;
  const DumpEntry* b = nullptr;
};

// One step of the alignment of a (step, rank) pair: an op of A, of B, or of both.
struct TracedOp {
  const DumpOp* a = nullptr;
  const DumpOp* b = nullptr;
  std::vector<TracedTensor> tensors;
};

// The origins of every difference in one (step, rank) pair, in merged execution order, each with
// the chain of ops it reached. ops: the alignment, in merged order (each side's ops in its own
// execution order). Entries must be judged already.
std::vector<Origin> trace_origins(const std::vector<TracedOp>& ops,
                                  const std::vector<Entry>& entries, int64_t step, int64_t rank,
                                  size_t max_chain = 12);

// "aten::gather call 3 (forward)"
std::string op_label(const OpRef& r);

OpRef op_ref(const TracedOp& t);

}  // namespace swc
