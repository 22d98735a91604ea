// The complex product of the multiply combines (scatter.h's ComplexProduct), bitwise against a
// reference that walks every line in index order with the formula written out: kPlain (every
// product rounded) and kFma (re = fma(a.re, b.re, -(a.im*b.im)), im = fma(a.re, b.im,
// a.im*b.re), a the value already there). Fresh random values each run (full mantissas, so the
// two formulas disagree on a good share of elements, which the test checks too); the line walk
// (an index per element) and the segment path (an index shared by every line) both run.
// Without self a position starts from (1 + 0i) times its first value, as ATen's identity fill.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "../src/common/elem_types.h"
#include "stridewise/scatter.h"
#include "test_util.h"

namespace swt {
namespace {

using stridewise::Combine;
using stridewise::ComplexProduct;
using stridewise::ErrorDetail;
using stridewise::OpCode;
using stridewise::ScatterArgs;
using stridewise::Status;

template <typename F>
struct C2 {
  F re, im;
};

template <typename F>
C2<F> product(C2<F> a, C2<F> b, ComplexProduct p) {
  if (p == ComplexProduct::kFma) {
    const F bd = a.im * b.im;
    const F bc = a.im * b.re;
    return {std::fma(a.re, b.re, -bd), std::fma(a.re, b.im, bc)};
  }
  const F ac = a.re * b.re;
  const F bd = a.im * b.im;
  const F ad = a.re * b.im;
  const F bc = a.im * b.re;
  return {ac - bd, ad + bc};
}

StridedView view(void* data, DType dt, std::vector<int64_t> sizes, std::vector<int64_t> strides) {
  StridedView v;
  v.data = data;
  v.dtype = dt;
  v.rank = static_cast<int>(sizes.size());
  for (int d = 0; d < v.rank; ++d) {
    v.sizes[d] = sizes[static_cast<size_t>(d)];
    v.strides[d] = strides[static_cast<size_t>(d)];
  }
  return v;
}

// out (R, C) in place, dim 0; index (K, C) per element, or a K-vector expanded over C.
template <typename F>
void check(DType dt, ComplexProduct p, bool include_self, bool shared, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<F> val(F(0), F(2));
  const int64_t R = 7, C = 33, K = 60;
  std::vector<C2<F>> out(static_cast<size_t>(R * C)), src(static_cast<size_t>(K * C));
  for (auto& x : out) x = {val(rng), val(rng)};
  for (auto& x : src) x = {val(rng), val(rng)};
  std::vector<int64_t> index(static_cast<size_t>(shared ? K : K * C));
  for (auto& i : index) i = rand_int(rng, 0, R - 1);

  std::vector<C2<F>> want = out;
  std::vector<int64_t> count(want.size(), 0);
  for (int64_t k = 0; k < K; ++k) {
    for (int64_t c = 0; c < C; ++c) {
      const int64_t v = index[static_cast<size_t>(shared ? k : k * C + c)];
      C2<F>& a = want[static_cast<size_t>(v * C + c)];
      if (!include_self && count[static_cast<size_t>(v * C + c)]++ == 0) a = {F(1), F(0)};
      a = product(a, src[static_cast<size_t>(k * C + c)], p);
    }
  }
  ScatterArgs args;
  args.out = view(out.data(), dt, {R, C}, {C, 1});
  args.self = args.out;
  args.index = view(index.data(), DType::kInt64, {K, C}, {shared ? 1 : C, shared ? 0 : 1});
  args.src = view(src.data(), dt, {K, C}, {C, 1});
  args.dim = 0;
  args.desc = stridewise::scatter_desc(OpCode::kScatterReduce, Combine::kMul, include_self);
  args.cx_product = p;
  ErrorDetail err;
  ASSERT_EQ(stridewise::scatter_cpu(args, stridewise::default_cpu_executor(), &err), Status::kOk)
      << err.message;
  int64_t bad = 0, first = -1;
  for (size_t i = 0; i < out.size(); ++i) {
    if (std::memcmp(&out[i], &want[i], sizeof(C2<F>)) != 0) {
      ++bad;
      if (first < 0) first = static_cast<int64_t>(i);
    }
  }
  EXPECT_EQ(bad, 0) << "seed " << seed << ": first at " << first << " got (" << out[first].re
                    << ", " << out[first].im << ") want (" << want[first].re << ", "
                    << want[first].im << ")";
}

class ScatterComplexProduct : public ::testing::TestWithParam<std::tuple<bool, bool, bool>> {};

TEST_P(ScatterComplexProduct, MatchesTheFormulaBitwise) {
  const auto [fma, include_self, shared] = GetParam();
  const uint64_t seed = test_seed();
  const ComplexProduct p = fma ? ComplexProduct::kFma : ComplexProduct::kPlain;
  check<double>(DType::kComplex128, p, include_self, shared, seed);
  check<float>(DType::kComplex64, p, include_self, shared, seed + 1);
}

INSTANTIATE_TEST_SUITE_P(AllPaths, ScatterComplexProduct,
                         ::testing::Combine(::testing::Bool(), ::testing::Bool(),
                                            ::testing::Bool()));

// Without self a position starts from (1 + 0i) times its first value, not from the value:
// (1 + 0i) * (inf + 1i) = (inf, NaN) (0 * inf), and (1 + 0i) * (-0 - 1i) = (+0, -1). Column 0
// of a (3, 2) out through a shared index (the segment path), and through an index per element
// (the line walk: column 1's index differs).
TEST(ScatterComplexProduct, FirstValueMeetsTheIdentity) {
  const double inf = std::numeric_limits<double>::infinity();
  for (const bool shared : {true, false}) {
    for (const ComplexProduct p : {ComplexProduct::kPlain, ComplexProduct::kFma}) {
      std::vector<C2<double>> out = {{5, 6}, {5, 6}, {7, 8}, {7, 8}, {9, 10}, {9, 10}};
      std::vector<C2<double>> src = {{inf, 1}, {inf, 1}, {-0.0, -1}, {-0.0, -1}};
      std::vector<int64_t> index =
          shared ? std::vector<int64_t>{0, 2} : std::vector<int64_t>{0, 2, 2, 0};
      ScatterArgs args;
      args.out = view(out.data(), DType::kComplex128, {3, 2}, {2, 1});
      args.self = args.out;
      args.index = view(index.data(), DType::kInt64, {2, 2}, {shared ? 1 : 2, shared ? 0 : 1});
      args.src = view(src.data(), DType::kComplex128, {2, 2}, {2, 1});
      args.desc = stridewise::scatter_desc(OpCode::kScatterReduce, Combine::kMul, false);
      args.cx_product = p;
      ErrorDetail err;
      ASSERT_EQ(stridewise::scatter_cpu(args, stridewise::serial_cpu_executor(), &err),
                Status::kOk);
      EXPECT_TRUE(std::isinf(out[0].re) && std::isnan(out[0].im)) << shared;
      EXPECT_TRUE(out[2].re == 7 && out[2].im == 8) << shared;
      EXPECT_TRUE(out[4].re == 0 && !std::signbit(out[4].re) && out[4].im == -1) << shared;
    }
  }
}

// The two formulas differ on these data (else the test above could not tell them apart).
TEST(ScatterComplexProduct, FormulasDiffer) {
  std::mt19937_64 rng(test_seed());
  std::normal_distribution<double> val(0.0, 2.0);
  int differ = 0;
  for (int i = 0; i < 1000; ++i) {
    const C2<double> a{val(rng), val(rng)}, b{val(rng), val(rng)};
    const C2<double> x = product(a, b, ComplexProduct::kPlain);
    const C2<double> y = product(a, b, ComplexProduct::kFma);
    differ += x.re != y.re || x.im != y.im;
  }
  EXPECT_GT(differ, 100);
}

}  // namespace
}  // namespace swt
