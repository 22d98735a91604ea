#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <random>

#include "engine.h"
#include "helpers.h"
#include "metrics.h"

using namespace swc;

namespace {
uint32_t fbits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
}
uint64_t dbits(double f) {
  uint64_t u;
  std::memcpy(&u, &f, 8);
  return u;
}
Partial run(const std::vector<float>& a, const std::vector<float>& b, Tolerance tol) {
  Partial p;
  accumulate(DType::F32, a.data(), DType::F32, b.data(), a.size(), 0, tol, &p, nullptr, nullptr);
  return p;
}
}  // namespace

TEST(Ulp, FloatOrdinals) {
  EXPECT_EQ(ulp_distance(DType::F32, fbits(1.0f), fbits(std::nextafter(1.0f, 2.0f))), 1u);
  EXPECT_EQ(ulp_distance(DType::F32, fbits(0.0f), fbits(-0.0f)), 0u);
  const float dn = std::numeric_limits<float>::denorm_min();
  EXPECT_EQ(ulp_distance(DType::F32, fbits(-dn), fbits(dn)), 2u);
  EXPECT_EQ(ulp_distance(DType::F32, fbits(-1.0f), fbits(1.0f)), 2u * 0x3f800000u);
  EXPECT_EQ(ulp_distance(DType::F16, 0x3c00, 0x3c01), 1u);
  EXPECT_EQ(ulp_distance(DType::F16, 0x8001, 0x0001), 2u);
  EXPECT_EQ(ulp_distance(DType::BF16, 0x3f80, 0x3f82), 2u);
  const double big = std::numeric_limits<double>::max();
  EXPECT_EQ(ulp_distance(DType::F64, dbits(-big), dbits(big)), 2u * 0x7fefffffffffffffull);
  EXPECT_EQ(ulp_distance(DType::I64, static_cast<uint64_t>(std::numeric_limits<int64_t>::min()),
                         static_cast<uint64_t>(std::numeric_limits<int64_t>::max())),
            std::numeric_limits<uint64_t>::max());
  EXPECT_EQ(ulp_distance(DType::I8, 0x80, 0x7f), 255u);
  EXPECT_EQ(ulp_distance(DType::U8, 0, 255), 255u);
}

TEST(Convert, HalfAndBfloat) {
  EXPECT_EQ(half_to_double(0x3c00), 1.0);
  EXPECT_EQ(half_to_double(0xc000), -2.0);
  EXPECT_EQ(half_to_double(0x0001), std::ldexp(1.0, -24));
  EXPECT_EQ(half_to_double(0x7bff), 65504.0);
  EXPECT_TRUE(std::isinf(half_to_double(0x7c00)));
  EXPECT_TRUE(std::isnan(half_to_double(0x7e00)));
  EXPECT_EQ(bf16_to_double(0x3f80), 1.0);
  EXPECT_EQ(bf16_to_double(0xc040), -3.0);
}

// Every metric of a small vector, against formulas written out here.
TEST(Metrics, MatchTheDefinitions) {
  const std::vector<float> a = {1.0f, -2.0f, 0.5f, 4.0f, 0.0f};
  const std::vector<float> b = {1.0005f, -2.0f, 0.25f, 4.0f, 1e-7f};
  const Tolerance tol{1e-3, 1e-3};
  const Metrics m = finalize(run(a, b, tol), true);
  double dot = 0, aa = 0, bb = 0, sq = 0, srel = 0, mabs = 0, mrel = 0;
  uint64_t g1 = 0, g5 = 0, wrong = 0, mulp = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    const double x = a[i], y = b[i], d = std::fabs(y - x);
    const double rel = d / std::max(std::fabs(x), double(std::numeric_limits<float>::min()));
    dot += x * y, aa += x * x, bb += y * y, sq += d * d, srel += rel;
    mabs = std::max(mabs, d), mrel = std::max(mrel, rel);
    g1 += rel > 1e-3, g5 += rel > 5e-3, wrong += d > 1e-3 && rel > 1e-3;
    mulp = std::max<uint64_t>(mulp, ulp_distance(DType::F32, fbits(a[i]), fbits(b[i])));
  }
  EXPECT_DOUBLE_EQ(m.cosine, dot / std::sqrt(aa) / std::sqrt(bb));
  EXPECT_DOUBLE_EQ(m.max_abs, mabs);
  EXPECT_DOUBLE_EQ(m.max_rel, mrel);
  EXPECT_DOUBLE_EQ(m.mean_rel, srel / 5);
  EXPECT_DOUBLE_EQ(m.rmse, std::sqrt(sq / 5));
  EXPECT_EQ(*m.max_ulp, mulp);
  EXPECT_EQ(m.frac_rel_gt_1e3, g1 / 5.0);
  EXPECT_EQ(m.frac_rel_gt_5e3, g5 / 5.0);
  EXPECT_EQ(m.wrong, wrong);
  EXPECT_EQ(m.wrong, 1u);  // only 0.5 -> 0.25; 1e-7 vs 0 is near zero, 1.0005 vs 1 is under atol
  EXPECT_EQ(m.first_wrong, 2u);
  EXPECT_EQ(m.bit_mismatch, 3u);
  EXPECT_EQ(m.first_bit_mismatch, 0u);
}

TEST(Metrics, NearZeroDataIsNotWrong) {
  std::mt19937 rng(7);
  std::normal_distribution<float> nd(0.0f, 1e-6f);
  std::vector<float> a(10000), b(10000);
  for (size_t i = 0; i < a.size(); ++i) {
    a[i] = nd(rng);
    b[i] = a[i] + nd(rng) * 0.5f;  // relative error ~50%, absolute ~1e-6
  }
  const Metrics m = finalize(run(a, b, {1e-3, 1e-3}), true);
  EXPECT_GT(m.max_rel, 1.0);  // the relative metric explodes near zero ...
  EXPECT_GT(m.frac_rel_gt_1e3, 0.5);
  EXPECT_EQ(m.wrong, 0u);  // ... but no element is wrong: absolute error is tiny
}

TEST(Metrics, NonFinite) {
  const float nan = std::numeric_limits<float>::quiet_NaN(),
              inf = std::numeric_limits<float>::infinity();
  const std::vector<float> a = {nan, inf, -inf, 1.0f, nan, 2.0f};
  const std::vector<float> b = {nan, inf, inf, nan, 1.0f, 2.0f};
  const Metrics m = finalize(run(a, b, {1e-3, 1e-3}), true);
  EXPECT_EQ(m.nan_a, 2u);
  EXPECT_EQ(m.nan_b, 2u);
  EXPECT_EQ(m.inf_a, 2u);
  EXPECT_EQ(m.inf_b, 2u);
  EXPECT_EQ(m.nonfinite_mismatch, 3u);  // -inf/inf, 1/nan, nan/1
  EXPECT_EQ(m.wrong, 3u);
  EXPECT_EQ(m.first_wrong, 2u);
  EXPECT_EQ(m.n_finite, 1u);
  EXPECT_EQ(m.cosine, 1.0);
}

TEST(Metrics, MixedDtypesCompareValuesButNeverBits) {
  const std::vector<float> a = {1.0f, 2.0f};
  const std::vector<double> b = {1.0, 2.0};
  Partial p;
  std::vector<double> sa(2), sb(2);
  accumulate(DType::F32, a.data(), DType::F64, b.data(), 2, 0, {0, 0}, &p, sa.data(), sb.data());
  const Metrics m = finalize(p, false);
  EXPECT_EQ(m.wrong, 0u);
  EXPECT_FALSE(m.max_ulp.has_value());
  EXPECT_EQ(m.bit_mismatch, 2u);
}

// Chunked, multithreaded reduction: same counts and (to rounding) the same sums as one pass, and
// bit-identical results whatever the thread count.
TEST(Engine, ChunkedResultIndependentOfThreads) {
  swc_test::TempDir d;
  std::mt19937 rng(3);
  std::normal_distribution<float> nd;
  std::vector<float> a(100003), b(100003);
  for (size_t i = 0; i < a.size(); ++i) {
    a[i] = nd(rng);
    b[i] = a[i] * (1 + 1e-3f * nd(rng));
  }
  swc_test::write_bytes(d.file("a.bin"), swc_test::raw(a));
  swc_test::write_bytes(d.file("b.bin"), swc_test::raw(b));
  auto make = [&](const std::string& p) {
    TensorRef t;
    t.path = p;
    t.dtype = DType::F32;
    t.shape = {a.size()};
    t.nbytes = a.size() * 4;
    return t;
  };
  const Partial whole = run(a, b, {1e-3, 1e-3});
  Partial results[3];
  const unsigned threads[3] = {1, 2, 3};
  for (int k = 0; k < 3; ++k) {
    std::vector<Job> jobs(1);
    jobs[0].a = make(d.file("a.bin"));
    jobs[0].b = make(d.file("b.bin"));
    jobs[0].tol = {1e-3, 1e-3};
    FileCache fc;
    EngineOptions opt;
    opt.threads = threads[k];
    opt.chunk_bytes = 4096;  // 1024 floats per chunk: ~98 chunks
    opt.window_tasks = 7;    // several ordered merges
    run_jobs(jobs, fc, opt);
    ASSERT_TRUE(jobs[0].error.empty()) << jobs[0].error;
    results[k] = jobs[0].total;
  }
  for (const Partial& p : results) {
    EXPECT_EQ(p.n, whole.n);
    EXPECT_EQ(p.wrong, whole.wrong);
    EXPECT_EQ(p.first_wrong, whole.first_wrong);
    EXPECT_EQ(p.max_abs, whole.max_abs);
    EXPECT_EQ(p.max_ulp, whole.max_ulp);
    EXPECT_NEAR(p.sum_rel, whole.sum_rel, 1e-9 * whole.sum_rel);
    EXPECT_EQ(p.sum_rel, results[0].sum_rel);  // deterministic
    EXPECT_EQ(p.dot, results[0].dot);
  }
}

TEST(Engine, ReadErrorsNameTheFile) {
  swc_test::TempDir d;
  swc_test::write_bytes(d.file("short.bin"), std::string(10, '\0'));
  std::vector<Job> jobs(1);
  for (TensorRef* t : {&jobs[0].a, &jobs[0].b}) {
    t->path = d.file("short.bin");
    t->dtype = DType::F32;
    t->shape = {100};
  }
  FileCache fc;
  run_jobs(jobs, fc, EngineOptions{});
  EXPECT_NE(jobs[0].error.find(d.file("short.bin")), std::string::npos) << jobs[0].error;
  EXPECT_NE(jobs[0].error.find("unexpected end of file"), std::string::npos) << jobs[0].error;
}
