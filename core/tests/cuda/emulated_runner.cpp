#include "emulated_runner.h"

#include <cstring>

#include "cuda_test_util.h"  // reference_out (host only)

namespace swct {

using stridewise::DType;
using stridewise::ErrorDetail;
using stridewise::GatherArgs;
using stridewise::GatherPlan;
using stridewise::Status;

void expect_aligned(const void* out, const void* self, size_t unit) {
  EXPECT_EQ(cg::addr(out) % unit, 0u) << "out base misaligned for " << unit << "-byte units";
  EXPECT_EQ(cg::addr(self) % unit, 0u) << "self base misaligned for " << unit << "-byte units";
}

Status emulate(const GatherArgs& args, HostRunner& r, ErrorDetail* e, const EmulateOpts& opts) {
  r.grid_cap = opts.grid_cap;
  GatherPlan plan;
  Status st = stridewise::plan_gather(args, &plan, e);
  if (st != Status::kOk || plan.loop.numel == 0) return st;
  const cg::ErrorSite site{nullptr, plan.dim, plan.self_dim_size, static_cast<int32_t>(args.op),
                           plan.wraps};
  std::string why;
  st = cg::run_gather(args, plan, site, r, &why, opts.choice);
  if (st != Status::kOk) return st;
  if (!r.first.any) return Status::kOk;
  e->status = Status::kIndexOutOfRange;
  e->value = r.first.value;
  e->position = r.first.position;
  return Status::kIndexOutOfRange;
}

namespace {

// A 16-byte aligned host copy of a storage, `shift` bytes in.
struct Shifted {
  Shifted(const swt::TestTensor& t, size_t shift)
      : buf(t.storage_bytes() + shift + 16), view(t.view) {
    base = buf.data() + shift;
    if (t.storage_bytes()) std::memcpy(base, t.base(), t.storage_bytes());
    view.data = base + (static_cast<const unsigned char*>(t.view.data) - t.base());
  }
  std::vector<unsigned char> buf;
  unsigned char* base;
  stridewise::StridedView view;
};

}  // namespace

::testing::AssertionResult emulated_matches(swt::GatherCase& c, size_t out_shift, size_t self_shift,
                                            uint64_t seed, int64_t want_bad,
                                            const EmulateOpts& opts, Launch* launch) {
  const std::string where = "\n  case: " + c.describe() + "\n  shifts " +
                            std::to_string(out_shift) + "/" + std::to_string(self_shift) +
                            "; grid cap " + std::to_string(opts.grid_cap) + "; choice " +
                            std::to_string(static_cast<int>(opts.choice)) +
                            "; STRIDEWISE_TEST_SEED=" + std::to_string(seed);
  int64_t bad = 0;
  const std::vector<unsigned char> want = reference_out(c, &bad);
  if (bad != want_bad)
    return ::testing::AssertionFailure() << "reference saw " << bad << " bad values" << where;
  Shifted so(c.out, out_shift), ss(c.self, self_shift);
  GatherArgs a = c.args();
  const bool shifted = out_shift || self_shift;
  if (shifted) {
    a.out = so.view;
    a.self = ss.view;
  }
  HostRunner r;
  ErrorDetail e;
  const Status st = emulate(a, r, &e, opts);
  if (launch) *launch = r.launch;
  if (opts.choice == cg::KernelChoice::kAuto) {  // plan.vec never wider than the unit used
    GatherPlan plan;
    ErrorDetail pe;
    if (stridewise::plan_gather(a, &plan, &pe) == Status::kOk && plan.vec > 1 &&
        (r.launch.kernel != "rows" || r.launch.unit < plan.vec * c.out.esize))
      return ::testing::AssertionFailure() << "plan.vec " << plan.vec << " but " << r.launch.kernel
                                           << " with " << r.launch.unit << "-byte units" << where;
  }
  const Status want_st = bad ? Status::kIndexOutOfRange : Status::kOk;
  if (st != want_st)
    return ::testing::AssertionFailure() << "status " << stridewise::status_name(st) << where;
  const int64_t hi = c.self.view.rank > 0 ? c.self.view.sizes[c.dim] : 1;
  if (bad && e.value >= 0 && e.value < hi)
    return ::testing::AssertionFailure() << "reported value " << e.value << " is valid" << where;
  if (bad) {  // the reported position (plan order) must hold the reported value
    GatherPlan plan;
    ErrorDetail pe;
    stridewise::plan_gather(a, &plan, &pe);
    if (e.position < 0 || e.position >= plan.loop.numel)
      return ::testing::AssertionFailure() << "position " << e.position << " out of range" << where;
    const int64_t off = stridewise::plan_offset(plan.loop, stridewise::kGatherIndex, e.position);
    if (swt::read_index(a.index, off) != e.value)
      return ::testing::AssertionFailure()
             << "position " << e.position << " holds " << swt::read_index(a.index, off) << ", not "
             << e.value << where;
  }
  const unsigned char* got = shifted ? so.base : c.out.base();
  const std::string diff = swt::diff_bytes(got, want.data(), want.size());
  if (!diff.empty())
    return ::testing::AssertionFailure() << diff << " [" << r.launch.kernel << " unit "
                                         << r.launch.unit << " D " << r.launch.dims << "]" << where;
  return ::testing::AssertionSuccess();
}

Launch dispatch_of(DType dt, std::initializer_list<int64_t> ssz, std::initializer_list<int64_t> sst,
                   std::initializer_list<int64_t> isz, std::initializer_list<int64_t> ist,
                   std::initializer_list<int64_t> ost, int64_t dim, uintptr_t misalign,
                   DType index_dtype) {
  GatherArgs a;
  a.dim = dim;
  a.self =
      stridewise::make_view(reinterpret_cast<void*>(uintptr_t(1) << 40 | misalign), dt, ssz, sst);
  a.index =
      stridewise::make_view(reinterpret_cast<void*>(uintptr_t(2) << 40), index_dtype, isz, ist);
  a.out = stridewise::make_view(reinterpret_cast<void*>(uintptr_t(3) << 40), dt, isz, ost);
  return dispatch_of(a);
}

Launch dispatch_of(const GatherArgs& args) {
  HostRunner r;
  r.execute = false;
  ErrorDetail e;
  EXPECT_EQ(emulate(args, r, &e), Status::kOk) << e.message;
  return r.launch;
}

}  // namespace swct
