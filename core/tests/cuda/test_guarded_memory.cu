// Guarded device memory: the seed's expanded index (4 stored int64 values viewed as
// (4,1,384), strides (1,1,0)) is placed so its storage ends exactly at the end of a mapped
// range whose next granule is reserved but unmapped (CUDA virtual memory management), so
// any read past the 4 values faults. gather_cuda must succeed there; a planted kernel with
// the seed's bug (index[linear], the index read as if contiguous) must die with an illegal
// address -- in a child process (gtest "threadsafe" death test: the test binary is
// re-executed), while this process's context stays usable.
//
// Driver entry points come through cudaGetDriverEntryPointByVersion, so the binary does
// not link libcuda and still starts (and skips) on machines without a driver.
// Under compute-sanitizer run with --gtest_filter=-*DeathTest*: the child's fault is the
// point of that test, and the sanitizer would report it.
#include <cuda.h>
#include <cudaTypedefs.h>
#include <cuda_runtime.h>
#include <unistd.h>

#include <cstdio>
#include <string>
#include <vector>

#include "cuda_test_util.h"

namespace swct {
namespace {

using stridewise::DType;
using stridewise::ErrorDetail;
using stridewise::GatherArgs;
using stridewise::Status;

template <typename F>
bool driver_entry(const char* name, F* fn, std::string* why) {
  void* p = nullptr;
  cudaDriverEntryPointQueryResult q = cudaDriverEntryPointSymbolNotFound;
  const cudaError_t e = cudaGetDriverEntryPointByVersion(name, &p, 12000, cudaEnableDefault, &q);
  if (e != cudaSuccess || q != cudaDriverEntryPointSuccess || p == nullptr) {
    *why = std::string("driver entry point ") + name + " unavailable";
    return false;
  }
  *fn = reinterpret_cast<F>(p);
  return true;
}

// `granules` granules of device memory mapped at the start of a VA reservation one granule
// longer: the first byte at end() is reserved but unmapped.
class GuardedDeviceRange {
 public:
  bool init(int device, size_t granules, std::string* why) {
    if (!driver_entry("cuMemGetAllocationGranularity", &granularity_, why) ||
        !driver_entry("cuMemAddressReserve", &reserve_, why) ||
        !driver_entry("cuMemCreate", &create_, why) || !driver_entry("cuMemMap", &map_, why) ||
        !driver_entry("cuMemSetAccess", &set_access_, why) ||
        !driver_entry("cuMemUnmap", &unmap_, why) ||
        !driver_entry("cuMemRelease", &release_, why) ||
        !driver_entry("cuMemAddressFree", &address_free_, why))
      return false;
    CUmemAllocationProp prop = {};
    prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
    prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    prop.location.id = device;
    size_t gran = 0;
    if (!ok(granularity_(&gran, &prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM), "granularity", why))
      return false;
    mapped_ = granules * gran;
    reserved_ = mapped_ + gran;
    if (!ok(reserve_(&va_, reserved_, gran, 0, 0), "cuMemAddressReserve", why)) return false;
    if (!ok(create_(&handle_, mapped_, &prop, 0), "cuMemCreate", why)) return false;
    have_handle_ = true;
    if (!ok(map_(va_, mapped_, 0, handle_, 0), "cuMemMap", why)) return false;
    is_mapped_ = true;
    CUmemAccessDesc access = {};
    access.location = prop.location;
    access.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
    return ok(set_access_(va_, mapped_, &access, 1), "cuMemSetAccess", why);
  }
  ~GuardedDeviceRange() {
    if (is_mapped_) unmap_(va_, mapped_);
    if (have_handle_) release_(handle_);
    if (va_) address_free_(va_, reserved_);
  }
  unsigned char* end() const { return reinterpret_cast<unsigned char*>(va_ + mapped_); }

 private:
  static bool ok(CUresult r, const char* what, std::string* why) {
    if (r == CUDA_SUCCESS) return true;
    *why = std::string(what) + " failed with CUresult " + std::to_string(static_cast<int>(r));
    return false;
  }
  PFN_cuMemGetAllocationGranularity_v10020 granularity_ = nullptr;
  PFN_cuMemAddressReserve_v10020 reserve_ = nullptr;
  PFN_cuMemCreate_v10020 create_ = nullptr;
  PFN_cuMemMap_v10020 map_ = nullptr;
  PFN_cuMemSetAccess_v10020 set_access_ = nullptr;
  PFN_cuMemUnmap_v10020 unmap_ = nullptr;
  PFN_cuMemRelease_v10020 release_ = nullptr;
  PFN_cuMemAddressFree_v10020 address_free_ = nullptr;
  CUdeviceptr va_ = 0;
  size_t reserved_ = 0, mapped_ = 0;
  CUmemGenericAllocationHandle handle_ = 0;
  bool have_handle_ = false, is_mapped_ = false;
};

constexpr int64_t kB = 4, kN = 16, kD = 384;
constexpr int64_t kIndexValues[4] = {15, 3, 0, 9};

// The 4 index values written so that their storage ends at g.end().
int64_t* place_index(const GuardedDeviceRange& g) {
  int64_t* idx = reinterpret_cast<int64_t*>(g.end()) - 4;
  if (cudaMemcpy(idx, kIndexValues, sizeof kIndexValues, cudaMemcpyHostToDevice) != cudaSuccess)
    return nullptr;
  return idx;
}

// The seed's kernel, transcribed: index[linear] treats the expanded index as contiguous.
// Index values are clamped so that the only out-of-bounds access is the index read itself.
__global__ void planted_flat_index_gather(const uint16_t* self, const int64_t* index, uint16_t* out,
                                          int64_t n) {
  const int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x;
  if (i >= n) return;
  int64_t v = index[i];  // the bug
  v = v < 0 ? 0 : (v >= kN ? kN - 1 : v);
  const int64_t b = i / kD, k = i % kD;
  out[i] = self[(b * kN + v) * kD + k];
}

constexpr int kPlantedFaulted = 3, kPlantedDidNotFault = 4, kPlantedSetupFailed = 5;

// Runs in the death-test child only; never returns.
void run_planted_and_exit(int device) {
  GuardedDeviceRange g;
  std::string why;
  void *self = nullptr, *out = nullptr;
  const int64_t* idx = nullptr;
  if (!g.init(device, 1, &why) || (idx = place_index(g)) == nullptr ||
      cudaMalloc(&self, kB * kN * kD * 2) != cudaSuccess ||
      cudaMalloc(&out, kB * kD * 2) != cudaSuccess) {
    std::fprintf(stderr, "planted setup failed: %s\n", why.c_str());
    _exit(kPlantedSetupFailed);
  }
  planted_flat_index_gather<<<(kB * kD + 255) / 256, 256>>>(static_cast<const uint16_t*>(self), idx,
                                                            static_cast<uint16_t*>(out), kB * kD);
  cudaError_t e = cudaGetLastError();
  if (e == cudaSuccess) e = cudaDeviceSynchronize();
  std::fprintf(stderr, "planted kernel: %s\n", cudaGetErrorString(e));
  _exit(e == cudaErrorIllegalAddress ? kPlantedFaulted : kPlantedDidNotFault);
}

using GuardedMemory = CudaTest;

TEST_F(GuardedMemory, GatherReadsOnlyTheExpandedIndexStorage) {
  GuardedDeviceRange g;
  std::string why;
  if (!g.init(device_, 1, &why)) GTEST_SKIP() << why;
  const int64_t* idx = place_index(g);
  ASSERT_NE(idx, nullptr);
  swt::Rng rng(seed_);

  // Rows kernel: the seed layout, self (4,16,384) fp16, dim 1.
  std::vector<uint16_t> self_h(size_t(kB * kN * kD)), out_h(size_t(kB * kD));
  for (auto& x : self_h) x = static_cast<uint16_t>(rng());
  void *self = nullptr, *out = nullptr;
  SWCT_CUDA_OK(cudaMalloc(&self, self_h.size() * 2));
  SWCT_CUDA_OK(cudaMalloc(&out, out_h.size() * 4));
  SWCT_CUDA_OK(cudaMemcpy(self, self_h.data(), self_h.size() * 2, cudaMemcpyHostToDevice));
  SWCT_CUDA_OK(cudaMemset(out, 0xAB, out_h.size() * 4));
  // Set-up ran on the legacy stream, which does not order the non-blocking stream_.
  SWCT_CUDA_OK(cudaDeviceSynchronize());
  GatherArgs a;
  a.dim = 1;
  a.self = stridewise::make_view(self, DType::kFloat16, {kB, kN, kD}, {kN * kD, kD, 1});
  a.index = stridewise::make_view(const_cast<int64_t*>(idx), DType::kInt64, {kB, 1, kD}, {1, 1, 0});
  a.out = stridewise::make_view(out, DType::kFloat16, {kB, 1, kD}, {kD, kD, 1});
  ErrorDetail e;
  ASSERT_EQ(stridewise::gather_cuda(a, stream_, &e), Status::kOk) << e.message;
  SWCT_CUDA_OK(cudaStreamSynchronize(stream_));
  ASSERT_EQ(stridewise::cuda_poll_errors(device_, nullptr, &e), Status::kOk) << e.message;
  SWCT_CUDA_OK(cudaMemcpy(out_h.data(), out, out_h.size() * 2, cudaMemcpyDeviceToHost));
  for (int64_t b = 0; b < kB; ++b)
    for (int64_t k = 0; k < kD; ++k)
      ASSERT_EQ(out_h[size_t(b * kD + k)], self_h[size_t((b * kN + kIndexValues[b]) * kD + k)])
          << "at (" << b << ", 0, " << k << ")";

  // Elems kernel over the same 4 values: index (384, 4) strides (0, 1), self (16, 4), dim 0.
  std::vector<float> s2(size_t(kN * 4)), o2(size_t(kD * 4));
  for (auto& x : s2) x = static_cast<float>(rng() % 1000);
  SWCT_CUDA_OK(cudaMemcpy(self, s2.data(), s2.size() * 4, cudaMemcpyHostToDevice));
  SWCT_CUDA_OK(cudaMemset(out, 0xAB, o2.size() * 4));
  // Set-up ran on the legacy stream, which does not order the non-blocking stream_.
  SWCT_CUDA_OK(cudaDeviceSynchronize());
  a.dim = 0;
  a.self = stridewise::make_view(self, DType::kFloat32, {kN, 4}, {4, 1});
  a.index = stridewise::make_view(const_cast<int64_t*>(idx), DType::kInt64, {kD, 4}, {0, 1});
  a.out = stridewise::make_view(out, DType::kFloat32, {kD, 4}, {4, 1});
  ASSERT_EQ(stridewise::gather_cuda(a, stream_, &e), Status::kOk) << e.message;
  SWCT_CUDA_OK(cudaStreamSynchronize(stream_));
  ASSERT_EQ(stridewise::cuda_poll_errors(device_, nullptr, &e), Status::kOk) << e.message;
  SWCT_CUDA_OK(cudaMemcpy(o2.data(), out, o2.size() * 4, cudaMemcpyDeviceToHost));
  for (int64_t i = 0; i < kD; ++i)
    for (int64_t j = 0; j < 4; ++j)
      ASSERT_EQ(o2[size_t(i * 4 + j)], s2[size_t(kIndexValues[j] * 4 + j)]) << i << ", " << j;
  cudaFree(out);
  cudaFree(self);
}

TEST(GuardedMemoryDeathTest, PlantedFlatIndexReadFaultsInChild) {
  SWCT_REQUIRE_DEVICE();
  int device = 0;
  ASSERT_EQ(cudaGetDevice(&device), cudaSuccess);
  {
    GuardedDeviceRange probe;
    std::string why;
    if (!probe.init(device, 1, &why)) GTEST_SKIP() << why;
  }
  GTEST_FLAG_SET(death_test_style, "threadsafe");  // re-exec: the child starts CUDA afresh
  EXPECT_EXIT(run_planted_and_exit(device), ::testing::ExitedWithCode(kPlantedFaulted),
              "illegal memory access");

  // This process never ran the planted kernel: its context still works.
  swt::Rng rng(swt::test_seed());
  swt::GatherCase c;
  c.dim = 1;
  c.self = swt::make_tensor(DType::kFloat16, {kB, kN, kD}, {kN * kD, kD, 1}, 0);
  c.index = swt::make_tensor(DType::kInt64, {kB, 1, kD}, {1, 1, 0}, 0);
  c.out = swt::make_tensor(DType::kFloat16, {kB, 1, kD}, {kD, kD, 1}, 0);
  swt::fill_random_bytes(rng, c.self);
  swt::fill_index(rng, c.index, 0, kN - 1);
  swt::poison(c.out);
  EXPECT_TRUE(gather_matches(c, nullptr, swt::test_seed()));
}

}  // namespace
}  // namespace swct
