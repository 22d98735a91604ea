#include "test_util.h"

#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <cstring>
#include <numeric>
#include <sstream>
#include <stdexcept>
#include <thread>

namespace swt {

GuardedBuffer::GuardedBuffer(size_t bytes) : bytes_(bytes) {
  const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  const size_t data_pages = (bytes + page - 1) / page;
  map_len_ = (data_pages + 1) * page;
  map_ = mmap(nullptr, map_len_, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (map_ == MAP_FAILED) throw std::runtime_error("mmap failed");
  unsigned char* guard = static_cast<unsigned char*>(map_) + data_pages * page;
  if (mprotect(guard, page, PROT_NONE) != 0) throw std::runtime_error("mprotect failed");
  data_ = guard - bytes;
}

GuardedBuffer::~GuardedBuffer() {
  release();
}

GuardedBuffer::GuardedBuffer(GuardedBuffer&& o) noexcept {
  *this = std::move(o);
}

GuardedBuffer& GuardedBuffer::operator=(GuardedBuffer&& o) noexcept {
  if (this != &o) {
    release();
    map_ = o.map_;
    map_len_ = o.map_len_;
    data_ = o.data_;
    bytes_ = o.bytes_;
    o.map_ = nullptr;
    o.map_len_ = 0;
    o.data_ = nullptr;
    o.bytes_ = 0;
  }
  return *this;
}

void GuardedBuffer::release() {
  if (map_) munmap(map_, map_len_);
  map_ = nullptr;
}

uint64_t test_seed() {
  static const uint64_t seed = []() -> uint64_t {
    if (const char* s = std::getenv("STRIDEWISE_TEST_SEED")) return std::strtoull(s, nullptr, 0);
    return static_cast<uint64_t>(std::random_device{}()) << 32 ^ std::random_device{}();
  }();
  return seed;
}

int64_t numel(const std::vector<int64_t>& sizes) {
  int64_t n = 1;
  for (int64_t s : sizes) n *= s;
  return n;
}

int64_t max_offset(const std::vector<int64_t>& sizes, const std::vector<int64_t>& strides) {
  int64_t off = 0;
  for (size_t d = 0; d < sizes.size(); ++d) {
    if (sizes[d] == 0) return 0;
    off += (sizes[d] - 1) * strides[d];
  }
  return off;
}

std::vector<int64_t> random_strides(Rng& rng, const std::vector<int64_t>& sizes,
                                    const LayoutOpts& opts) {
  const size_t r = sizes.size();
  std::vector<int64_t> strides(r, 0);
  if (opts.allow_overlap && coin(rng, 0.1)) {
    for (size_t d = 0; d < r; ++d) strides[d] = rand_int(rng, 0, 4);
    return strides;
  }
  // Physical extent per dim: a step slice and/or a narrowed dim needs room around it.
  std::vector<int64_t> phys(r), step(r, 1);
  std::vector<bool> expand(r, false);
  for (size_t d = 0; d < r; ++d) {
    if (sizes[d] == 1) {  // never contributes an offset; its stride is set to junk below
      phys[d] = 1;
      continue;
    }
    expand[d] = opts.allow_expand && coin(rng, 0.2);
    if (!opts.compact && coin(rng, 0.25)) step[d] = rand_int(rng, 2, 3);
    const int64_t pad = !opts.compact && coin(rng, 0.2) ? rand_int(rng, 1, 2) : 0;
    phys[d] = expand[d] ? 1 : std::max<int64_t>(1, sizes[d] * step[d] + pad);
  }
  // Memory order: identity (contiguous-like), reversed (transpose) or a random permutation.
  std::vector<size_t> order(r);
  std::iota(order.begin(), order.end(), size_t{0});
  const int64_t kind = rand_int(rng, 0, 2);
  if (kind == 1) std::reverse(order.begin(), order.end());
  if (kind == 2) std::shuffle(order.begin(), order.end(), rng);
  int64_t acc = 1;
  for (size_t i = r; i-- > 0;) {
    const size_t d = order[i];
    strides[d] = expand[d] ? 0 : acc * step[d];
    acc *= phys[d];
  }
  // PyTorch gives size-1 dims all kinds of strides (views, expands, unsqueeze).
  for (size_t d = 0; d < r; ++d)
    if (sizes[d] == 1 && coin(rng, 0.5)) strides[d] = rand_int(rng, 0, 100);
  return strides;
}

TestTensor make_tensor(DType dtype, const std::vector<int64_t>& sizes,
                       const std::vector<int64_t>& strides, int64_t offset) {
  TestTensor t;
  t.esize = stridewise::elem_size(dtype);
  t.offset = offset;
  const int64_t n = numel(sizes);
  const int64_t elems = offset + (n > 0 ? max_offset(sizes, strides) + 1 : 0);
  t.storage = GuardedBuffer(static_cast<size_t>(elems * t.esize));
  t.view.data = t.storage.data() + offset * t.esize;
  t.view.dtype = dtype;
  t.view.rank = static_cast<int>(sizes.size());
  for (size_t d = 0; d < sizes.size(); ++d) {
    t.view.sizes[d] = sizes[d];
    t.view.strides[d] = strides[d];
  }
  return t;
}

TestTensor make_random_tensor(Rng& rng, DType dtype, const std::vector<int64_t>& sizes,
                              const LayoutOpts& opts) {
  // Padding and steps compound over many dims; redraw layouts whose storage would dwarf
  // the element count (they test nothing more and make the run slow).
  const int64_t budget = std::max<int64_t>(numel(sizes) * 64, 1 << 16);
  std::vector<int64_t> strides = random_strides(rng, sizes, opts);
  for (int i = 0; i < 20 && max_offset(sizes, strides) > budget; ++i)
    strides = random_strides(rng, sizes, opts);
  if (max_offset(sizes, strides) > budget) {
    LayoutOpts compact = opts;
    compact.compact = true;
    compact.allow_overlap = false;
    strides = random_strides(rng, sizes, compact);
  }
  const int64_t offset = coin(rng, 0.5) ? rand_int(rng, 1, 3) : 0;
  return make_tensor(dtype, sizes, strides, offset);
}

void fill_random_bytes(Rng& rng, TestTensor& t, unsigned char poison_byte) {
  uint64_t bits = 0;
  for (size_t i = 0; i < t.storage_bytes(); ++i) {
    if (i % 8 == 0) bits = rng();
    unsigned char b = static_cast<unsigned char>(bits >> (i % 8 * 8));
    if (b == 0 || b == poison_byte) b = static_cast<unsigned char>(poison_byte ^ 0x5A);
    t.base()[i] = b;
  }
}

std::vector<int64_t> contiguous_strides(const std::vector<int64_t>& sizes) {
  std::vector<int64_t> st(sizes.size());
  int64_t acc = 1;
  for (size_t d = sizes.size(); d-- > 0;) {
    st[d] = acc;
    acc *= std::max<int64_t>(sizes[d], 1);
  }
  return st;
}

void poison(TestTensor& t, unsigned char byte) {
  if (t.storage_bytes()) std::memset(t.base(), byte, t.storage_bytes());
}

int64_t read_index(const StridedView& v, int64_t elem_offset) {
  const unsigned char* p = static_cast<const unsigned char*>(v.data);
  if (v.dtype == DType::kInt32) {
    int32_t x;
    std::memcpy(&x, p + elem_offset * 4, 4);
    return x;
  }
  int64_t x;
  std::memcpy(&x, p + elem_offset * 8, 8);
  return x;
}

void write_index(const StridedView& v, int64_t elem_offset, int64_t value) {
  unsigned char* p = static_cast<unsigned char*>(v.data);
  if (v.dtype == DType::kInt32) {
    const int32_t x = static_cast<int32_t>(value);
    std::memcpy(p + elem_offset * 4, &x, 4);
  } else {
    std::memcpy(p + elem_offset * 8, &value, 8);
  }
}

void fill_index(Rng& rng, TestTensor& t, int64_t lo, int64_t hi) {
  const int64_t elems = static_cast<int64_t>(t.storage_bytes()) / t.esize;
  StridedView base = t.view;
  base.data = t.base();
  for (int64_t i = 0; i < elems; ++i) write_index(base, i, rand_int(rng, lo, hi));
}

int64_t offset_of(const StridedView& v, int64_t linear) {
  int64_t off = 0;
  for (int d = v.rank - 1; d >= 0; --d) {
    off += (linear % v.sizes[d]) * v.strides[d];
    linear /= v.sizes[d];
  }
  return off;
}

std::vector<unsigned char> reference_gather(const StridedView& out, const StridedView& self,
                                            const StridedView& index, int64_t dim,
                                            const unsigned char* out_base, size_t out_bytes,
                                            const unsigned char* out_before) {
  std::vector<unsigned char> want(out_before, out_before + out_bytes);
  const int es = stridewise::elem_size(self.dtype);
  const int64_t n = index.numel();
  const int r = index.rank;
  std::vector<int64_t> coord(static_cast<size_t>(r));
  for (int64_t linear = 0; linear < n; ++linear) {
    int64_t rest = linear;
    for (int d = r - 1; d >= 0; --d) {
      coord[d] = rest % index.sizes[d];
      rest /= index.sizes[d];
    }
    int64_t ioff = 0, ooff = 0, soff = 0;
    for (int d = 0; d < r; ++d) {
      ioff += coord[d] * index.strides[d];
      ooff += coord[d] * out.strides[d];
    }
    const int64_t v = read_index(index, ioff);
    for (int d = 0; d < r; ++d) soff += (d == dim ? v : coord[d]) * self.strides[d];
    const size_t at =
        static_cast<size_t>(static_cast<const unsigned char*>(out.data) - out_base + ooff * es);
    std::memcpy(want.data() + at, static_cast<const unsigned char*>(self.data) + soff * es,
                static_cast<size_t>(es));
  }
  return want;
}

std::string diff_bytes(const unsigned char* got, const unsigned char* want, size_t n) {
  for (size_t i = 0; i < n; ++i) {
    if (got[i] != want[i]) {
      std::ostringstream os;
      os << "byte " << i << " of " << n << ": got 0x" << std::hex << int(got[i]) << ", want 0x"
         << int(want[i]);
      return os.str();
    }
  }
  return {};
}

ChunkyExec::ChunkyExec(uint64_t s, int64_t m, int t) : seed(s), max_chunk(m), threads(t) {}

namespace {

void chunky_parallel_for(void* self, int64_t n, int64_t, stridewise::RangeFn fn, void* ctx) {
  const ChunkyExec& ce = *static_cast<const ChunkyExec*>(self);
  Rng rng(ce.seed ^ static_cast<uint64_t>(n));
  std::vector<std::pair<int64_t, int64_t>> chunks;
  for (int64_t b = 0; b < n;) {
    const int64_t e = std::min(n, b + rand_int(rng, 1, ce.max_chunk));
    chunks.emplace_back(b, e);
    b = e;
  }
  std::shuffle(chunks.begin(), chunks.end(), rng);
  std::atomic<size_t> next{0};
  auto work = [&] {
    for (size_t i; (i = next.fetch_add(1)) < chunks.size();)
      fn(ctx, chunks[i].first, chunks[i].second);
  };
  std::vector<std::thread> pool;
  for (int t = 1; t < ce.threads; ++t) pool.emplace_back(work);
  work();
  for (auto& t : pool) t.join();
}

}  // namespace

stridewise::CpuExecutor ChunkyExec::exec() const {
  stridewise::CpuExecutor e;
  e.parallel_for = &chunky_parallel_for;
  e.self = const_cast<ChunkyExec*>(this);
  return e;
}

std::string shape_str(const std::vector<int64_t>& v) {
  std::ostringstream os;
  os << '(';
  for (size_t i = 0; i < v.size(); ++i) os << (i ? "," : "") << v[i];
  os << ')';
  return os.str();
}

stridewise::GatherArgs GatherCase::args() const {
  stridewise::GatherArgs a;
  a.self = self.view;
  a.index = index.view;
  a.out = out.view;
  a.dim = dim;
  return a;
}

std::string GatherCase::describe() const {
  std::ostringstream os;
  auto one = [&](const char* name, const TestTensor& t) {
    std::vector<int64_t> sz(t.view.sizes, t.view.sizes + t.view.rank);
    std::vector<int64_t> st(t.view.strides, t.view.strides + t.view.rank);
    os << ' ' << name << ' ' << stridewise::dtype_name(t.view.dtype) << shape_str(sz) << " strides "
       << shape_str(st) << " offset " << t.offset << ';';
  };
  os << "dim " << dim << ';';
  one("self", self);
  one("index", index);
  one("out", out);
  return os.str();
}

GatherCase random_gather_case(Rng& rng, DType dtype, DType index_dtype, int rank,
                              const GatherCaseOpts& opts) {
  GatherCase c;
  c.dim = rank > 0 ? rand_int(rng, 0, rank - 1) : 0;
  const size_t r = static_cast<size_t>(rank);
  std::vector<int64_t> isz(r, 1), ssz(r, 1);
  const bool empty = opts.allow_empty && coin(rng, 0.3);
  for (;;) {
    for (size_t d = 0; d < r; ++d) {
      const bool live = rank <= 8 || coin(rng, 4.0 / rank);
      isz[d] = live ? rand_int(rng, 1, rank <= 3 ? 7 : 4) : 1;
    }
    if (numel(isz) <= opts.max_numel) break;
  }
  if (empty && rank > 0) isz[static_cast<size_t>(rand_int(rng, 0, rank - 1))] = 0;
  for (size_t d = 0; d < r; ++d) {
    if (static_cast<int64_t>(d) == c.dim)
      ssz[d] = empty && coin(rng, 0.3) ? 0 : rand_int(rng, 1, 5);
    else
      ssz[d] = isz[d] + (coin(rng, rank <= 8 ? 0.4 : 2.0 / rank) ? rand_int(rng, 1, 2) : 0);
  }
  LayoutOpts in_opts, out_opts;
  out_opts.allow_expand = false;
  out_opts.allow_overlap = false;
  if (rank > 0 && coin(rng, 0.2)) {
    // The seed's family: contiguous self/out, index expanded along the last dim (the
    // memcpy-a-run fast path), other index dims random.
    c.self = make_tensor(dtype, ssz, contiguous_strides(ssz), rand_int(rng, 0, 2));
    std::vector<int64_t> ist = random_strides(rng, isz, in_opts);
    ist.back() = 0;
    c.index = make_tensor(index_dtype, isz, ist, rand_int(rng, 0, 2));
    c.out = make_tensor(dtype, isz, contiguous_strides(isz), rand_int(rng, 0, 2));
  } else {
    c.self = make_random_tensor(rng, dtype, ssz, in_opts);
    c.index = make_random_tensor(rng, index_dtype, isz, in_opts);
    c.out = make_random_tensor(rng, dtype, isz, out_opts);
  }
  fill_random_bytes(rng, c.self);
  const int64_t hi = rank > 0 ? ssz[static_cast<size_t>(c.dim)] : 1;
  fill_index(rng, c.index, 0, std::max<int64_t>(hi - 1, 0));
  poison(c.out);
  return c;
}

GatherCase gather_case(DType dtype, DType index_dtype, int64_t dim,
                       const std::vector<int64_t>& self_sizes,
                       const std::vector<int64_t>& self_strides,
                       const std::vector<int64_t>& index_sizes,
                       const std::vector<int64_t>& index_strides,
                       const std::vector<int64_t>& out_strides) {
  GatherCase c;
  c.dim = dim;
  c.self = make_tensor(dtype, self_sizes, self_strides, 0);
  c.index = make_tensor(index_dtype, index_sizes, index_strides, 0);
  c.out = make_tensor(dtype, index_sizes, out_strides, 0);
  Rng rng(test_seed() ^ 0xCA5E);
  fill_random_bytes(rng, c.self);
  const int64_t hi = self_sizes.empty() ? 1 : self_sizes[static_cast<size_t>(dim)];
  fill_index(rng, c.index, 0, std::max<int64_t>(hi - 1, 0));
  poison(c.out);
  return c;
}

}  // namespace swt
