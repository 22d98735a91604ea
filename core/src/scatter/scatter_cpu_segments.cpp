// The CPU scatter's segment path (scatter_cpu_walk.h): for an index every line shares, the
// index values are counting-sorted by target once (stable), and threads split the targets.
// For one target, the positions aimed at it are combined in index order, each across all
// lines at once: with an expanded index the lines are out's and src's contiguous rows, so a
// position reads one src row and a target writes one out row (the line walk reads columns).
// Per line the combination order is the line walk's, so results are bitwise the same.
#include <algorithm>
#include <cstdint>
#include <cstring>
#include <type_traits>
#include <vector>

#include "scatter/scatter_cpu_walk.h"

namespace stridewise {
namespace cpu_scatter {
namespace {

// Above these the sort's tables or the per-line offsets would cost more memory than they save.
constexpr int64_t kMaxLines = int64_t(1) << 22;
constexpr int64_t kTargetSlack = int64_t(1) << 22;

bool index_shared(const ScatterArgs& a) {
  for (int d = 0; d < a.index.rank; ++d)
    if (d != a.dim && a.index.sizes[d] > 1 && a.index.strides[d] != 0) return false;
  return true;
}

template <int E>
void segment_copy_range(void* ctx, int64_t begin, int64_t end) {
  const Job& j = *static_cast<const Job*>(ctx);
  const Segments& s = *j.segments;
  const ScatterPlan& pl = *j.plan;
  char* const out = static_cast<char*>(j.args->out.data);
  const char* const src = src_base(*j.args);
  const int64_t out_b = pl.out_dim_stride * E, src_b = pl.src_dim_stride * E;
  const size_t lines = s.out_off.size();
  for (int64_t v = begin; v < end; ++v) {
    if (s.start[v] == s.start[v + 1]) continue;
    const char* sp = src + s.order[s.start[v + 1] - 1] * src_b;  // the last writer wins
    char* op = out + v * out_b;
    for (size_t l = 0; l < lines; ++l) std::memcpy(op + s.out_off[l], sp + s.src_off[l], E);
  }
}

// Contig: every line's out and src offset is line * sizeof(T) (an expanded index over
// contiguous rows, the common case), so the loops over lines run over plain arrays and
// vectorize; otherwise they go through the per-line offset tables.
template <typename T, Combine C, bool Contig>
void segment_acc_targets(const Job& j, int64_t begin, int64_t end) {
  using Cv = Conv<T>;
  using Acc = AccOf<T>;
  const Segments& s = *j.segments;
  const ScatterPlan& pl = *j.plan;
  const bool with_self = j.args->desc.include_self;
  char* const out = static_cast<char*>(j.args->out.data);
  const char* const src = src_base(*j.args);
  const int64_t out_b = pl.out_dim_stride * int64_t(sizeof(T));
  const int64_t src_b = pl.src_dim_stride * int64_t(sizeof(T));
  const size_t lines = s.out_off.size();
  const auto oo = [&](size_t l) { return Contig ? int64_t(l * sizeof(T)) : s.out_off[l]; };
  const auto so = [&](size_t l) { return Contig ? int64_t(l * sizeof(T)) : s.src_off[l]; };
  const SrcScale<T> scale = src_scale<T>(*j.args);
  std::vector<Acc> acc(lines);
  for (int64_t v = begin; v < end; ++v) {
    const int64_t b = s.start[v], e = s.start[v + 1];
    char* op = out + v * out_b;
    if (b == e) {
      if constexpr (IsCx<T>::value && C == Combine::kMean) {  // ATen divides it by 1 + 0i
        for (size_t l = 0; l < lines; ++l) store(op + oo(l), Ops<T>::mean(load<T>(op + oo(l)), 1));
      }
      continue;
    }
    const char* sp = src + s.order[b] * src_b;
    for (size_t l = 0; l < lines; ++l) {
      const Acc x = scale(Cv::load(load<T>(sp + so(l))));
      // As the line walk: self first when included; else ATen's identity.
      acc[l] = combine(C, with_self ? Cv::load(load<T>(op + oo(l))) : Ops<Acc>::identity(C), x);
    }
    for (int64_t k = b + 1; k < e; ++k) {
      sp = src + s.order[k] * src_b;
      for (size_t l = 0; l < lines; ++l)
        acc[l] = combine(C, acc[l], scale(Cv::load(load<T>(sp + so(l)))));
    }
    for (size_t l = 0; l < lines; ++l) {
      Acc r = acc[l];
      if (finish_acc<T>(C, with_self, e - b, &r)) store(op + oo(l), Cv::store(r));
    }
  }
}

template <typename T, Combine C>
void segment_acc_range(void* ctx, int64_t begin, int64_t end) {
  const Job& j = *static_cast<const Job*>(ctx);
  if (j.segments->contiguous)
    segment_acc_targets<T, C, true>(j, begin, end);
  else
    segment_acc_targets<T, C, false>(j, begin, end);
}

}  // namespace

bool build_segments(const Job& j, Segments* s) {
  const ScatterArgs& a = *j.args;
  const ScatterPlan& pl = *j.plan;
  const int64_t n = pl.line_len, size = pl.out_dim_size, lines = pl.lines.numel;
  if (a.index.rank == 0 || n < 2 || lines > kMaxLines || size > 16 * n + kTargetSlack ||
      !index_shared(a))
    return false;

  // Counting sort of the shared index values by target, stable in index order.
  s->start.assign(static_cast<size_t>(size + 1), 0);
  const char* ip = static_cast<const char*>(a.index.data);
  const int64_t ib = pl.index_dim_stride * (j.i64 ? 8 : 4);
  std::vector<int64_t> val(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) {
    val[i] = load_index(ip + i * ib, j.i64);
    ++s->start[val[i] + 1];
  }
  for (int64_t v = 0; v < size; ++v) s->start[v + 1] += s->start[v];
  std::vector<int64_t> next(s->start.begin(), s->start.end() - 1);
  s->order.resize(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) s->order[next[val[i]]++] = i;

  // Each line's base offsets (out at index value 0, src at step 0), in bytes.
  const int64_t es = j.esize;
  const int64_t unit[3] = {es, j.i64 ? 8 : 4, es};
  char* const out = static_cast<char*>(a.out.data);
  char* const src = src_base(a);
  char* const ptr[3] = {out, const_cast<char*>(ip), src};
  const Walk<3> w(pl.lines, unit, ptr);
  s->out_off.clear();
  s->src_off.clear();
  s->out_off.reserve(static_cast<size_t>(lines));
  s->src_off.reserve(static_cast<size_t>(lines));
  w.rows(0, lines, [&](char* const* p, int64_t, int64_t cnt) {
    for (int64_t r = 0; r < cnt; ++r) {
      s->out_off.push_back((p[kScatterOut] - out) + r * w.b[kScatterOut][0]);
      s->src_off.push_back((p[kScatterSrc] - src) + r * w.b[kScatterSrc][0]);
    }
    return true;
  });
  s->contiguous = !a.has_value;
  for (size_t l = 0; l < s->out_off.size() && s->contiguous; ++l)
    s->contiguous = s->out_off[l] == int64_t(l) * es && s->src_off[l] == int64_t(l) * es;
  return true;
}

RangeFn pick_segment_kernel(const ScatterArgs& a) {
  if (a.desc.combine == Combine::kCopy)
    return by_elem_size(elem_size(a.out.dtype),
                        [](auto e) -> RangeFn { return &segment_copy_range<decltype(e)::value>; });
  RangeFn fn = nullptr;
  (void)with_type(a.out.dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    constexpr bool cx = std::is_same_v<T, Cx<float>> || std::is_same_v<T, Cx<double>>;
    switch (a.desc.combine) {
      case Combine::kAdd:
        fn = &segment_acc_range<T, Combine::kAdd>;
        break;
      case Combine::kMul:
        if (a.cx_product == ComplexProduct::kFma && IsCx<T>::value)
          fn = &segment_acc_range<typename FusedOf<T>::type, Combine::kMul>;
        else
          fn = &segment_acc_range<T, Combine::kMul>;
        break;
      case Combine::kMean:
        if constexpr (!std::is_same_v<T, Bool>) fn = &segment_acc_range<T, Combine::kMean>;
        break;
      case Combine::kMax:
        if constexpr (!cx) fn = &segment_acc_range<T, Combine::kMax>;
        break;
      case Combine::kMin:
        if constexpr (!cx) fn = &segment_acc_range<T, Combine::kMin>;
        break;
      case Combine::kCopy:
        break;
    }
    return Status::kOk;
  });
  return fn;
}

}  // namespace cpu_scatter
}  // namespace stridewise
