#include "scatter_test_util.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <memory>
#include <sstream>
#include <utility>

#include "common/elem_arith.h"  // the element arithmetic (Conv, Ops), shared with the kernels

namespace swct {

using stridewise::Combine;
using stridewise::DType;
using stridewise::ErrorDetail;
using stridewise::ScatterArgs;
using stridewise::ScatterPlan;
using stridewise::Status;
using stridewise::StridedView;
namespace el = stridewise::elem;
namespace sa = stridewise::arith;

const DType kScatterTypes[12] = {DType::kBool,    DType::kUInt8,     DType::kInt8,
                                 DType::kInt16,   DType::kInt32,     DType::kInt64,
                                 DType::kFloat16, DType::kBFloat16,  DType::kFloat32,
                                 DType::kFloat64, DType::kComplex64, DType::kComplex128};

ScatterArgs ScatterCase::args() const {
  ScatterArgs a;
  a.out = out.view;
  a.self = in_place ? out.view : self.view;
  a.index = index.view;
  if (!has_value) a.src = src.view;
  a.has_value = has_value;
  std::memcpy(a.value, value, sizeof value);
  a.has_alpha = has_alpha;
  std::memcpy(a.alpha, alpha, sizeof alpha);
  a.dim = dim;
  a.desc = desc;
  a.deterministic = deterministic;
  return a;
}

std::string ScatterCase::describe() const {
  std::ostringstream os;
  auto one = [&](const char* name, const swt::TestTensor& t) {
    std::vector<int64_t> sz(t.view.sizes, t.view.sizes + t.view.rank);
    std::vector<int64_t> s(t.view.strides, t.view.strides + t.view.rank);
    os << ' ' << name << ' ' << stridewise::dtype_name(t.view.dtype) << swt::shape_str(sz)
       << " strides " << swt::shape_str(s) << " offset " << t.offset << ';';
  };
  os << stridewise::combine_name(desc.combine) << " include_self " << desc.include_self
     << (in_place ? " in place" : " out of place") << (has_value ? " value" : " src")
     << (has_alpha ? " scaled by alpha" : "") << (deterministic ? " deterministic" : "") << " dim "
     << dim << ';';
  one("out", out);
  if (!in_place) one("self", self);
  one("index", index);
  if (!has_value) one("src", src);
  return os.str();
}

namespace {

bool is_floating(DType t) {
  return t == DType::kFloat16 || t == DType::kBFloat16 || t == DType::kFloat32 ||
         t == DType::kFloat64 || t == DType::kComplex64 || t == DType::kComplex128;
}

// One component (0: real, 1: imaginary) of a floating element, as double.
double component(DType t, const unsigned char* p, int k) {
  switch (t) {
    case DType::kFloat16: {
      uint16_t h;
      std::memcpy(&h, p, 2);
      return el::f16_to_float(h);
    }
    case DType::kBFloat16: {
      uint16_t h;
      std::memcpy(&h, p, 2);
      return el::bf16_to_float(h);
    }
    case DType::kFloat32:
    case DType::kComplex64: {
      float f;
      std::memcpy(&f, p + 4 * k, 4);
      return f;
    }
    default: {
      double d;
      std::memcpy(&d, p + 8 * k, 8);
      return d;
    }
  }
}

int components(DType t) {
  return t == DType::kComplex64 || t == DType::kComplex128 ? 2 : 1;
}

void write_float(DType t, unsigned char* p, int k, double v) {
  switch (t) {
    case DType::kFloat16: {
      const uint16_t h = el::float_to_f16(static_cast<float>(v));
      std::memcpy(p, &h, 2);
      break;
    }
    case DType::kBFloat16: {
      const uint16_t h = el::float_to_bf16(static_cast<float>(v));
      std::memcpy(p, &h, 2);
      break;
    }
    case DType::kFloat32:
    case DType::kComplex64: {
      const float f = static_cast<float>(v);
      std::memcpy(p + 4 * k, &f, 4);
      break;
    }
    default:
      std::memcpy(p + 8 * k, &v, 8);
  }
}

// A value whose combines stay exact in any order: small integers; for multiply a signed power
// of two, 1 in magnitude seven times in eight and 0.5 or 2 otherwise, and for complex types
// on one axis only (the other component +0), so every product of them is exact too. Why: a
// product's exponent walks by the factors' exponents, and the GPU combines a target's
// factors in any order. With factors of 0.5, 1 and 2 in equal shares (complex: both
// components such), a fully expanded index putting 187 complex64 factors on one target (an
// H200 run of TilePathMatchesCpu, 2026-12-02) overflowed float32 (the modulus grows by 0.69
// bits a factor on average), after which the plain complex formula gives inf or NaN by the
// order of the factors (the CPU's (inf, 0), the tile path's (inf, NaN)): not a kernel fault,
// and ATen's CUDA kernel is as order-dependent. With these factors a target's exponent moves
// by at most one bit in eight factors on average (sd 19 bits over 3000 factors), far inside
// float32's range in every order. NaN now and then when asked.
void nice_value(swt::Rng& rng, DType t, Combine c, bool nan, unsigned char* p) {
  const int es = stridewise::elem_size(t);
  if (t == DType::kBool) {
    *p = static_cast<unsigned char>(swt::rand_int(rng, 0, 1));
    return;
  }
  if (!is_floating(t)) {
    for (int i = 0; i < es; ++i) p[i] = static_cast<unsigned char>(rng());
    return;
  }
  const int axis = static_cast<int>(swt::rand_int(rng, 0, components(t) - 1));
  for (int k = 0; k < components(t); ++k) {
    double v = static_cast<double>(swt::rand_int(rng, -8, 8));
    if (c == Combine::kMul) {
      const int64_t m = swt::rand_int(rng, 0, 15);
      v = k != axis ? 0.0 : (m == 0 ? 0.5 : m == 1 ? 2.0 : 1.0) * (swt::coin(rng, 0.5) ? -1 : 1);
    }
    if (nan && swt::coin(rng, 0.05)) v = std::numeric_limits<double>::quiet_NaN();
    write_float(t, p, k, v);
  }
}

// index_add's alpha on a third of the adds of a src: a signed power of two for floating types
// (a multiply's nice value), so alpha * src stays exact and sums stay order-free.
void maybe_alpha(swt::Rng& rng, DType t, ScatterCase& c) {
  if (c.desc.combine != Combine::kAdd || c.has_value || !swt::coin(rng, 1.0 / 3)) return;
  c.has_alpha = true;
  nice_value(rng, t, Combine::kMul, false, c.alpha);
}

// Any value (floating: uniform in [-1, 1]; for multiply of modulus uniform in [0.99, 1.01],
// complex ones in a uniform direction, so that long products stay in range).
void arbitrary_value(swt::Rng& rng, DType t, Combine c, unsigned char* p) {
  if (!is_floating(t)) return nice_value(rng, t, c, false, p);
  const double r = std::uniform_real_distribution<double>(0.99, 1.01)(rng);
  const double theta = std::uniform_real_distribution<double>(0, 6.283185307179586)(rng);
  for (int k = 0; k < components(t); ++k) {
    const double v = c != Combine::kMul   ? std::uniform_real_distribution<double>(-1, 1)(rng)
                     : components(t) == 1 ? r
                     : k == 0             ? r * std::cos(theta)
                                          : r * std::sin(theta);
    write_float(t, p, k, v);
  }
}

void fill_nice(swt::Rng& rng, swt::TestTensor& t, Combine c, bool nan) {
  const int es = t.esize;
  for (size_t i = 0; i + es <= t.storage_bytes(); i += es)
    nice_value(rng, t.view.dtype, c, nan, t.base() + i);
}

// Coordinates of logical position `linear` (last dim fastest).
void coords_of(const StridedView& v, int64_t linear, int64_t* co) {
  for (int d = v.rank - 1; d >= 0; --d) {
    co[d] = linear % v.sizes[d];
    linear /= v.sizes[d];
  }
}

int64_t offset_at(const StridedView& v, const int64_t* co) {
  int64_t o = 0;
  for (int d = 0; d < v.rank; ++d) o += co[d] * v.strides[d];
  return o;
}

int64_t linear_at(const StridedView& v, const int64_t* co) {
  int64_t l = 0;
  for (int d = 0; d < v.rank; ++d) l = l * v.sizes[d] + co[d];
  return l;
}

template <typename T>
T load_t(const unsigned char* p) {
  T v;
  std::memcpy(&v, p, sizeof v);
  return v;
}

// The shared combine, refusing what scatter_supports rules out (complex max/min).
template <typename T>
sa::AccOf<T> combine_rt(Combine c, sa::AccOf<T> a, sa::AccOf<T> b) {
  constexpr bool cx = std::is_same_v<T, el::Cx<float>> || std::is_same_v<T, el::Cx<double>>;
  if (c == Combine::kCopy || (cx && (c == Combine::kMax || c == Combine::kMin))) {
    ADD_FAILURE() << "reference: no such combine";
    return a;
  }
  return sa::combine(c, a, b);
}

template <typename T>
std::vector<unsigned char> reference_typed(const ScatterCase& c, int64_t* bad, Candidates* cands) {
  using Cv = sa::Conv<T>;
  using Acc = sa::AccOf<T>;
  const ScatterArgs a = c.args();
  const StridedView& o = a.out;
  const int es = c.out.esize;
  const int64_t n_out = o.numel();
  const int64_t hi = o.rank > 0 ? o.sizes[a.dim] : 1;
  const bool copy = a.desc.combine == Combine::kCopy;
  const auto* out0 = static_cast<const unsigned char*>(o.data);
  const auto* self0 = static_cast<const unsigned char*>(a.self.data);
  std::vector<unsigned char> want(c.out.base(), c.out.base() + c.out.storage_bytes());
  std::vector<std::vector<unsigned char>> init(static_cast<size_t>(n_out));
  std::vector<Acc> acc(static_cast<size_t>(n_out));
  const sa::SrcScale<T> scale{c.has_alpha, Cv::load(load_t<T>(c.alpha))};
  std::vector<int64_t> cnt(static_cast<size_t>(n_out), 0);
  std::vector<std::vector<std::vector<unsigned char>>> written(static_cast<size_t>(n_out));
  int64_t co[stridewise::kMaxRank] = {};
  for (int64_t p = 0; p < n_out; ++p) {
    coords_of(o, p, co);
    const unsigned char* sp = self0 + offset_at(a.self, co) * es;
    init[p].assign(sp, sp + es);
    if (!copy) acc[p] = Cv::load(load_t<T>(sp));
  }
  *bad = 0;
  const int64_t n_idx = a.index.numel();
  for (int64_t q = 0; q < n_idx; ++q) {
    coords_of(a.index, q, co);
    const int64_t v = swt::read_index(a.index, offset_at(a.index, co));
    if (v < 0 || v >= hi) {
      ++*bad;
      continue;
    }
    const unsigned char* vp =
        a.has_value ? c.value
                    : static_cast<const unsigned char*>(a.src.data) + offset_at(a.src, co) * es;
    if (o.rank > 0) co[a.dim] = v;
    const int64_t p = linear_at(o, co);
    if (copy) {
      written[p].emplace_back(vp, vp + es);
      continue;
    }
    if (!a.desc.include_self && cnt[p] == 0) acc[p] = sa::Ops<Acc>::identity(a.desc.combine);
    acc[p] = combine_rt<T>(a.desc.combine, acc[p], scale(Cv::load(load_t<T>(vp))));
    ++cnt[p];
  }
  if (*bad) return want;
  for (int64_t p = 0; p < n_out; ++p) {
    coords_of(o, p, co);
    const int64_t off = (out0 - c.out.base()) + offset_at(o, co) * es;
    std::vector<unsigned char> r = init[p];
    if (copy) {
      if (!written[p].empty()) r = written[p].back();
      if (cands && written[p].size() > 1) {
        cands->byte_offset.push_back(off);
        cands->values.push_back(written[p]);
      }
    } else if (a.desc.combine == Combine::kMean) {
      const int64_t d = cnt[p] + (a.desc.include_self ? 1 : 0);
      if constexpr (!std::is_same_v<T, el::Bool>) {
        if (d > 0) {
          const T t = Cv::store(sa::Ops<Acc>::mean(sa::mean_sum<T>(acc[p]), d));
          std::memcpy(r.data(), &t, es);
        }
      }
    } else if (a.desc.include_self || cnt[p] > 0) {
      const T t = Cv::store(acc[p]);
      std::memcpy(r.data(), &t, es);
    }
    std::memcpy(want.data() + off, r.data(), es);
  }
  return want;
}

bool elem_nan(DType t, const unsigned char* p) {
  if (!is_floating(t)) return false;
  for (int k = 0; k < components(t); ++k)
    if (std::isnan(component(t, p, k))) return true;
  return false;
}

// Complex values are close relative to their modulus, not per component: a product's
// component can be a cancellation remnant whose own relative error is large while the
// element's is a few ulps (25 complex64 factors of components in {±0.5, ±1, ±2} in two
// orders: 14 of 6000 components off by more than 1e-5 of themselves, none by more than
// 3.5e-7 of the modulus; an H200 run of TilePathMatchesCpu hit one on 2026-12-01).
bool elem_close(DType t, const unsigned char* g, const unsigned char* w, double rtol, double atol) {
  if (!is_floating(t) || rtol <= 0) return false;
  double scale = 0;
  for (int k = 0; k < components(t); ++k)
    if (std::isfinite(component(t, w, k))) scale = std::max(scale, std::fabs(component(t, w, k)));
  for (int k = 0; k < components(t); ++k) {
    const double x = component(t, g, k), y = component(t, w, k);
    if (std::isnan(x) != std::isnan(y)) return false;
    if (std::isnan(x)) continue;
    if (std::isinf(x) || std::isinf(y)) {
      if (x != y) return false;
      continue;
    }
    if (std::fabs(x - y) > atol + rtol * (components(t) == 2 ? scale : std::fabs(y))) return false;
  }
  return true;
}

// Every component equal as a number (+0 == -0); NaNs never.
bool same_values(DType t, const unsigned char* g, const unsigned char* w) {
  for (int k = 0; k < components(t); ++k)
    if (!(component(t, g, k) == component(t, w, k))) return false;
  return true;
}

}  // namespace

ScatterCase random_scatter_case(swt::Rng& rng, const ScatterCaseOpts& opts) {
  ScatterCase c;
  DType dt;
  Combine comb;
  do {
    dt = opts.random_dtype ? kScatterTypes[swt::rand_int(rng, 0, 11)] : opts.dtype;
    comb = opts.combine >= 0 ? static_cast<Combine>(opts.combine)
                             : static_cast<Combine>(swt::rand_int(rng, 0, 5));
  } while (!cuda_runs(dt, comb) && (opts.combine < 0 || opts.random_dtype));
  const bool incl = opts.include_self >= 0 ? opts.include_self != 0 : swt::coin(rng, 0.5);
  const stridewise::OpCode op = comb == Combine::kCopy  ? stridewise::OpCode::kScatter
                                : comb == Combine::kAdd ? stridewise::OpCode::kScatterAdd
                                                        : stridewise::OpCode::kScatterReduce;
  c.desc = stridewise::scatter_desc(op, comb, comb == Combine::kCopy ? true : incl);
  c.in_place = opts.in_place >= 0 ? opts.in_place != 0 : swt::coin(rng, 0.5);
  c.has_value = opts.has_value >= 0 ? opts.has_value != 0 : swt::coin(rng, 0.25);
  c.deterministic = opts.deterministic >= 0 ? opts.deterministic != 0 : swt::coin(rng, 0.3);
  const int r = opts.rank >= 0 ? opts.rank : static_cast<int>(swt::rand_int(rng, 0, 6));
  c.dim = r > 0 ? swt::rand_int(rng, 0, r - 1) : 0;
  const size_t R = static_cast<size_t>(r);
  std::vector<int64_t> ssz(R), isz(R), srcsz(R);
  const bool empty = swt::coin(rng, 0.05);
  for (size_t d = 0; d < R; ++d) {
    ssz[d] = swt::rand_int(rng, 1, opts.max_size);
    isz[d] = d == size_t(c.dim) ? swt::rand_int(rng, 1, opts.max_size + 2)
                                : swt::rand_int(rng, 1, ssz[d]);
  }
  if (empty && r > 0) isz[static_cast<size_t>(swt::rand_int(rng, 0, r - 1))] = 0;
  for (size_t d = 0; d < R; ++d) srcsz[d] = isz[d] + swt::rand_int(rng, 0, 1);
  swt::LayoutOpts in_opts, out_opts;
  out_opts.allow_expand = false;
  out_opts.allow_overlap = false;
  c.out = swt::make_random_tensor(rng, dt, ssz, out_opts);
  const bool nan = opts.nan && is_floating(dt);
  if (c.in_place) {
    fill_nice(rng, c.out, comb, nan);
  } else {
    c.self = swt::make_random_tensor(rng, dt, ssz, in_opts);
    fill_nice(rng, c.self, comb, nan);
    swt::poison(c.out);
  }
  c.index = swt::make_random_tensor(rng, swt::coin(rng, 0.5) ? DType::kInt64 : DType::kInt32, isz,
                                    in_opts);
  swt::fill_index(rng, c.index, 0, r > 0 ? ssz[static_cast<size_t>(c.dim)] - 1 : 0);
  if (c.has_value) {
    nice_value(rng, dt, comb, nan, c.value);
  } else {
    c.src = swt::make_random_tensor(rng, dt, srcsz, in_opts);
    fill_nice(rng, c.src, comb, nan);
  }
  maybe_alpha(rng, dt, c);
  return c;
}

ScatterCase shared_index_case(swt::Rng& rng, DType dt, Combine comb, bool include_self,
                              bool in_place, bool has_value, const std::vector<int64_t>& out_sizes,
                              int64_t dim, int64_t line_len, bool arbitrary) {
  ScatterCase c;
  const stridewise::OpCode op = comb == Combine::kCopy  ? stridewise::OpCode::kScatter
                                : comb == Combine::kAdd ? stridewise::OpCode::kScatterAdd
                                                        : stridewise::OpCode::kScatterReduce;
  c.desc = stridewise::scatter_desc(op, comb, comb == Combine::kCopy ? true : include_self);
  c.in_place = in_place;
  c.has_value = has_value;
  c.deterministic = true;
  c.dim = dim;
  const size_t r = out_sizes.size();
  std::vector<int64_t> isz = out_sizes, ist(r, 0);
  if (r > 0) {
    isz[size_t(dim)] = line_len;
    ist[size_t(dim)] = 1;
  }
  auto fill = [&](swt::TestTensor& t) {
    for (size_t i = 0; i + size_t(t.esize) <= t.storage_bytes(); i += size_t(t.esize)) {
      if (arbitrary)
        arbitrary_value(rng, dt, comb, t.base() + i);
      else
        nice_value(rng, dt, comb, false, t.base() + i);
    }
  };
  c.out = swt::make_tensor(dt, out_sizes, swt::contiguous_strides(out_sizes), 0);
  if (in_place) {
    fill(c.out);
  } else {
    c.self = swt::make_tensor(dt, out_sizes, swt::contiguous_strides(out_sizes), 0);
    fill(c.self);
    swt::poison(c.out);
  }
  c.index = swt::make_tensor(swt::coin(rng, 0.5) ? DType::kInt64 : DType::kInt32, isz, ist, 0);
  swt::fill_index(rng, c.index, 0, r > 0 ? out_sizes[size_t(dim)] - 1 : 0);
  if (has_value) {
    if (arbitrary)
      arbitrary_value(rng, dt, comb, c.value);
    else
      nice_value(rng, dt, comb, false, c.value);
  } else {
    c.src = swt::make_tensor(dt, isz, swt::contiguous_strides(isz), 0);
    fill(c.src);
  }
  maybe_alpha(rng, dt, c);
  return c;
}

ScatterCase rows_copy_case(swt::Rng& rng, int64_t max_line_len) {
  const DType types[] = {DType::kFloat32, DType::kFloat16, DType::kFloat64, DType::kInt8};
  const DType dt = types[swt::rand_int(rng, 0, 3)];
  const bool wide = swt::coin(rng, 0.25);
  const std::vector<int64_t> out = {swt::rand_int(rng, 1, wide ? 3 : 40),
                                    16 * swt::rand_int(rng, wide ? 150 : 1, wide ? 300 : 40)};
  ScatterCase c =
      shared_index_case(rng, dt, Combine::kCopy, true, swt::coin(rng, 0.5), swt::coin(rng, 0.2),
                        out, 0, swt::rand_int(rng, 1, max_line_len), true);
  c.deterministic = false;
  if (swt::coin(rng, 0.1)) plant_bad_index(rng, c);
  return c;
}

bool plant_bad_index(swt::Rng& rng, ScatterCase& c) {
  const StridedView& ix = c.index.view;
  const int64_t n = ix.numel();
  if (n == 0) return false;
  const int64_t hi = c.out.view.rank > 0 ? c.out.view.sizes[c.dim] : 1;
  const int64_t v =
      swt::coin(rng, 0.5) ? -1 - swt::rand_int(rng, 0, 3) : hi + swt::rand_int(rng, 0, 3);
  swt::write_index(ix, swt::offset_of(ix, swt::rand_int(rng, 0, n - 1)), v);
  return true;
}

std::vector<unsigned char> reference_scatter(const ScatterCase& c, int64_t* bad,
                                             Candidates* cands) {
  std::vector<unsigned char> want;
  const stridewise::Status st = el::with_type(c.out.view.dtype, [&](auto tag) {
    want = reference_typed<typename decltype(tag)::type>(c, bad, cands);
    return stridewise::Status::kOk;
  });
  if (st != stridewise::Status::kOk) ADD_FAILURE() << "reference: unsupported dtype";
  return want;
}

namespace {

// An element's value as text: components for floating types, the integer otherwise.
std::string elem_text(DType t, const unsigned char* p, int es) {
  std::ostringstream os;
  os.precision(9);
  if (is_floating(t)) {
    os << (components(t) == 2 ? "(" : "");
    for (int k = 0; k < components(t); ++k) os << (k ? ", " : "") << component(t, p, k);
    os << (components(t) == 2 ? ")" : "");
  } else {
    int64_t v = 0;
    std::memcpy(&v, p, static_cast<size_t>(es));  // little-endian; sign shown as raw bits
    os << v;
  }
  os << " [0x";
  for (int i = es - 1; i >= 0; --i) {
    static const char* hex = "0123456789abcdef";
    os << hex[p[i] >> 4] << hex[p[i] & 15];
  }
  os << "]";
  return os.str();
}

}  // namespace

std::string compare_out(const ScatterCase& c, const unsigned char* got,
                        const std::vector<unsigned char>& want, const Candidates* cands,
                        double rtol, double atol) {
  std::vector<unsigned char> g(got, got + want.size());
  const StridedView& o = c.out.view;
  const DType dt = o.dtype;
  const int es = c.out.esize;
  const int64_t base = static_cast<const unsigned char*>(o.data) - c.out.base();
  const int64_t n = o.numel();
  // A complex product's zero components take their sign from the order of the factors (the
  // imaginary part of (a, +0)(b, +0) is a*0 + 0*b), which the GPU leaves unspecified outside
  // deterministic mode: there a zero's sign is not compared.
  const bool zero_sign_free =
      components(dt) == 2 && c.desc.combine == Combine::kMul && !c.deterministic;
  std::ostringstream bad;
  int64_t n_bad = 0;
  int64_t co[stridewise::kMaxRank] = {};
  for (int64_t p = 0; p < n; ++p) {
    const int64_t off = base + swt::offset_of(o, p) * es;
    unsigned char* gp = g.data() + off;
    const unsigned char* wp = want.data() + off;
    if (std::memcmp(gp, wp, es) == 0) continue;
    bool ok = (elem_nan(dt, gp) && elem_nan(dt, wp)) || elem_close(dt, gp, wp, rtol, atol) ||
              (zero_sign_free && same_values(dt, gp, wp));
    if (!ok && cands) {
      for (size_t i = 0; i < cands->byte_offset.size() && !ok; ++i)
        if (cands->byte_offset[i] == off)
          for (const auto& v : cands->values[i]) ok = ok || std::memcmp(v.data(), gp, es) == 0;
    }
    if (ok) {
      std::memcpy(gp, wp, es);
      continue;
    }
    if (n_bad++ < 4) {
      coords_of(o, p, co);
      bad << "\n  out[";
      for (int d = 0; d < o.rank; ++d) bad << (d ? ", " : "") << co[d];
      bad << "] (storage byte " << off << "): got " << elem_text(dt, gp, es) << ", want "
          << elem_text(dt, wp, es);
    }
  }
  if (n_bad > 0) {
    std::ostringstream os;
    os << n_bad << " of " << n << " elements of out differ (floating: beyond rtol " << rtol
       << ", atol " << atol << (components(dt) == 2 ? " of the modulus" : "") << ")" << bad.str();
    return os.str();
  }
  const std::string outside = swt::diff_bytes(g.data(), want.data(), want.size());
  return outside.empty() ? outside : "outside out's view: " + outside;
}

int ScatterHostRunner::sort(const cs::SortArgs& a) {
  launches.push_back("sort");
  const cs::SortShape& s = a.shape;
  if (int64_t(a.temp_bytes) < sort_temp_bytes(s)) {
    ADD_FAILURE() << "sort: temp storage of " << a.temp_bytes << " bytes";
    return -1;
  }
  const uint64_t mask = s.end_bit >= 64 ? ~uint64_t(0) : (uint64_t(1) << s.end_bit) - 1;
  const size_t n = static_cast<size_t>(s.n);
  std::vector<std::pair<uint64_t, int64_t>> kv(n);
  for (size_t i = 0; i < n; ++i) {
    kv[i].first =
        s.wide ? static_cast<uint64_t*>(a.keys[0])[i] : static_cast<uint32_t*>(a.keys[0])[i];
    kv[i].second =
        s.wide ? static_cast<int64_t*>(a.vals[0])[i] : static_cast<int32_t*>(a.vals[0])[i];
  }
  std::stable_sort(kv.begin(), kv.end(), [&](const auto& x, const auto& y) {
    return (x.first & mask) < (y.first & mask);
  });
  const int sel = s.end_bit % 2 ? 0 : 1;
  const size_t w = s.wide ? 8 : 4;
  std::memset(a.keys[1 - sel], 0xEE, n * w);
  std::memset(a.vals[1 - sel], 0xEE, n * w);
  std::memset(a.temp, 0xEE, a.temp_bytes);
  for (size_t i = 0; i < n; ++i) {
    if (s.wide) {
      static_cast<uint64_t*>(a.keys[sel])[i] = kv[i].first;
      static_cast<int64_t*>(a.vals[sel])[i] = kv[i].second;
    } else {
      static_cast<uint32_t*>(a.keys[sel])[i] = static_cast<uint32_t>(kv[i].first);
      static_cast<int32_t*>(a.vals[sel])[i] = static_cast<int32_t>(kv[i].second);
    }
  }
  return sel;
}

Status emulate_scatter(const ScatterArgs& a, ScatterHostRunner& r, ErrorDetail* e) {
  ScatterPlan plan;
  Status s = stridewise::plan_scatter(a, &plan, e);
  if (s != Status::kOk) return s;
  if (plan.elems.numel == 0 && (plan.in_place || plan.copy.numel == 0)) return Status::kOk;
  const int64_t total = cs::call_layout(a, plan, r.path, r).total;
  std::vector<unsigned char> ws(static_cast<size_t>(total) + 256, 0xCD);  // "uninitialized"
  unsigned char* wsp = ws.data() + (256 - cs::addr(ws.data()) % 256) % 256;
  const int64_t gen = 5 + stridewise::kAbortRingWords;
  int64_t word = gen - stridewise::kAbortRingWords;  // a stale generation: must not abort
  const cs::Abort abort{&word, gen};
  const cs::ScatterSite site{nullptr, static_cast<int32_t>(a.desc.op), plan.dim, plan.out_dim_size};
  std::string why;
  s = cs::run_scatter(a, plan, total ? wsp : nullptr, static_cast<size_t>(total), site, abort, r,
                      &why, r.path);
  if (s != Status::kOk) {
    if (e) e->message = why;
    return s;
  }
  if (!r.first.any) return Status::kOk;
  if (word != gen) ADD_FAILURE() << "bad index seen but the abort word was not raised";
  e->status = Status::kIndexOutOfRange;
  e->op = a.desc.op;
  e->value = r.first.value;
  e->position = r.first.position;
  return Status::kIndexOutOfRange;
}

::testing::AssertionResult scatter_emulated_matches(ScatterCase& c, uint64_t seed,
                                                    unsigned grid_cap, cs::PathChoice path,
                                                    std::vector<std::string>* ran_out) {
  const std::string where = "\n  case: " + c.describe() + "\n  grid cap " +
                            std::to_string(grid_cap) +
                            "; STRIDEWISE_TEST_SEED=" + std::to_string(seed);
  int64_t bad = 0;
  Candidates cands;
  const std::vector<unsigned char> want = reference_scatter(c, &bad, &cands);
  const ScatterArgs a = c.args();
  ScatterHostRunner r;
  r.grid_cap = grid_cap;
  r.path = path;
  ErrorDetail e;
  const Status s = emulate_scatter(a, r, &e);
  std::string ran;
  for (const auto& l : r.launches) ran += l + " ";
  if (ran_out) *ran_out = r.launches;
  const Status want_st = bad ? Status::kIndexOutOfRange : Status::kOk;
  if (s != want_st)
    return ::testing::AssertionFailure() << "status " << stridewise::status_name(s) << " ("
                                         << e.message << ") [" << ran << "]" << where;
  if (bad) {
    const int64_t hi = a.out.rank > 0 ? a.out.sizes[a.dim] : 1;
    if (e.value >= 0 && e.value < hi)
      return ::testing::AssertionFailure() << "reported value " << e.value << " is valid" << where;
    ScatterPlan plan;
    ErrorDetail pe;
    stridewise::plan_scatter(a, &plan, &pe);
    if (e.position < 0 || e.position >= plan.index_elems.numel)
      return ::testing::AssertionFailure() << "position " << e.position << " out of range" << where;
    const int64_t off = stridewise::plan_offset(plan.index_elems, 0, e.position);
    if (swt::read_index(a.index, off) != e.value)
      return ::testing::AssertionFailure()
             << "position " << e.position << " does not hold " << e.value << where;
  }
  const bool racy_copy = c.desc.combine == Combine::kCopy && !c.deterministic;
  const std::string diff = compare_out(c, c.out.base(), want, racy_copy ? &cands : nullptr);
  if (!diff.empty()) return ::testing::AssertionFailure() << diff << " [" << ran << "]" << where;
  return ::testing::AssertionSuccess();
}

}  // namespace swct
