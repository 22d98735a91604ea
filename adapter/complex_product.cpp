// Which complex product ATen's CPU scatter kernels compute (scatter.h's ComplexProduct), asked of
// ATen's kernel itself, once per complex dtype.
//
// ATen's `*self_data *= *src_data` is c10::complex's (a*c - b*d, a*d + b*c); how it rounds is
// the compiler's choice per build and CPU capability: torch 2.13's x86 wheels contract the
// complex128 product into fused multiply-adds in the AVX2 and AVX512 kernels
// (re = fma(a, c, -(b*d)), im = fma(a, d, b*c)), and keep it plain for complex64 and in the
// DEFAULT kernels (ATEN_CPU_CAPABILITY=default). A scatter_reduce prod through ATen's own kernel
// over probe values on which the two formulas round differently tells which one this process
// runs; the answer is kept for the process (ATen picks its kernels once, at their first use).
#include <ATen/ops/arange.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/scatter_reduce_native.h>
#include <c10/util/complex.h>

#include <atomic>
#include <cmath>
#include <cstdint>

#include "scatter.h"

namespace stridewise::adapter {
namespace {

constexpr int kProbe = 16;

template <typename F>
bool same(F a, F b) {
  return a == b || (std::isnan(a) && std::isnan(b));
}

// kPlain or kFma, or kUnknown when ATen's results are neither formula's.
template <typename F>
ProductKind probe(c10::ScalarType st) {
  using C = c10::complex<F>;
  const at::Tensor self = at::empty({kProbe}, at::TensorOptions().dtype(st));
  const at::Tensor src = at::empty({kProbe}, at::TensorOptions().dtype(st));
  C* s = self.mutable_data_ptr<C>();
  C* t = src.mutable_data_ptr<C>();
  // values with full mantissas (the two formulas then differ on about a third of them)
  uint64_t x = 0x9E3779B97F4A7C15ull;
  const auto next = [&x] {
    x = x * 6364136223846793005ull + 1442695040888963407ull;
    return static_cast<F>(static_cast<double>(x >> 11) * 0x1.0p-53 * 8.0 - 4.0);
  };
  for (int i = 0; i < kProbe; ++i) {
    s[i] = C(next(), next());
    t[i] = C(next(), next());
  }
  const at::Tensor index = at::arange(kProbe, at::TensorOptions().dtype(at::kLong));
  at::Tensor out = at::empty({kProbe}, at::TensorOptions().dtype(st));
  AtenImpl<at::native::structured_scatter_reduce_two>(out).impl(self, 0, index, src, "prod", true,
                                                                out);
  const C* o = out.const_data_ptr<C>();
  bool plain = true, fma = true;
  for (int i = 0; i < kProbe; ++i) {
    const F a = s[i].real(), b = s[i].imag(), c = t[i].real(), d = t[i].imag();
    const F ac = a * c, bd = b * d, ad = a * d, bc = b * c;
    plain = plain && same(o[i].real(), ac - bd) && same(o[i].imag(), ad + bc);
    fma = fma && same(o[i].real(), std::fma(a, c, -bd)) && same(o[i].imag(), std::fma(a, d, bc));
  }
  if (plain == fma) return ProductKind::kUnknown;  // neither (or the probe could not tell)
  return fma ? ProductKind::kFma : ProductKind::kPlain;
}

}  // namespace

ProductKind aten_cpu_complex_product(c10::ScalarType st) {
  static std::atomic<int> cache[2] = {{-1}, {-1}};
  const bool dbl = st == c10::ScalarType::ComplexDouble;
  std::atomic<int>& slot = cache[dbl ? 1 : 0];
  int k = slot.load(std::memory_order_relaxed);
  if (k < 0) {  // two threads may both ask: the same answer
    k = static_cast<int>(dbl ? probe<double>(st) : probe<float>(st));
    slot.store(k, std::memory_order_relaxed);
  }
  return static_cast<ProductKind>(k);
}

}  // namespace stridewise::adapter
