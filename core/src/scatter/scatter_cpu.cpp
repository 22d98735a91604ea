// The scatter family on the CPU; see scatter.h for the contract.
//
// Three passes over the shared LoopPlans, each split into chunks by the CpuExecutor:
//  1. validate: every element of the index's storage that the view reaches (a stride-0 dim is
//     read once, not once per position), in the index's own memory order. The first bad one
//     (the minimum position over chunks, as in gather_cpu.cpp) is reported and nothing is
//     written. ErrorDetail::position counts in that order.
//  2. copy self -> out (out-of-place forms), per element size.
//  3. scatter: parallel over lines (every coordinate but dim fixed: distinct lines never
//     share an out position), each line walked in index order along dim. So duplicates
//     combine in index order and the last copy wins, whatever the thread count. When every
//     line shares one index sequence (PyG's and MoE's expanded index, a 1-D index), the
//     segment path (scatter_cpu_segments.cpp) gives the same result target by target.
// Copy moves bytes (per element size). Accumulating combines use scatter_cpu_types.h; where
// the element type is float16/bfloat16, or the combine needs a count (mean) or a first-touch
// rule (include_self = false), a line accumulates into per-chunk scratch of out_dim_size
// entries and writes each touched position once at the end of the line.
#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstring>
#include <limits>
#include <vector>

#include "scatter/scatter_cpu_walk.h"
#include "stridewise/scatter.h"

namespace stridewise {
namespace cpu_scatter {
namespace {

// ---- pass 1: validation -----------------------------------------------------------------

void validate_range(void* ctx, int64_t begin, int64_t end) {
  Job& j = *static_cast<Job*>(ctx);
  const int64_t unit[1] = {j.i64 ? 8 : 4};
  char* const ptr[1] = {static_cast<char*>(j.args->index.data)};
  const Walk<1> w(*j.index_plan, unit, ptr);
  const int64_t size = j.plan->out_dim_size;
  w.rows(begin, end, [&](char* const* p, int64_t pos, int64_t n) {
    if (j.first_bad.load(std::memory_order_relaxed) < pos) return false;
    const char* ip = p[0];
    const int64_t step = w.b[0][0];
    for (int64_t i = 0; i < n; ++i, ip += step) {
      const int64_t v = load_index(ip, j.i64);
      if (v < 0 || v >= size) {
        publish_min(j.first_bad, pos + i);
        return false;
      }
    }
    return true;
  });
}

// ---- pass 2: self -> out ------------------------------------------------------------------

template <int E>
void copy_range(void* ctx, int64_t begin, int64_t end) {
  Job& j = *static_cast<Job*>(ctx);
  const int64_t unit[2] = {E, E};
  char* const ptr[2] = {static_cast<char*>(j.args->out.data),
                        static_cast<char*>(j.args->self.data)};
  const Walk<2> w(j.plan->copy, unit, ptr);
  w.rows(begin, end, [&](char* const* p, int64_t, int64_t n) {
    const int64_t so = w.b[0][0], ss = w.b[1][0];
    if (so == E && ss == E) {
      std::memmove(p[0], p[1], static_cast<size_t>(n) * E);
    } else {
      char* o = p[0];
      const char* s = p[1];
      for (int64_t i = 0; i < n; ++i, o += so, s += ss) std::memcpy(o, s, E);
    }
    return true;
  });
}

// ---- pass 3: the lines --------------------------------------------------------------------

// One line: `line_len` steps along dim from the line's index/src addresses; out_line is out's
// address for index value 0.
struct Line {
  char* out;
  const char* index;
  const char* src;
};

struct LineGeom {
  int64_t len, out_b, index_b, src_b;
};

// Calls row_fn(first, n, b) for each run of n lines that are neighbours along the lines
// plan's dim 0 (line r of the run starts at first + r * b[k], byte strides per operand).
template <typename F>
void for_line_runs(Job& j, int64_t begin, int64_t end, int64_t esize, F&& run_fn) {
  const ScatterPlan& pl = *j.plan;
  const ScatterArgs& a = *j.args;
  const int64_t unit[3] = {esize, j.i64 ? 8 : 4, esize};
  char* const src = src_base(a);
  char* const ptr[3] = {static_cast<char*>(a.out.data), static_cast<char*>(a.index.data), src};
  const Walk<3> w(pl.lines, unit, ptr);
  const int64_t b[3] = {w.b[kScatterOut][0], w.b[kScatterIndex][0], w.b[kScatterSrc][0]};
  w.rows(begin, end, [&](char* const* p, int64_t, int64_t n) {
    run_fn(Line{p[kScatterOut], p[kScatterIndex], p[kScatterSrc]}, n, b);
    return true;
  });
}

// One line at a time (the scratch path: its scratch holds one line's targets).
template <typename F>
void for_lines(Job& j, int64_t begin, int64_t end, int64_t esize, F&& line_fn) {
  for_line_runs(j, begin, end, esize, [&](const Line& l, int64_t n, const int64_t* b) {
    for (int64_t r = 0; r < n; ++r)
      line_fn(Line{l.out + r * b[0], l.index + r * b[1], l.src + r * b[2]});
  });
}

// Step-major over a run of neighbouring lines: step i of every line of the run, then step
// i + 1. Each line still sees its steps in index order (so results are those of a line-by-line
// walk), but an index expanded along the lines (PyG, MoE) now reads src and writes out along
// their contiguous rows instead of down their columns.
template <typename F>
void for_steps_of_runs(Job& j, int64_t begin, int64_t end, int64_t esize, int64_t len,
                       int64_t index_b, int64_t src_b, F&& step_fn) {
  for_line_runs(j, begin, end, esize, [&](const Line& l, int64_t n, const int64_t* b) {
    const char* ip = l.index;
    const char* sp = l.src;
    for (int64_t i = 0; i < len; ++i, ip += index_b, sp += src_b)
      for (int64_t r = 0; r < n; ++r) step_fn(l.out + r * b[0], ip + r * b[1], sp + r * b[2]);
  });
}

LineGeom geom(const Job& j, int64_t esize) {
  const ScatterPlan& pl = *j.plan;
  return {pl.line_len, pl.out_dim_stride * esize, pl.index_dim_stride * (j.i64 ? 8 : 4),
          pl.src_dim_stride * esize};
}

template <int E>
void copy_lines_range(void* ctx, int64_t begin, int64_t end) {
  Job& j = *static_cast<Job*>(ctx);
  const LineGeom g = geom(j, E);
  for_steps_of_runs(j, begin, end, E, g.len, g.index_b, g.src_b,
                    [&](char* out, const char* ip, const char* sp) {
                      std::memcpy(out + load_index(ip, j.i64) * g.out_b, sp, E);
                    });
}

// Accumulates straight into out (element type = accumulation type, self included, no count).
template <typename T, Combine C>
void direct_lines_range(void* ctx, int64_t begin, int64_t end) {
  using Cv = Conv<T>;
  Job& j = *static_cast<Job*>(ctx);
  const LineGeom g = geom(j, sizeof(T));
  const SrcScale<T> scale = src_scale<T>(*j.args);
  for_steps_of_runs(
      j, begin, end, sizeof(T), g.len, g.index_b, g.src_b,
      [&](char* out, const char* ip, const char* sp) {
        char* o = out + load_index(ip, j.i64) * g.out_b;
        store(o, Cv::store(combine(C, Cv::load(load<T>(o)), scale(Cv::load(load<T>(sp))))));
      });
}

// Accumulates in scratch (Acc per out position along dim, a count, the touched list).
template <typename T, Combine C>
void scratch_lines_range(void* ctx, int64_t begin, int64_t end) {
  using Cv = Conv<T>;
  using Acc = AccOf<T>;
  Job& j = *static_cast<Job*>(ctx);
  const LineGeom g = geom(j, sizeof(T));
  const bool with_self = j.args->desc.include_self;
  const SrcScale<T> scale = src_scale<T>(*j.args);
  std::vector<Acc> acc(static_cast<size_t>(j.plan->out_dim_size));
  std::vector<int64_t> count(static_cast<size_t>(j.plan->out_dim_size), 0);
  std::vector<int64_t> touched;
  for_lines(j, begin, end, sizeof(T), [&](const Line& l) {
    const char* ip = l.index;
    const char* sp = l.src;
    for (int64_t i = 0; i < g.len; ++i, ip += g.index_b, sp += g.src_b) {
      const int64_t v = load_index(ip, j.i64);
      const Acc s = scale(Cv::load(load<T>(sp)));
      if (count[v]++ == 0) {
        touched.push_back(v);
        // Without self, from ATen's identity combined with the first value (so -0 alone sums
        // to +0, and a complex product starts as (1 + 0i) * s, as there).
        acc[v] = combine(
            C, with_self ? Cv::load(load<T>(l.out + v * g.out_b)) : Ops<Acc>::identity(C), s);
      } else {
        acc[v] = combine(C, acc[v], s);
      }
    }
    if constexpr (IsCx<T>::value && C == Combine::kMean) {  // ATen's division of the rest
      for (int64_t v = 0; v < j.plan->out_dim_size; ++v) {
        if (count[v] != 0) continue;
        char* o = l.out + v * g.out_b;
        store(o, Ops<T>::mean(load<T>(o), 1));
      }
    }
    for (const int64_t v : touched) {
      Acc r = acc[v];
      if (finish_acc<T>(C, with_self, count[v], &r)) store(l.out + v * g.out_b, Cv::store(r));
      count[v] = 0;
    }
    touched.clear();
  });
}

template <typename T, Combine C>
RangeFn pick_accumulate(const ScatterArgs& a) {
  constexpr bool low_precision = std::is_same_v<T, F16> || std::is_same_v<T, BF16>;
  if (low_precision || C == Combine::kMean || !a.desc.include_self)
    return &scratch_lines_range<T, C>;
  return &direct_lines_range<T, C>;
}

RangeFn pick_by_size(int esize, bool copy_pass) {
  return by_elem_size(esize, [&](auto e) -> RangeFn {
    constexpr int E = decltype(e)::value;
    return copy_pass ? &copy_range<E> : &copy_lines_range<E>;
  });
}

RangeFn pick_scatter(const ScatterArgs& a) {
  if (a.desc.combine == Combine::kCopy) return pick_by_size(elem_size(a.out.dtype), false);
  RangeFn fn = nullptr;
  (void)with_type(a.out.dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    switch (a.desc.combine) {
      case Combine::kAdd:
        fn = pick_accumulate<T, Combine::kAdd>(a);
        break;
      case Combine::kMul:
        if (a.cx_product == ComplexProduct::kFma && IsCx<T>::value)
          fn = pick_accumulate<typename FusedOf<T>::type, Combine::kMul>(a);
        else
          fn = pick_accumulate<T, Combine::kMul>(a);
        break;
      case Combine::kMean:
        if constexpr (!std::is_same_v<T, Bool>) fn = pick_accumulate<T, Combine::kMean>(a);
        break;
      case Combine::kMax:
        if constexpr (!std::is_same_v<T, Cx<float>> && !std::is_same_v<T, Cx<double>>)
          fn = pick_accumulate<T, Combine::kMax>(a);
        break;
      case Combine::kMin:
        if constexpr (!std::is_same_v<T, Cx<float>> && !std::is_same_v<T, Cx<double>>)
          fn = pick_accumulate<T, Combine::kMin>(a);
        break;
      case Combine::kCopy:
        break;
    }
    return Status::kOk;
  });
  return fn;
}

// ---- complex mean: out beyond the lines -----------------------------------------------------

// ATen's complex mean divides every position of out by its count as a complex number, those no
// index value reaches by 1 + 0i. The lines divide their own; these are the rest of out.
struct UnitMean {
  LoopPlan<1> plan;
  char* base;
};

template <typename T>
void unit_mean_range(void* ctx, int64_t begin, int64_t end) {
  const UnitMean& u = *static_cast<const UnitMean*>(ctx);
  const int64_t unit[1] = {int64_t(sizeof(T))};
  char* const ptr[1] = {u.base};
  const Walk<1> w(u.plan, unit, ptr);
  w.rows(begin, end, [&](char* const* p, int64_t, int64_t n) {
    char* o = p[0];
    for (int64_t i = 0; i < n; ++i, o += w.b[0][0]) store(o, Ops<T>::mean(load<T>(o), 1));
    return true;
  });
}

// Out outside the lines: for each dim d but dim, the slab of out beyond the index's extent on d
// (the dims before it narrowed to the index's extent, so slabs do not meet); all of out when
// there is no line.
template <typename T>
void unit_mean_beyond_lines(const ScatterArgs& a, const ScatterPlan& plan, const CpuExecutor& ex) {
  const StridedView& o = a.out;
  const int r = o.rank;
  int64_t sizes[kMaxRank];
  for (int d = 0; d < r; ++d) sizes[d] = o.sizes[d];
  const int64_t* strides[1] = {o.strides};
  const auto run = [&](char* base) {
    UnitMean u{plan_loop<1>(r, sizes, strides), base};
    if (u.plan.numel > 0) ex.parallel_for(ex.self, u.plan.numel, kGrain, &unit_mean_range<T>, &u);
  };
  char* const base = static_cast<char*>(o.data);
  if (plan.lines.numel == 0 || plan.line_len == 0) return run(base);
  for (int d = 0; d < r; ++d) {
    const int64_t lo = a.index.sizes[d];
    if (d == a.dim || lo >= o.sizes[d]) continue;
    sizes[d] = o.sizes[d] - lo;
    run(base + lo * o.strides[d] * int64_t(sizeof(T)));
    sizes[d] = lo;
  }
}

void complex_mean_rest(const ScatterArgs& a, const ScatterPlan& plan, const CpuExecutor& ex) {
  if (a.out.dtype == DType::kComplex64)
    unit_mean_beyond_lines<Cx<float>>(a, plan, ex);
  else
    unit_mean_beyond_lines<Cx<double>>(a, plan, ex);
}

}  // namespace
}  // namespace cpu_scatter

using namespace cpu_scatter;

Status scatter_cpu(const ScatterArgs& args, const CpuExecutor& exec, ErrorDetail* err) {
  ScatterPlan plan;
  const Status s = plan_scatter(args, &plan, err);
  if (s != Status::kOk) return s;
  return scatter_cpu(args, plan, exec, err);
}

Status scatter_cpu(const ScatterArgs& args, const ScatterPlan& plan, const CpuExecutor& exec,
                   ErrorDetail* err) {
  const CpuExecutor& ex = exec.parallel_for ? exec : serial_cpu_executor();
  const int esize = elem_size(args.out.dtype);
  const RangeFn scatter_fn = pick_scatter(args);
  const RangeFn copy_fn = pick_by_size(esize, true);
  if (scatter_fn == nullptr || copy_fn == nullptr)
    return detail::fail_op(err, args.desc.op, Status::kUnsupported,
                           std::string("scatter(): ") + combine_name(args.desc.combine) +
                               " is not implemented for " + dtype_name(args.out.dtype));

  Job job;
  job.args = &args;
  job.plan = &plan;
  job.i64 = args.index.dtype == DType::kInt64;
  job.esize = esize;

  if (plan.elems.numel > 0) {
    const LoopPlan<1>& index_plan = plan.index_elems;
    job.index_plan = &index_plan;
    ex.parallel_for(ex.self, index_plan.numel, kGrain, &validate_range, &job);
    const int64_t bad = job.first_bad.load();
    if (bad != kNoError) {
      if (err) {
        const int is = job.i64 ? 8 : 4;
        const char* p =
            static_cast<const char*>(args.index.data) + plan_offset(index_plan, 0, bad) * is;
        *err = ErrorDetail{};
        err->status = Status::kIndexOutOfRange;
        err->op = args.desc.op;
        err->dim = plan.dim;
        err->value = load_index(p, job.i64);
        err->lo = 0;
        err->hi = plan.out_dim_size;
        err->position = bad;
        err->message = format_index_error(*err);
      }
      return Status::kIndexOutOfRange;
    }
  }
  if (!plan.in_place && plan.copy.numel > 0)
    ex.parallel_for(ex.self, plan.copy.numel, kGrain, copy_fn, &job);
  if (plan.lines.numel > 0 && plan.line_len > 0) {
    Segments seg;
    const RangeFn seg_fn = pick_segment_kernel(args);
    if (seg_fn != nullptr && build_segments(job, &seg)) {
      job.segments = &seg;
      const int64_t lines = static_cast<int64_t>(seg.out_off.size());
      const int64_t per_target = std::max<int64_t>(1, lines * plan.line_len / plan.out_dim_size);
      ex.parallel_for(ex.self, plan.out_dim_size, std::max<int64_t>(1, kGrain / per_target), seg_fn,
                      &job);
    } else {
      const int64_t grain = std::max<int64_t>(1, kGrain / plan.line_len);
      ex.parallel_for(ex.self, plan.lines.numel, grain, scatter_fn, &job);
    }
  }
  const bool cx = args.out.dtype == DType::kComplex64 || args.out.dtype == DType::kComplex128;
  if (cx && args.desc.combine == Combine::kMean) complex_mean_rest(args, plan, ex);
  if (err) *err = ErrorDetail{};
  return Status::kOk;
}

}  // namespace stridewise
