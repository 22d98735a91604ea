#include "cuda_test_util.h"

#include <cstring>

namespace swct {

using stridewise::ErrorDetail;
using stridewise::Status;

bool have_device() {
  int n = 0;
  return cudaGetDeviceCount(&n) == cudaSuccess && n > 0;
}

DeviceTensor::DeviceTensor(const swt::TestTensor& t, size_t byte_shift)
    : bytes_(t.storage_bytes()), view_(t.view) {
  void* p = nullptr;
  status_ = cudaMalloc(&p, bytes_ + byte_shift + 1);  // +1: a valid pointer for 0 bytes
  if (status_ != cudaSuccess) return;
  alloc_ = static_cast<unsigned char*>(p);
  base_ = alloc_ + byte_shift;
  if (bytes_ > 0) status_ = cudaMemcpy(base_, t.base(), bytes_, cudaMemcpyHostToDevice);
  // From pageable memory, cudaMemcpy returns once the data is staged, before the DMA into
  // the buffer has finished, and it runs on the legacy default stream, which does not order
  // the tests' non-blocking streams. Without this wait a kernel could write out before the
  // tail of out's poisoned upload landed on top of it (seen on the H200, 2026-12-01: the last
  // 69760 bytes of a 787200-byte complex128 out kept their poison).
  if (status_ == cudaSuccess) status_ = cudaDeviceSynchronize();
  const auto* host_data = static_cast<const unsigned char*>(t.view.data);
  view_.data = base_ + (host_data - t.base());
}

DeviceTensor::~DeviceTensor() {
  if (alloc_) cudaFree(alloc_);
}

std::vector<unsigned char> DeviceTensor::download() const {
  std::vector<unsigned char> h(bytes_);
  if (bytes_ > 0 && cudaMemcpy(h.data(), base_, bytes_, cudaMemcpyDeviceToHost) != cudaSuccess)
    h.assign(bytes_, 0);  // callers compare against a reference: a failed copy shows up
  return h;
}

DeviceCase::DeviceCase(const swt::GatherCase& c, size_t out_shift, size_t self_shift)
    : self(c.self, self_shift), index(c.index), out(c.out, out_shift), dim(c.dim) {}

cudaError_t DeviceCase::status() const {
  if (self.status() != cudaSuccess) return self.status();
  if (index.status() != cudaSuccess) return index.status();
  return out.status();
}

stridewise::GatherArgs DeviceCase::args() const {
  stridewise::GatherArgs a;
  a.self = self.view();
  a.index = index.view();
  a.out = out.view();
  a.dim = dim;
  return a;
}

std::vector<unsigned char> reference_out(const swt::GatherCase& c, int64_t* bad) {
  const stridewise::StridedView& o = c.out.view;
  const stridewise::StridedView& s = c.self.view;
  const stridewise::StridedView& ix = c.index.view;
  std::vector<unsigned char> out(c.out.base(), c.out.base() + c.out.storage_bytes());
  if (bad) *bad = 0;
  const int64_t n = ix.numel();
  if (n == 0) return out;
  const int r = ix.rank;
  const int es = c.out.esize;
  unsigned char* const out0 =
      out.data() + (static_cast<const unsigned char*>(o.data) - c.out.base());
  const auto* self0 = static_cast<const unsigned char*>(s.data);
  const int64_t dim = c.dim;
  const int64_t hi = r > 0 ? s.sizes[dim] : 1;
  const int64_t sds = r > 0 ? s.strides[dim] : 0;
  std::vector<int64_t> coord(static_cast<size_t>(r), 0);
  int64_t oo = 0, io = 0, so = 0;  // element offsets; so leaves out `dim`
  for (int64_t lin = 0; lin < n; ++lin) {
    const int64_t v = swt::read_index(ix, io);
    if (v >= 0 && v < hi)
      std::memcpy(out0 + oo * es, self0 + (so + v * sds) * es, static_cast<size_t>(es));
    else if (bad)
      ++*bad;
    for (int d = r - 1; d >= 0; --d) {  // odometer, last dim fastest
      const int64_t ss = d == dim ? 0 : s.strides[d];
      if (++coord[static_cast<size_t>(d)] < ix.sizes[d]) {
        oo += o.strides[d];
        io += ix.strides[d];
        so += ss;
        break;
      }
      coord[static_cast<size_t>(d)] = 0;
      oo -= (ix.sizes[d] - 1) * o.strides[d];
      io -= (ix.sizes[d] - 1) * ix.strides[d];
      so -= (ix.sizes[d] - 1) * ss;
    }
  }
  return out;
}

swt::GatherCase make_case(swt::Rng& rng, stridewise::DType dt, stridewise::DType it, int64_t dim,
                          std::vector<int64_t> ssz, std::vector<int64_t> sst, int64_t soff,
                          std::vector<int64_t> isz, std::vector<int64_t> ist,
                          std::vector<int64_t> ost, int64_t ooff) {
  swt::GatherCase c;
  c.dim = dim;
  c.self = swt::make_tensor(dt, ssz, sst, soff);
  c.index = swt::make_tensor(it, isz, ist, 0);
  c.out = swt::make_tensor(dt, isz, ost, ooff);
  swt::fill_random_bytes(rng, c.self);
  const int64_t hi = ssz.empty() ? 1 : ssz[static_cast<size_t>(dim)];
  swt::fill_index(rng, c.index, 0, std::max<int64_t>(hi - 1, 0));
  swt::poison(c.out);
  return c;
}

void rows_path_cases(
    swt::Rng& rng, const std::function<void(swt::GatherCase&, size_t, const std::string&)>& visit) {
  using stridewise::DType;
  const int64_t B = 3, N = 5, K = 4;
  const int64_t row_lens[] = {1, 2, 3, 7, 8, 24, 64, 100, 384, 1024, 4100};
  for (DType dt : kDataTypes) {
    const int es = stridewise::elem_size(dt);
    for (int64_t D : row_lens) {
      for (int64_t pad : {int64_t(0), int64_t(1), int64_t(8)}) {
        const int64_t soff = pad == 1 ? 1 : 0;  // storage offset lowers self's alignment
        swt::GatherCase c =
            make_case(rng, dt, pad == 8 ? DType::kInt32 : DType::kInt64, 1, {B, N, D},
                      {N * D, D, 1}, soff, {B, K, D}, {K, 1, 0}, {K * (D + pad), D + pad, 1}, pad);
        const std::string what = std::string(stridewise::dtype_name(dt)) + " D " +
                                 std::to_string(D) + " pad " + std::to_string(pad);
        // Shifted first: a host emulation writes the unshifted case's out in place.
        const size_t shift = es > 1 ? size_t(es) / 2 : 0;  // breaks element alignment
        if (shift) visit(c, shift, what + " shift " + std::to_string(shift));
        visit(c, 0, what);
      }
    }
  }
}

int64_t plant_bad_value(swt::Rng& rng, swt::GatherCase& c) {
  const int64_t n = static_cast<int64_t>(c.index.storage_bytes() / c.index.esize);
  if (c.index.view.numel() == 0 || n == 0) return 0;
  const int64_t hi = c.self.view.rank > 0 ? c.self.view.sizes[c.dim] : 1;
  const int64_t value =
      swt::coin(rng, 0.5) ? -1 - swt::rand_int(rng, 0, 3) : hi + swt::rand_int(rng, 0, 3);
  stridewise::StridedView base = c.index.view;
  base.data = c.index.base();
  swt::write_index(base, swt::rand_int(rng, 0, n - 1), value);
  int64_t bad = 0;
  (void)reference_out(c, &bad);
  return bad;
}

namespace {

// Strides of a dense tensor whose dims are laid out in `order` (outermost first), each
// dim's run padded by `pad` elements.
std::vector<int64_t> dense_strides(const std::vector<int64_t>& sizes, const std::vector<int>& order,
                                   int64_t pad) {
  std::vector<int64_t> st(sizes.size(), 0);
  int64_t acc = 1;
  for (size_t i = order.size(); i-- > 0;) {
    st[static_cast<size_t>(order[i])] = acc;
    acc *= sizes[static_cast<size_t>(order[i])] + (i + 1 == order.size() ? pad : 0);
  }
  return st;
}

// A random order of 0..r-1 with `inner` last (innermost) and, when outer >= 0, `outer` first.
std::vector<int> order_with(swt::Rng& rng, int r, int inner, int outer) {
  std::vector<int> rest;
  for (int d = 0; d < r; ++d)
    if (d != inner && d != outer) rest.push_back(d);
  for (size_t i = rest.size(); i > 1; --i)
    std::swap(rest[i - 1], rest[static_cast<size_t>(swt::rand_int(rng, 0, int64_t(i) - 1))]);
  std::vector<int> o;
  if (outer >= 0) o.push_back(outer);
  o.insert(o.end(), rest.begin(), rest.end());
  o.push_back(inner);
  return o;
}

}  // namespace

void tile_path_cases(swt::Rng& rng, int count,
                     const std::function<void(swt::GatherCase&, const std::string&)>& visit) {
  using stridewise::DType;
  for (int i = 0; i < count; ++i) {
    const int r = static_cast<int>(swt::rand_int(rng, 2, 4));
    const int a = static_cast<int>(swt::rand_int(rng, 0, r - 1));
    int k = static_cast<int>(swt::rand_int(rng, 0, r - 2));
    if (k >= a) ++k;
    std::vector<int64_t> isz(static_cast<size_t>(r));
    for (int d = 0; d < r; ++d)
      isz[d] = d == a || d == k ? swt::rand_int(rng, 32, 90) : swt::rand_int(rng, 1, 3);
    const int64_t dim = swt::rand_int(rng, 0, r - 1);
    std::vector<int64_t> ssz = isz;
    ssz[static_cast<size_t>(dim)] += swt::rand_int(rng, 0, 20);
    if (ssz[static_cast<size_t>(dim)] == 0) ssz[static_cast<size_t>(dim)] = 1;
    // out: a innermost; index: k innermost and a outermost (a large stride along a).
    const std::vector<int64_t> ost =
        dense_strides(isz, order_with(rng, r, a, -1), swt::coin(rng, 0.3) ? 3 : 0);
    const std::vector<int64_t> ist = dense_strides(isz, order_with(rng, r, k, a), 0);
    const int s_inner = static_cast<int>(swt::rand_int(rng, 0, r - 1));
    const std::vector<int64_t> sst = dense_strides(ssz, order_with(rng, r, s_inner, -1), 0);
    const DType dt = kDataTypes[swt::rand_int(rng, 0, 4)];
    const DType it = swt::coin(rng, 0.5) ? DType::kInt64 : DType::kInt32;
    swt::GatherCase c = make_case(rng, dt, it, dim, ssz, sst, swt::rand_int(rng, 0, 3), isz, ist,
                                  ost, swt::rand_int(rng, 0, 2));
    visit(c, "tile case " + std::to_string(i));
  }
}

std::string status_str(Status s, const ErrorDetail& e) {
  return std::string(stridewise::status_name(s)) + " (" + e.message + ")";
}

::testing::AssertionResult gather_matches(const swt::GatherCase& c, cudaStream_t stream,
                                          uint64_t seed, size_t out_shift, size_t self_shift) {
  const std::string where = "\n  case: " + c.describe() + "\n  shifts: out " +
                            std::to_string(out_shift) + " self " + std::to_string(self_shift) +
                            " bytes; STRIDEWISE_TEST_SEED=" + std::to_string(seed);
  DeviceCase d(c, out_shift, self_shift);
  if (d.status() != cudaSuccess)
    return ::testing::AssertionFailure()
           << "device copy: " << cudaGetErrorString(d.status()) << where;
  ErrorDetail e;
  stridewise::GatherPlan plan;  // the plan-taking form, as the adapter calls it
  Status st = stridewise::plan_gather(d.args(), &plan, &e);
  if (st == Status::kOk) st = stridewise::gather_cuda(d.args(), plan, stream, &e);
  if (st != Status::kOk)
    return ::testing::AssertionFailure() << "gather_cuda: " << status_str(st, e) << where;
  const cudaError_t ce = cudaStreamSynchronize(stream);
  if (ce != cudaSuccess)
    return ::testing::AssertionFailure() << "sync: " << cudaGetErrorString(ce) << where;
  st = stridewise::cuda_poll_errors(-1, nullptr, &e);
  if (st != Status::kOk)
    return ::testing::AssertionFailure() << "poll: " << status_str(st, e) << where;
  const std::vector<unsigned char> got = d.out.download();
  const std::vector<unsigned char> want = reference_out(c);
  const std::string diff = swt::diff_bytes(got.data(), want.data(), want.size());
  if (!diff.empty()) return ::testing::AssertionFailure() << diff << where;
  return ::testing::AssertionSuccess();
}

void CudaTest::SetUp() {
  SWCT_REQUIRE_DEVICE();
  ASSERT_EQ(cudaGetDevice(&device_), cudaSuccess);
  ASSERT_EQ(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking), cudaSuccess);
  seed_ = swt::test_seed();
  ErrorDetail e;
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  (void)stridewise::cuda_poll_errors(device_, nullptr, &e);  // start from a clear record
}

void CudaTest::TearDown() {
  if (stream_ == nullptr) return;
  EXPECT_EQ(cudaStreamSynchronize(stream_), cudaSuccess);
  ErrorDetail e;
  const Status st = stridewise::cuda_poll_errors(device_, nullptr, &e);
  EXPECT_EQ(st, Status::kOk) << "error record left pending: " << status_str(st, e);
  EXPECT_EQ(cudaStreamDestroy(stream_), cudaSuccess);
  EXPECT_EQ(cudaGetLastError(), cudaSuccess);
}

}  // namespace swct
