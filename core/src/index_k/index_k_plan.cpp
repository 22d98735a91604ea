// Advanced indexing: argument checks and loop planning; see index_k.h for the contract.
#include <algorithm>
#include <cstdint>
#include <string>

#include "stridewise/index_k.h"
#include "stridewise/scatter.h"

namespace stridewise {
namespace {

using detail::sizes_str;

struct Checker {
  OpCode op;
  ErrorDetail* err;
  Status bad(Status s, const std::string& m) const { return detail::fail_op(err, op, s, m); }
  Status operand(const char* name, const StridedView& v) const {
    return detail::check_operand(op, op_name(op), name, v, err);
  }
};

bool same_shape(const StridedView& a, const StridedView& b) {
  if (a.rank != b.rank) return false;
  for (int d = 0; d < a.rank; ++d)
    if (a.sizes[d] != b.sizes[d]) return false;
  return true;
}

bool writes(const IndexKArgs& a) {
  return a.desc.role == IndexRole::kWrite;
}

// One value copied to every position: `value`, or one src element (every stride 0: a 0-dim
// device tensor's value, read where it lies instead of synchronizing to fetch it).
bool order_free(const IndexKArgs& a) {
  if (!writes(a) || a.desc.combine != Combine::kCopy) return false;
  if (a.has_value) return true;
  for (int d = 0; d < a.src.rank; ++d)
    if (a.src.sizes[d] > 1 && a.src.strides[d] != 0) return false;
  return true;
}

Status validate(const IndexKArgs& a, const Checker& c) {
  if (a.k < 1 || a.k > kMaxIndexTerms)
    return c.bad(Status::kUnsupported,
                 std::string(op_name(a.desc.op)) + "(): " + std::to_string(a.k) +
                     " index tensors (at most " + std::to_string(kMaxIndexTerms) + ")");
  if (a.mode == IndexMode::kUnravel && a.k != 1)
    return c.bad(Status::kInvalidArgument, "a flat index (take/put) has exactly one index");
  const StridedView& dense = writes(a) ? a.src : a.out;
  Status s;
  // A value in place of src: src's view only gives the shape (no data behind it).
  if (!(writes(a) && a.has_value) &&
      (s = c.operand(writes(a) ? "source" : "out", dense)) != Status::kOk)
    return s;
  // A write's self is target restrided. Over an empty target (a dim of size 0) nothing is
  // addressed: an indexed dim of size 0 makes every index value out of range, any other makes
  // the iteration empty. So self may have no data (an empty tensor's); its sizes are tied to
  // src's by same_shape below, its strides are checked here.
  StridedView self = a.self;
  if (writes(a) && a.target.numel() == 0 && self.rank > 0) self.sizes[0] = 0;
  if ((s = c.operand("self", self)) != Status::kOk) return s;
  if ((writes(a) || a.mode == IndexMode::kUnravel) &&
      (s = c.operand("self", a.target)) != Status::kOk)
    return s;
  for (int j = 0; j < a.k; ++j) {
    if ((s = c.operand("indices", a.index[j])) != Status::kOk) return s;
    if (!is_index_dtype(a.index[j].dtype))
      return c.bad(Status::kInvalidArgument,
                   std::string("tensors used as indices must be long or int tensors, got ") +
                       dtype_name(a.index[j].dtype));
    if (!same_shape(a.index[j], dense))
      return c.bad(Status::kInvalidArgument, "index " + sizes_str(a.index[j]) +
                                                 " does not have the iteration shape " +
                                                 sizes_str(dense));
    if (a.mode == IndexMode::kSum && (a.term_size[j] < 0 || a.term_stride[j] < 0))
      return c.bad(Status::kInvalidArgument, "negative size or stride of an indexed dim");
  }
  if (!same_shape(a.self, dense))
    return c.bad(Status::kInvalidArgument, "self's restrided view " + sizes_str(a.self) +
                                               " does not have the iteration shape " +
                                               sizes_str(dense));
  if (a.self.dtype != dense.dtype || (writes(a) && a.target.dtype != a.self.dtype))
    return c.bad(Status::kInvalidArgument,
                 std::string(op_name(a.desc.op)) + "(): expected self and " +
                     (writes(a) ? "source" : "out") + " to have one dtype, got " +
                     dtype_name(a.self.dtype) + " and " + dtype_name(dense.dtype));
  if (!index_k_supports(a.self.dtype, a.desc.combine))
    return c.bad(Status::kUnsupported, std::string(op_name(a.desc.op)) +
                                           "(): " + combine_name(a.desc.combine) +
                                           " is not implemented for " + dtype_name(a.self.dtype));
  if (!writes(a) && a.desc.combine != Combine::kCopy)
    return c.bad(Status::kInvalidArgument, "a read combines by copy");
  if (a.desc.combine == Combine::kMean) {
    if (a.desc.include_self)
      return c.bad(Status::kUnsupported, "a mean over indexed positions excludes self");
    if (a.has_value) return c.bad(Status::kInvalidArgument, "a mean takes src, not a value");
  }
  const StridedView& written = writes(a) ? a.target : a.out;
  if (!order_free(a) && detail::has_internal_overlap(written))
    return c.bad(Status::kInvalidArgument, detail::internal_overlap_message());
  return Status::kOk;
}

bool aligned(const void* p, int64_t bytes) {
  return reinterpret_cast<uintptr_t>(p) % static_cast<uintptr_t>(bytes) == 0;
}

// target's dims fastest first in logical order; size-1 dims dropped, a dim merged into the
// faster one after it when that keeps every offset.
LoopPlan<1> plan_unravel(const StridedView& t) {
  LoopPlan<1> p;
  p.numel = t.numel();
  if (p.numel == 0) return p;
  for (int d = t.rank - 1; d >= 0; --d) {
    if (t.sizes[d] == 1) continue;
    if (p.rank > 0 && t.strides[d] == p.strides[0][p.rank - 1] * p.sizes[p.rank - 1]) {
      p.sizes[p.rank - 1] *= t.sizes[d];
      continue;
    }
    p.sizes[p.rank] = t.sizes[d];
    p.strides[0][p.rank] = t.strides[d];
    p.perm[p.rank] = d;
    ++p.rank;
  }
  p.fits_int32 = p.numel <= INT32_MAX && t.max_offset() <= INT32_MAX;
  return p;
}

// The vector width (elements) for copies whose fastest planned dim is a run under one set of
// index values: unit strides on both dense operands (self alone for one value), no index
// stride, every other stride and the indexed strides multiples of the width, data aligned to
// it.
int pick_vec(const IndexKArgs& a, const IndexKPlan& p) {
  const LoopPlan<kIkOperands>& L = p.loop;
  const int64_t es = elem_size(a.self.dtype);
  if (a.mode != IndexMode::kSum || a.desc.combine != Combine::kCopy || L.rank == 0 ||
      L.numel == 0 || es <= 0)
    return 1;
  for (int j = 0; j < kMaxIndexTerms; ++j)
    if (L.strides[kIkIndex0 + j][0] != 0) return 1;
  // One value (has_value): nothing to read, the kernel stores it replicated across the unit.
  const bool value = writes(a) && a.has_value;
  if (L.strides[kIkWritten][0] != 1 || (!value && L.strides[kIkOther][0] != 1)) return 1;
  const void* dense = writes(a) ? a.src.data : a.out.data;
  int64_t vec = 1;
  while (vec * 2 * es <= 16) vec *= 2;
  for (; vec > 1; vec /= 2) {
    bool ok = L.sizes[0] % vec == 0 && aligned(dense, vec * es) && aligned(a.self.data, vec * es);
    for (int j = 0; j < a.k && ok; ++j) ok = a.term_stride[j] % vec == 0;
    for (int d = 1; d < L.rank && ok; ++d)
      ok = L.strides[kIkWritten][d] % vec == 0 && L.strides[kIkOther][d] % vec == 0;
    if (ok) return static_cast<int>(vec);
  }
  return 1;
}

// A write's loop nest in the order of self's memory: along a dim where self's restrided view
// does not move but an index does, the write moves by that term's stride (the smallest of
// them), so the planner orders by those strides too (an ordering operand in front, dropped
// after). Without it every such dim is a broadcast that says nothing about order, and a
// transposed self filled along its outer dim was walked across memory rows.
LoopPlan<kIkOperands> plan_write_loop(const IndexKArgs& a, const StridedView& dense,
                                      const int64_t* const* strides, const int64_t* extra) {
  int64_t reach[kMaxRank];
  for (int d = 0; d < dense.rank; ++d) {
    reach[d] = strides[kIkWritten][d];
    if (reach[d] != 0) continue;
    for (int j = 0; j < a.k; ++j)
      if (strides[kIkIndex0 + j][d] != 0)
        reach[d] = reach[d] == 0 ? a.term_stride[j] : std::min(reach[d], a.term_stride[j]);
  }
  const int64_t* with[kIkOperands + 1];
  int64_t with_extra[kIkOperands + 1] = {};
  with[0] = reach;
  for (int k = 0; k < kIkOperands; ++k) {
    with[k + 1] = strides[k];
    with_extra[k + 1] = extra[k];
  }
  const LoopPlan<kIkOperands + 1> l =
      plan_loop<kIkOperands + 1>(dense.rank, dense.sizes, with, with_extra);
  LoopPlan<kIkOperands> o;
  o.rank = l.rank;
  o.numel = l.numel;
  bool fits = l.numel <= INT32_MAX;
  for (int k = 0; k < kIkOperands; ++k) {
    int64_t extent = extra[k];
    for (int d = 0; d < l.rank; ++d) {
      o.strides[k][d] = l.strides[k + 1][d];
      extent += (l.sizes[d] - 1) * l.strides[k + 1][d];
    }
    fits = fits && extent >= 0 && extent <= INT32_MAX;
  }
  for (int d = 0; d < l.rank; ++d) {
    o.sizes[d] = l.sizes[d];
    o.perm[d] = l.perm[d];
  }
  o.fits_int32 = fits;
  return o;
}

// The write's iteration in index order (a position counter as operand 0 keeps plan_loop from
// reordering; it merges only what every operand lets it), then split into seq and row.
void plan_ordered(const IndexKArgs& a, IndexKPlan* p) {
  const StridedView& dense = a.src;
  int64_t counter[kMaxRank];
  int64_t acc = 1;
  for (int d = dense.rank - 1; d >= 0; --d) {
    counter[d] = acc;
    acc *= dense.sizes[d];
  }
  static const int64_t kZeros[kMaxRank] = {};
  const int64_t* strides[kIkOperands + 1];
  strides[0] = counter;
  strides[1 + kIkWritten] = a.self.strides;
  strides[1 + kIkOther] = a.has_value ? kZeros : a.src.strides;
  for (int j = 0; j < kMaxIndexTerms; ++j)
    strides[1 + kIkIndex0 + j] = j < a.k ? a.index[j].strides : kZeros;
  const LoopPlan<kIkOperands + 1> l = plan_loop<kIkOperands + 1>(dense.rank, dense.sizes, strides);
  LoopPlan<kIkOperands>& o = p->ordered;
  o = LoopPlan<kIkOperands>{};
  o.rank = l.rank;
  o.numel = l.numel;
  o.fits_int32 = p->loop.fits_int32;  // the same offsets as the loop's
  for (int d = 0; d < l.rank; ++d) {
    o.sizes[d] = l.sizes[d];
    o.perm[d] = l.perm[d];
    for (int k = 0; k < kIkOperands; ++k) o.strides[k][d] = l.strides[k + 1][d];
  }
  p->seq = LoopPlan<kIkOperands>{};
  p->row = LoopPlan<kIkOperands>{};
  p->seq.numel = p->row.numel = o.numel == 0 ? 0 : 1;
  // seq: the dims along which self's base does not move (the broadcast dims: where index values
  // vary, and where an expanded index repeats one); two positions reach one element only
  // through them. row: the rest, each position its own element (self has no internal overlap).
  for (int d = 0; d < o.rank; ++d) {
    LoopPlan<kIkOperands>& q = o.strides[kIkWritten][d] == 0 ? p->seq : p->row;
    const int r = q.rank++;
    q.sizes[r] = o.sizes[d];
    q.perm[r] = o.perm[d];
    for (int k = 0; k < kIkOperands; ++k) q.strides[k][r] = o.strides[k][d];
    q.numel *= o.sizes[d];
  }
  p->seq.fits_int32 = p->row.fits_int32 = o.fits_int32;
}

}  // namespace

bool index_k_as_gather(const IndexKArgs& a, GatherArgs* g) {
  if (writes(a) || a.k != 1 || a.mode != IndexMode::kSum) return false;
  const int r = a.out.rank;
  int d = -1;
  for (int e = 0; e < r && d < 0; ++e)
    if (a.self.strides[e] == 0) d = e;
  if (d < 0 && r >= kMaxRank) return false;
  GatherArgs q;
  q.out = a.out;
  q.index = a.index[0];
  q.self = a.self;
  if (d < 0) {  // self moves along every dim: a size-1 dim on every operand
    d = r;
    for (StridedView* v : {&q.out, &q.index, &q.self}) {
      v->sizes[d] = 1;
      v->strides[d] = 0;
      v->rank = r + 1;
    }
  }
  q.self.sizes[d] = a.term_size[0];
  q.self.strides[d] = a.term_stride[0];
  q.dim = d;
  q.op = a.desc.op;
  q.wraps = a.desc.wraps;
  q.report_dim = a.term_dim[0];
  *g = q;
  return true;
}

bool index_k_supports(DType t, Combine c) {
  return (c == Combine::kCopy || c == Combine::kAdd || c == Combine::kMean) &&
         scatter_supports(t, c);
}

Status plan_index_k(const IndexKArgs& args, IndexKPlan* plan, ErrorDetail* err) {
  const Checker c{args.desc.op, err};
  if (plan == nullptr) return c.bad(Status::kInvalidArgument, "plan_index_k(): null plan");
  const Status s = validate(args, c);
  if (s != Status::kOk) return s;

  IndexKPlan p;
  const bool w = writes(args);
  const StridedView& dense = w ? args.src : args.out;
  static const int64_t kZeros[kMaxRank] = {};
  const int64_t* strides[kIkOperands];
  strides[kIkWritten] = w ? args.self.strides : args.out.strides;
  strides[kIkOther] = w ? (args.has_value ? kZeros : args.src.strides) : args.self.strides;
  for (int j = 0; j < kMaxIndexTerms; ++j)
    strides[kIkIndex0 + j] = j < args.k ? args.index[j].strides : kZeros;

  // self's reach beyond its restrided view, through the index values.
  int64_t extra[kIkOperands] = {};
  const int self_slot = w ? kIkWritten : kIkOther;
  if (args.mode == IndexMode::kUnravel) {
    p.unravel = plan_unravel(args.target);
    p.flat_numel = p.unravel.numel;
    extra[self_slot] = args.target.max_offset();
  } else {
    for (int j = 0; j < args.k; ++j)
      if (args.term_size[j] > 0) extra[self_slot] += (args.term_size[j] - 1) * args.term_stride[j];
  }
  p.loop = w && args.mode == IndexMode::kSum
               ? plan_write_loop(args, dense, strides, extra)
               : plan_loop<kIkOperands>(dense.rank, dense.sizes, strides, extra);
  if (args.mode == IndexMode::kUnravel)
    p.loop.fits_int32 = p.loop.fits_int32 && p.unravel.fits_int32;
  p.vec = pick_vec(args, p);
  p.check = p.loop;
  p.check.rank = 0;
  p.check.numel = p.loop.numel == 0 ? 0 : 1;
  for (int d = 0; d < p.loop.rank; ++d) {
    bool indexed = false;
    for (int j = 0; j < kMaxIndexTerms; ++j) indexed |= p.loop.strides[kIkIndex0 + j][d] != 0;
    if (!indexed) continue;
    const int r = p.check.rank++;
    p.check.sizes[r] = p.loop.sizes[d];
    p.check.perm[r] = p.loop.perm[d];
    for (int k = 0; k < kIkOperands; ++k) p.check.strides[k][r] = p.loop.strides[k][d];
    p.check.numel *= p.loop.sizes[d];
  }
  // Two positions reach one element only through a planned dim along which self's base does
  // not move (the broadcast dims, where the index values vary or repeat).
  p.may_collide = false;
  for (int d = 0; d < p.loop.rank; ++d)
    if (p.loop.strides[self_slot][d] == 0) p.may_collide = true;
  p.order_free = order_free(args);
  if (w) plan_ordered(args, &p);
  // A mean counts an element's writers among the seq positions (index_k.h): an index that
  // moves along a row dim would give one element writers the count never sees.
  for (int d = 0; args.desc.combine == Combine::kMean && d < p.row.rank; ++d)
    for (int j = 0; j < kMaxIndexTerms; ++j)
      if (p.row.strides[kIkIndex0 + j][d] != 0)
        return c.bad(Status::kInvalidArgument,
                     "a mean's index moves only along the dims where self's view has stride 0");
  *plan = p;
  if (err) *err = ErrorDetail{};
  return Status::kOk;
}

}  // namespace stridewise
