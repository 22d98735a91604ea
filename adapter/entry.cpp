// The steps of the entry template (entry.h) that are not templates over the op: the plan step
// for the call type of every family, and the deterministic-mode count.
#include "entry.h"

#include <ATen/Context.h>

#include "gather.h"
#include "index_adv.h"
#include "scatter.h"

namespace stridewise::adapter {
namespace {

Status core_plan(GatherCall* c, ErrorDetail* err) {
  return plan_gather(c->args, &c->plan, err);
}
Status core_plan(ScatterCall* c, ErrorDetail* err) {
  return plan_scatter(c->args, &c->plan, err);
}
Status core_plan(IndexKCall* c, ErrorDetail* err) {
  return plan_index_k(c->args, &c->plan, err);
}

int plan_vec(const GatherCall& c) {
  return c.plan.vec;
}
int plan_vec(const ScatterCall& /*c*/) {
  return 1;  // the scatter plan picks no vector width (its kernels choose theirs)
}
int plan_vec(const IndexKCall& c) {
  return c.plan.vec;
}

}  // namespace

template <class Call>
Prep plan_call(OpCode op, const at::Tensor& self, Call* call) {
  OpStats& stats = op_stats(op);
  ErrorDetail err;
  const Status st = core_plan(call, &err);
  if (st == Status::kUnsupported) {
    stats.fall_back(Fallback::kCoreDeclined);
    return Prep::kFallback;
  }
  if (st != Status::kOk) throw_status(op_name(op), self.is_cuda() ? "cuda" : "cpu", st, err);
  if (plan_vec(*call) > 1) stats.bump(kVectorized);
  return Prep::kRun;
}

template Prep plan_call(OpCode, const at::Tensor&, GatherCall*);
template Prep plan_call(OpCode, const at::Tensor&, ScatterCall*);
template Prep plan_call(OpCode, const at::Tensor&, IndexKCall*);

bool deterministic_call(OpStats& stats) {
  const bool on = at::globalContext().deterministicAlgorithms();
  if (on) stats.bump(kDeterministic);
  return on;
}

}  // namespace stridewise::adapter
