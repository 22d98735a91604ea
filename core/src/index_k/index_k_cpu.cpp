// Advanced indexing on the CPU; see index_k.h for the contract.
//
// One walker for both roles: the planned loop nest is walked row by row (the fastest planned
// dim), the slower dims advance as an odometer over byte offsets of every operand. A position's
// address in self is its restrided offset plus the k terms (index_k.h); a row whose index
// strides are all 0 forms its terms once.
//  - read: chunks in parallel; a chunk stops at its first bad value and publishes its position
//    with an atomic min, so the report is the first bad position in plan order whatever the
//    thread count (as gather_cpu does).
//  - write: every index value is checked first (in parallel, read only); then one thread writes
//    in the iteration's row-major order, so duplicates resolve in index order: the last writer
//    wins for copy, sums add in that order (rounded per step in the storage type, as ATen's
//    CPU kernel does). An order-free write (one value copied) is written in parallel chunks.
//  - mean (after the same check): the seq positions (IndexKPlan::seq) stably sorted by their
//    terms, so each element's writers form one run in index order, as on CUDA's sorted path;
//    runs in parallel (distinct runs write distinct elements), each summed over its row in
//    the accumulation type from +0, divided by the run's length and stored once.
#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstring>
#include <limits>
#include <numeric>
#include <vector>

#include "common/cpu_common.h"
#include "common/elem_arith.h"
#include "common/elem_types.h"
#include "stridewise/index_k.h"

namespace stridewise {
namespace {

using cpu_common::kGrain;
using cpu_common::kNoError;
using cpu_common::load_index;
using cpu_common::publish_min;
constexpr int kN = kIkOperands;

struct Job {
  const IndexKArgs* a = nullptr;
  LoopPlan<kN> loop;  // the walked plan (write: row-major order of the iteration shape)
  int64_t bstrides[kN][kMaxRank] = {};
  char* base[kN] = {};
  int64_t es = 0;
  bool idx64[kMaxIndexTerms] = {};
  int64_t term_bstride[kMaxIndexTerms] = {};
  int64_t unravel_bstrides[kMaxRank] = {};
  std::atomic<int64_t> first_bad{kNoError};
};

// Byte offset the k terms add at one position, or false (and *bad_term = j) for a bad value.
bool terms(const Job& j, const int64_t* off, int64_t* out, int* bad_term) {
  const IndexKArgs& a = *j.a;
  int64_t t = 0;
  if (a.mode == IndexMode::kUnravel) {
    int64_t v = load_index(j.base[kIkIndex0] + off[kIkIndex0], j.idx64[0]);
    const int64_t n = a.target.numel();
    if (!wrap_index(v, n, a.desc.wraps)) return *bad_term = 0, false;
    for (int d = a.target.rank - 1; d >= 0 && v > 0; --d) {  // row-major: last dim fastest
      const int64_t s = a.target.sizes[d];
      t += (v % s) * j.unravel_bstrides[d];
      v /= s;
    }
    *out = t;
    return true;
  }
  for (int k = 0; k < a.k; ++k) {
    int64_t v = load_index(j.base[kIkIndex0 + k] + off[kIkIndex0 + k], j.idx64[k]);
    const int64_t n = a.term_size[k];
    if (!wrap_index(v, n, a.desc.wraps)) return *bad_term = k, false;
    t += v * j.term_bstride[k];
  }
  *out = t;
  return true;
}

// Walks positions [begin, end) of j.loop, calling row(off, n) for each run of the fastest dim
// (off: byte offsets of the run's first position). row returns the offset in the run of a
// position that stops the walk, or -1; walk returns the stopping position or -1.
template <typename Row>
int64_t walk(const Job& j, int64_t begin, int64_t end, Row&& row) {
  const LoopPlan<kN>& L = j.loop;
  const int rank = L.rank > 0 ? L.rank : 1;
  int64_t coord[kMaxRank] = {};
  int64_t off[kN] = {};
  int64_t rest = begin;
  for (int d = 0; d < L.rank; ++d) {
    coord[d] = rest % L.sizes[d];
    rest /= L.sizes[d];
    for (int k = 0; k < kN; ++k) off[k] += coord[d] * j.bstrides[k][d];
  }
  const int64_t n0 = L.rank > 0 ? L.sizes[0] : 1;
  int64_t pos = begin;
  for (;;) {
    const int64_t n = std::min(n0 - coord[0], end - pos);
    const int64_t stop = row(off, n);
    if (stop >= 0) return pos + stop;
    pos += n;
    if (pos >= end) return -1;
    for (int k = 0; k < kN; ++k) off[k] -= coord[0] * j.bstrides[k][0];
    coord[0] = 0;
    for (int d = 1; d < rank; ++d) {
      for (int k = 0; k < kN; ++k) off[k] += j.bstrides[k][d];
      if (++coord[d] < L.sizes[d]) break;
      for (int k = 0; k < kN; ++k) off[k] -= L.sizes[d] * j.bstrides[k][d];
      coord[d] = 0;
    }
  }
}

bool row_shares_terms(const Job& j) {
  for (int k = 0; k < kMaxIndexTerms; ++k)
    if (j.bstrides[kIkIndex0 + k][0] != 0) return false;
  return j.a->mode == IndexMode::kSum;
}

// Visits each position of a row with (offsets, term); stops at a bad value.
template <typename F>
int64_t each_in_row(const Job& j, const int64_t* off0, int64_t n, F&& f) {
  int64_t off[kN];
  std::copy(off0, off0 + kN, off);
  const bool shared = row_shares_terms(j);
  int64_t t = 0;
  int bad = 0;
  if (shared && !terms(j, off, &t, &bad)) return 0;
  for (int64_t i = 0; i < n; ++i) {
    if (!shared && !terms(j, off, &t, &bad)) return i;
    f(off, t);
    for (int k = 0; k < kN; ++k) off[k] += j.bstrides[k][0];
  }
  return -1;
}

void read_range(void* ctx, int64_t begin, int64_t end) {
  Job& j = *static_cast<Job*>(ctx);
  if (j.first_bad.load(std::memory_order_relaxed) < begin) return;
  const size_t es = static_cast<size_t>(j.es);
  const int64_t stop = walk(j, begin, end, [&](const int64_t* off, int64_t n) {
    const bool runs = j.bstrides[kIkWritten][0] == j.es && j.bstrides[kIkOther][0] == j.es;
    if (runs && row_shares_terms(j)) {  // one contiguous run under one set of index values
      int64_t t = 0;
      int bad = 0;
      if (!terms(j, off, &t, &bad)) return int64_t(0);
      std::memcpy(j.base[kIkWritten] + off[kIkWritten], j.base[kIkOther] + off[kIkOther] + t,
                  static_cast<size_t>(n) * es);
      return int64_t(-1);
    }
    return each_in_row(j, off, n, [&](const int64_t* o, int64_t t) {
      std::memcpy(j.base[kIkWritten] + o[kIkWritten], j.base[kIkOther] + o[kIkOther] + t, es);
    });
  });
  if (stop >= 0) publish_min(j.first_bad, stop);
}

void check_range(void* ctx, int64_t begin, int64_t end) {
  Job& j = *static_cast<Job*>(ctx);
  if (j.first_bad.load(std::memory_order_relaxed) < begin) return;
  const int64_t stop = walk(j, begin, end, [&](const int64_t* off, int64_t n) {
    return each_in_row(j, off, n, [](const int64_t*, int64_t) {});
  });
  if (stop >= 0) publish_min(j.first_bad, stop);
}

// The write pass over positions [begin, end), after every value checked: on one thread over
// all of them (index order decides duplicates), or in chunks when the write is order-free.
Status write_span(const Job& j, int64_t begin, int64_t end) {
  const IndexKArgs& a = *j.a;
  const size_t es = static_cast<size_t>(j.es);
  auto run = [&](auto&& put) {
    walk(j, begin, end, [&](const int64_t* off, int64_t n) {
      return each_in_row(j, off, n, [&](const int64_t* o, int64_t t) {
        put(j.base[kIkWritten] + o[kIkWritten] + t, j.base[kIkOther] + o[kIkOther]);
      });
    });
    return Status::kOk;
  };
  if (a.desc.combine == Combine::kCopy)
    return run([&](char* dst, const char* src) { std::memcpy(dst, src, es); });
  return elem::with_type(a.self.dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    using C = arith::Conv<T>;
    using A = arith::AccOf<T>;
    return run([&](char* dst, const char* src) {
      T d, s;
      std::memcpy(&d, dst, sizeof d);
      std::memcpy(&s, src, sizeof s);
      const T r = C::store(arith::Ops<A>::add(C::load(d), C::load(s)));
      std::memcpy(dst, &r, sizeof r);
    });
  });
}

// A chunk of an order-free write (copies only: write_span cannot fail for them). Chunks may
// store the same bytes to one element at once, as ATen's index_fill_ threads do.
void write_range(void* ctx, int64_t begin, int64_t end) {
  write_span(*static_cast<const Job*>(ctx), begin, end);
}

// ---- mean --------------------------------------------------------------------------------

// The sorted writers of a mean and where their values are: byte offsets from self's and src's
// data.
struct MeanJob {
  const int64_t* order = nullptr;  // seq positions, sorted by element (index order in a run)
  const int64_t* runs = nullptr;   // run h is order[runs[h] .. runs[h + 1])
  const int64_t* elem = nullptr;   // per seq position: its element's offset in self
  const int64_t* from = nullptr;   // per seq position: its src offset
  const int64_t* row_self = nullptr;
  const int64_t* row_src = nullptr;
  int64_t n_row = 0;
  char* self = nullptr;
  const char* src = nullptr;
};

template <typename T>
void mean_range(void* ctx, int64_t begin, int64_t end) {
  const MeanJob& m = *static_cast<const MeanJob*>(ctx);
  using C = arith::Conv<T>;
  using A = arith::AccOf<T>;
  std::vector<A> acc(static_cast<size_t>(m.n_row));
  for (int64_t h = begin; h < end; ++h) {
    const int64_t first = m.runs[h], count = m.runs[h + 1] - first;
    std::fill(acc.begin(), acc.end(), A{});  // +0, ATen's identity: self takes no part
    for (int64_t i = first; i < first + count; ++i) {
      const char* s = m.src + m.from[m.order[i]];
      for (int64_t r = 0; r < m.n_row; ++r) {
        T v;
        std::memcpy(&v, s + m.row_src[r], sizeof v);
        acc[r] = arith::Ops<A>::add(acc[r], C::load(v));
      }
    }
    char* const d = m.self + m.elem[m.order[first]];
    for (int64_t r = 0; r < m.n_row; ++r) {
      A x = acc[r];
      arith::finish_acc<T>(Combine::kMean, /*include_self=*/false, count, &x);
      const T v = C::store(x);
      std::memcpy(d + m.row_self[r], &v, sizeof v);
    }
  }
}

// The write pass of a mean, after every value checked; `seq` walks plan.seq.
Status mean_all(const Job& seq, const IndexKPlan& plan, const CpuExecutor& ex) {
  const IndexKArgs& a = *seq.a;
  const int64_t n = plan.seq.numel, n_row = plan.row.numel;
  std::vector<int64_t> elem(static_cast<size_t>(n)), from(elem.size()), order(elem.size());
  int64_t q = 0;
  walk(seq, 0, n, [&](const int64_t* off, int64_t len) {
    return each_in_row(seq, off, len, [&](const int64_t* o, int64_t t) {
      elem[q] = o[kIkWritten] + t;
      from[q++] = o[kIkOther];
    });
  });
  std::iota(order.begin(), order.end(), int64_t(0));
  std::stable_sort(order.begin(), order.end(),
                   [&](int64_t x, int64_t y) { return elem[x] < elem[y]; });
  std::vector<int64_t> runs;
  for (int64_t i = 0; i < n; ++i)
    if (i == 0 || elem[order[i]] != elem[order[i - 1]]) runs.push_back(i);
  const int64_t n_runs = static_cast<int64_t>(runs.size());
  runs.push_back(n);
  std::vector<int64_t> row_self(static_cast<size_t>(n_row)), row_src(row_self.size());
  for (int64_t r = 0; r < n_row; ++r) {
    row_self[r] = plan_offset(plan.row, kIkWritten, r) * seq.es;
    row_src[r] = plan_offset(plan.row, kIkOther, r) * seq.es;
  }
  MeanJob m;
  m.order = order.data();
  m.runs = runs.data();
  m.elem = elem.data();
  m.from = from.data();
  m.row_self = row_self.data();
  m.row_src = row_src.data();
  m.n_row = n_row;
  m.self = seq.base[kIkWritten];
  m.src = seq.base[kIkOther];
  return elem::with_type(a.self.dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    ex.parallel_for(ex.self, n_runs, std::max<int64_t>(1, kGrain / std::max<int64_t>(1, n_row)),
                    &mean_range<T>, &m);
    return Status::kOk;
  });
}

void fill_job(Job& j, const IndexKArgs& a, const LoopPlan<kN>& loop) {
  j.a = &a;
  j.loop = loop;
  j.es = elem_size(a.self.dtype);
  const bool w = a.desc.role == IndexRole::kWrite;
  int64_t unit[kN];
  unit[kIkWritten] = unit[kIkOther] = j.es;
  j.base[kIkWritten] = static_cast<char*>(w ? a.self.data : a.out.data);
  // A value: every position reads its bytes (src's strides are planned as 0).
  j.base[kIkOther] = w && a.has_value ? reinterpret_cast<char*>(const_cast<unsigned char*>(a.value))
                                      : static_cast<char*>(w ? a.src.data : a.self.data);
  for (int k = 0; k < kMaxIndexTerms; ++k) {
    const bool live = k < a.k;
    j.idx64[k] = live && a.index[k].dtype == DType::kInt64;
    unit[kIkIndex0 + k] = live ? elem_size(a.index[k].dtype) : 0;
    j.base[kIkIndex0 + k] = live ? static_cast<char*>(a.index[k].data) : nullptr;
    j.term_bstride[k] = live ? a.term_stride[k] * j.es : 0;
  }
  for (int d = 0; d < loop.rank; ++d)
    for (int k = 0; k < kN; ++k) j.bstrides[k][d] = loop.strides[k][d] * unit[k];
  for (int d = 0; d < a.target.rank; ++d) j.unravel_bstrides[d] = a.target.strides[d] * j.es;
}

Status report_bad(const Job& j, int64_t pos, ErrorDetail* err) {
  const IndexKArgs& a = *j.a;
  if (err) {
    int64_t off[kN];
    for (int k = 0; k < kN; ++k) off[k] = plan_offset(j.loop, k, pos);
    for (int k = kIkIndex0; k < kN; ++k) {
      const int64_t unit = k - kIkIndex0 < a.k ? elem_size(a.index[k - kIkIndex0].dtype) : 0;
      off[k] *= unit;
    }
    int64_t t = 0;
    int bad = 0;
    terms(j, off, &t, &bad);
    *err = ErrorDetail{};
    err->status = Status::kIndexOutOfRange;
    err->op = a.desc.op;
    err->value = load_index(j.base[kIkIndex0 + bad] + off[kIkIndex0 + bad], j.idx64[bad]);
    const int64_t n = a.mode == IndexMode::kUnravel ? a.target.numel() : a.term_size[bad];
    err->dim = a.mode == IndexMode::kUnravel ? -1 : a.term_dim[bad];
    err->lo = a.desc.lowest_index(n);
    err->hi = n;
    err->position = pos;
    err->message = format_index_error(*err);
  }
  return Status::kIndexOutOfRange;
}

}  // namespace

Status index_k_cpu(const IndexKArgs& args, const IndexKPlan& plan, const CpuExecutor& exec,
                   ErrorDetail* err) {
  if (err) *err = ErrorDetail{};
  if (plan.loop.numel == 0) return Status::kOk;
  const CpuExecutor& ex = exec.parallel_for ? exec : serial_cpu_executor();
  const bool w = args.desc.role == IndexRole::kWrite;
  Job job;
  fill_job(job, args, w ? plan.ordered : plan.loop);
  ex.parallel_for(ex.self, job.loop.numel, kGrain, w ? &check_range : &read_range, &job);
  const int64_t bad = job.first_bad.load();
  if (bad != kNoError) return report_bad(job, bad, err);
  if (!w) return Status::kOk;
  Status s = Status::kOk;
  if (plan.order_free) {
    ex.parallel_for(ex.self, job.loop.numel, kGrain, &write_range, &job);
  } else if (args.desc.combine == Combine::kMean) {
    Job seq;
    fill_job(seq, args, plan.seq);
    s = mean_all(seq, plan, ex);
  } else {
    s = write_span(job, 0, job.loop.numel);
  }
  if (s != Status::kOk)
    return detail::fail_op(err, args.desc.op, s,
                           std::string(op_name(args.desc.op)) +
                               "(): " + combine_name(args.desc.combine) +
                               " is not implemented for " + dtype_name(args.self.dtype));
  return Status::kOk;
}

}  // namespace stridewise
