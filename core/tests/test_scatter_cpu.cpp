// scatter_cpu against an obvious reference over random layouts of every operand, every
// combine, include_self both ways, in place and out of place, src and value forms.
//
// Values are small integers (exact in float16 and in every sum here), so results compare
// exactly for every dtype; out-of-place out storages are poisoned (0xAB) and compared whole,
// so a write outside the view or a missed element shows. Bad index values must leave every
// byte of out (and of an in-place self) as it was.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <vector>

#include "../src/common/elem_types.h"
#include "stridewise/scatter.h"
#include "test_util.h"

namespace swt {
namespace {

using stridewise::Combine;
using stridewise::ErrorDetail;
using stridewise::OpCode;
using stridewise::ScatterArgs;
using stridewise::Status;

double get(const StridedView& v, int64_t off) {
  const unsigned char* p = static_cast<const unsigned char*>(v.data) + off * elem_size(v.dtype);
  switch (v.dtype) {
    case DType::kInt32: {
      int32_t x;
      std::memcpy(&x, p, 4);
      return x;
    }
    case DType::kFloat32: {
      float x;
      std::memcpy(&x, p, 4);
      return x;
    }
    default: {  // float16
      uint16_t x;
      std::memcpy(&x, p, 2);
      return stridewise::elem::f16_to_float(x);
    }
  }
}

void put(const StridedView& v, int64_t off, double x) {
  unsigned char* p = static_cast<unsigned char*>(v.data) + off * elem_size(v.dtype);
  if (v.dtype == DType::kInt32) {
    const int32_t y = static_cast<int32_t>(x);
    std::memcpy(p, &y, 4);
  } else if (v.dtype == DType::kFloat32) {
    const float y = static_cast<float>(x);
    std::memcpy(p, &y, 4);
  } else {
    const uint16_t y = stridewise::elem::float_to_f16(static_cast<float>(x));
    std::memcpy(p, &y, 2);
  }
}

// Offset of logical position `linear` of `shape` in view v (v may be larger than shape).
int64_t offset_in(const StridedView& v, const int64_t* shape, int rank, int64_t linear) {
  int64_t off = 0;
  for (int d = rank - 1; d >= 0; --d) {
    off += (linear % shape[d]) * v.strides[d];
    linear /= shape[d];
  }
  return off;
}

struct Case {
  TestTensor self, out, index, src;
  int64_t dim = 0;
  bool in_place = false, value = false;
  Combine combine = Combine::kCopy;
  bool include_self = true;
  double value_x = 0;
  ScatterArgs args() const {
    ScatterArgs a;
    a.out = out.view;
    a.self = in_place ? out.view : self.view;
    a.index = index.view;
    a.dim = dim;
    a.has_value = value;
    if (value) {
      StridedView tmp = out.view;
      tmp.data = const_cast<unsigned char*>(a.value);
      put(tmp, 0, value_x);
    } else {
      a.src = src.view;
    }
    a.desc = stridewise::scatter_desc(OpCode::kScatterReduce, combine, include_self);
    return a;
  }
};

// Expected out values by logical position.
std::vector<double> reference(const Case& c, const std::vector<double>& start) {
  const StridedView& iv = c.index.view;
  std::vector<double> acc = start;
  std::vector<int64_t> count(start.size(), 0);
  const int r = iv.rank;
  const int64_t n = iv.numel();
  std::vector<int64_t> coord(static_cast<size_t>(r));
  for (int64_t i = 0; i < n; ++i) {
    int64_t rest = i;
    for (int d = r - 1; d >= 0; --d) {
      coord[static_cast<size_t>(d)] = rest % iv.sizes[d];
      rest /= iv.sizes[d];
    }
    const int64_t v = read_index(iv, offset_in(iv, iv.sizes, r, i));
    coord[static_cast<size_t>(c.dim)] = v;
    int64_t lin = 0;
    for (int d = 0; d < r; ++d) lin = lin * c.out.view.sizes[d] + coord[static_cast<size_t>(d)];
    const double s = c.value ? c.value_x : get(c.src.view, offset_in(c.src.view, iv.sizes, r, i));
    double& a = acc[static_cast<size_t>(lin)];
    const bool first = count[static_cast<size_t>(lin)]++ == 0 && !c.include_self;
    switch (c.combine) {
      case Combine::kCopy:
        a = s;
        break;
      case Combine::kAdd:
      case Combine::kMean:
        a = first ? s : a + s;
        break;
      case Combine::kMul:
        a = first ? s : a * s;
        break;
      case Combine::kMax:
        a = first ? s : std::max(a, s);
        break;
      case Combine::kMin:
        a = first ? s : std::min(a, s);
        break;
    }
  }
  if (c.combine == Combine::kMean) {
    for (size_t p = 0; p < acc.size(); ++p) {
      const int64_t k = count[p] + (c.include_self ? 1 : 0);
      if (count[p] == 0) continue;
      acc[p] = c.out.view.dtype == DType::kInt32 ? std::floor(acc[p] / static_cast<double>(k))
                                                 : acc[p] / static_cast<double>(k);
    }
  }
  return acc;
}

Case random_case(Rng& rng, DType dt, DType it, Combine comb, bool shared_index = false) {
  Case c;
  const int rank = static_cast<int>(rand_int(rng, 1, 4));
  c.dim = rand_int(rng, 0, rank - 1);
  std::vector<int64_t> ssz(static_cast<size_t>(rank)), isz(ssz.size()), srcsz(ssz.size());
  for (size_t d = 0; d < ssz.size(); ++d) {
    ssz[d] = rand_int(rng, 1, 5);
    isz[d] = static_cast<int64_t>(d) == c.dim ? rand_int(rng, 1, 6) : rand_int(rng, 1, ssz[d]);
    srcsz[d] = isz[d] + (coin(rng, 0.3) ? 1 : 0);
  }
  LayoutOpts in_opts, out_opts;
  out_opts.allow_expand = false;
  out_opts.allow_overlap = false;
  c.in_place = coin(rng, 0.5);
  c.value = coin(rng, 0.25);
  c.combine = comb;
  c.include_self = coin(rng, 0.6);
  c.value_x = static_cast<double>(rand_int(rng, -3, 3));
  c.out = make_random_tensor(rng, dt, ssz, out_opts);
  poison(c.out);
  c.self = make_random_tensor(rng, dt, ssz, in_opts);
  if (shared_index) {
    // One index sequence for every line (PyG's / MoE's expanded index): stride 0 on every
    // dim but dim, so the CPU takes its segment path; the other operands keep random layouts.
    std::vector<int64_t> ist(isz.size(), 0);
    ist[static_cast<size_t>(c.dim)] = rand_int(rng, 1, 2);
    c.index = make_tensor(it, isz, ist, rand_int(rng, 0, 2));
  } else {
    c.index = make_random_tensor(rng, it, isz, in_opts);
  }
  c.src = make_random_tensor(rng, dt, srcsz, in_opts);
  // Small integers: products and sums stay exact in float16.
  for (TestTensor* t : {&c.self, &c.src, &c.out}) {
    if (t == &c.out && !c.in_place) continue;
    const int64_t cap = static_cast<int64_t>(t->storage_bytes()) / t->esize;
    StridedView whole = t->view;
    whole.data = t->base();
    for (int64_t e = 0; e < cap; ++e) put(whole, e, static_cast<double>(rand_int(rng, -3, 3)));
  }
  fill_index(rng, c.index, 0, ssz[static_cast<size_t>(c.dim)] - 1);
  return c;
}

class ScatterCpuRandom : public ::testing::TestWithParam<std::tuple<DType, DType, Combine>> {};

TEST_P(ScatterCpuRandom, MatchesReferenceOnEveryExecutor) {
  const auto [dt, it, comb] = GetParam();
  const uint64_t seed = test_seed();
  Rng rng(seed ^ (static_cast<uint64_t>(dt) << 8) ^ (static_cast<uint64_t>(comb) << 16));
  for (int trial = 0; trial < 120; ++trial) {
    // Every other trial: an index shared by every line (the segment path), whose lines run
    // through out and src with random strides, in the src and the value form.
    Case c = random_case(rng, dt, it, comb, /*shared_index=*/trial % 2 == 1);
    const ScatterArgs a = c.args();
    const StridedView& ov = c.out.view;
    const int64_t n = ov.numel();
    std::vector<double> start(static_cast<size_t>(n));
    const StridedView& sv = c.in_place ? ov : c.self.view;
    for (int64_t p = 0; p < n; ++p)
      start[static_cast<size_t>(p)] = get(sv, offset_in(sv, sv.sizes, sv.rank, p));
    const std::vector<double> want = reference(c, start);
    const std::vector<unsigned char> before(c.out.base(), c.out.base() + c.out.storage_bytes());
    const ChunkyExec chunky(seed + static_cast<uint64_t>(trial), 3, 3);
    for (const auto& ex : {stridewise::serial_cpu_executor(), chunky.exec()}) {
      std::memcpy(c.out.base(), before.data(), before.size());
      ErrorDetail err;
      ASSERT_EQ(stridewise::scatter_cpu(a, ex, &err), Status::kOk) << err.message;
      for (int64_t p = 0; p < n; ++p) {
        const double got = get(ov, offset_in(ov, ov.sizes, ov.rank, p));
        // The reference's mean is a double; the kernel rounds it once to the dtype.
        double w = want[static_cast<size_t>(p)];
        unsigned char cell[8];
        StridedView one = ov;
        one.data = cell;
        put(one, 0, w);
        w = get(one, 0);
        ASSERT_EQ(got, w) << "seed " << seed << " trial " << trial << " position " << p << " dim "
                          << c.dim << " in_place " << c.in_place << " value " << c.value
                          << " include_self " << c.include_self << " out "
                          << shape_str(std::vector<int64_t>(ov.sizes, ov.sizes + ov.rank));
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(
    All, ScatterCpuRandom,
    ::testing::Combine(::testing::Values(DType::kInt32, DType::kFloat32, DType::kFloat16),
                       ::testing::Values(DType::kInt64, DType::kInt32),
                       ::testing::Values(Combine::kCopy, Combine::kAdd, Combine::kMul,
                                         Combine::kMean, Combine::kMax, Combine::kMin)));

// A bad value anywhere: kIndexOutOfRange with ATen's message, and not one byte of out written,
// even for in-place calls whose other index values are valid.
TEST(ScatterCpuErrors, BadIndexWritesNothing) {
  const uint64_t seed = test_seed();
  Rng rng(seed ^ 0xBAD);
  for (int trial = 0; trial < 200; ++trial) {
    Case c = random_case(rng, DType::kFloat32, coin(rng, 0.5) ? DType::kInt64 : DType::kInt32,
                         static_cast<Combine>(rand_int(rng, 0, 5)));
    const StridedView& iv = c.index.view;
    const int64_t pos = rand_int(rng, 0, iv.numel() - 1);
    const int64_t size = c.out.view.sizes[c.dim];
    const int64_t bad = coin(rng, 0.5) ? -1 - rand_int(rng, 0, 3) : size + rand_int(rng, 0, 3);
    write_index(iv, offset_in(iv, iv.sizes, iv.rank, pos), bad);
    const std::vector<unsigned char> before(c.out.base(), c.out.base() + c.out.storage_bytes());
    ErrorDetail err;
    ASSERT_EQ(stridewise::scatter_cpu(c.args(), stridewise::default_cpu_executor(), &err),
              Status::kIndexOutOfRange)
        << "seed " << seed << " trial " << trial;
    EXPECT_EQ(err.dim, c.dim);
    EXPECT_EQ(err.hi, size);
    EXPECT_TRUE(err.value < 0 || err.value >= size);
    EXPECT_EQ(err.message, "index " + std::to_string(err.value) +
                               " is out of bounds for dimension " + std::to_string(c.dim) +
                               " with size " + std::to_string(size));
    ASSERT_EQ(diff_bytes(c.out.base(), before.data(), before.size()), "")
        << "seed " << seed << " trial " << trial << ": out written before validation";
  }
}

TEST(ScatterCpuErrors, ContractViolationsAreRejected) {
  Rng rng(test_seed());
  Case c = random_case(rng, DType::kFloat32, DType::kInt64, Combine::kAdd);
  ScatterArgs a = c.args();
  ErrorDetail err;
  a.index.dtype = DType::kFloat32;
  EXPECT_EQ(stridewise::scatter_cpu(a, stridewise::serial_cpu_executor(), &err),
            Status::kInvalidArgument);
  a = c.args();
  a.self.dtype = DType::kUInt16;
  a.out.dtype = DType::kUInt16;
  a.has_value = false;
  a.src = c.src.view;
  a.src.dtype = DType::kUInt16;
  EXPECT_EQ(stridewise::scatter_cpu(a, stridewise::serial_cpu_executor(), &err),
            Status::kUnsupported);
  a = c.args();
  a.dim = a.out.rank;
  EXPECT_EQ(stridewise::scatter_cpu(a, stridewise::serial_cpu_executor(), &err),
            Status::kInvalidArgument);
  EXPECT_FALSE(stridewise::scatter_supports(DType::kBool, Combine::kMean));
  EXPECT_FALSE(stridewise::scatter_supports(DType::kComplex64, Combine::kMax));
  EXPECT_TRUE(stridewise::scatter_supports(DType::kComplex64, Combine::kMul));
}

}  // namespace
}  // namespace swt
