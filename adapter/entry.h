// The one entry of every routed aten:: overload, for every family and both backends:
//   devices -> call scope -> pending CUDA error -> prepare -> run -> fallback or raise.
// An op is a small struct (its arguments by reference) with
//   bool devices(std::optional<B>& b);  // build the backend (ATen's device checks, the guard);
//                                       // false: operands on mixed devices, ATen's to move
//   Prep prepare(Call* call);           // ATen's checks in its order, the output, views, plan
//   void fallback();                    // ATen's own kernel for the call (not counted here)
//   [[noreturn]] void raise(B& b, const Call& call, Status st, const ErrorDetail& err);
// and entry<B, Call>(OpCode, op) runs it. B is CpuBackend (backends.h) or CudaBackend
// (cuda_backend.h); Call is GatherCall, ScatterCall, IndexKCall or EmbeddingBackwardCall.
#pragma once

#include <optional>

#include "common.h"

namespace stridewise::adapter {

// What an op's prepare decided.
enum class Prep : uint8_t {
  kRun,       // the core runs the call
  kDone,      // complete: nothing to read or write (an empty index or result)
  kFallback,  // ATen's kernel is to run the call (prepare counted the reason)
};

// Runs the core for `call` (an op whose call is several core calls overloads this).
template <class B, class Call>
Status run_call(B& b, const Call& call, ErrorDetail* err) {
  return b.run(call, err);
}

// Returns how the call ended: kRun (the core ran it), kDone, or kFallback (ATen's kernel ran).
template <class B, class Call, class Op>
Prep entry(OpCode code, Op& op) {
  OpStats& stats = op_stats(code);
  std::optional<B> b;
  const bool ours = op.devices(b);  // a device mismatch raises here, before the call is counted
  CallScope scope(stats, B::kDevice);
  if (!ours) {
    stats.fall_back(Fallback::kDeviceMix);
    op.fallback();
    return Prep::kFallback;
  }
  b->begin();
  Call call;
  Prep p = op.prepare(&call);
  if (p == Prep::kRun) {
    ErrorDetail err;
    const Status st = run_call(*b, call, &err);
    if (st == Status::kOk) return Prep::kRun;
    if (st != Status::kUnsupported) op.raise(*b, call, st, err);
    stats.fall_back(Fallback::kCoreDeclined);  // the core's kernel declined at run time
    p = Prep::kFallback;
  }
  if (p == Prep::kFallback) op.fallback();
  return p;
}

// Whether torch's deterministic mode is on for this call; counted in `stats` when it is.
bool deterministic_call(OpStats& stats);

// The core's plan of a prepared call (its args set): kRun (kVectorized counted where the plan
// moves vectors); kFallback where the core declines it (kUnsupported, counted core_declined);
// any other refusal raised with the wording of self's device. Defined in entry.cpp for the call
// types of every family.
template <class Call>
Prep plan_call(OpCode op, const at::Tensor& self, Call* call);

}  // namespace stridewise::adapter
