// The float16 <-> float32 conversions of elem_types.h on the device (the cvt instructions,
// NaNs by the portable bit code) against the same functions on the host (the portable code),
// bit for bit: every float16 pattern to float32, and to float16 every float32 that rounds
// near a float16 boundary (each float16 value, the midpoints between neighbours and one ulp
// either side of both), the overflow threshold, NaNs with payloads and random floats.
#include <cuda_runtime.h>

#include <cstdint>
#include <cstring>
#include <random>
#include <vector>

#include "common/elem_types.h"
#include "cuda_test_util.h"

namespace swct {
namespace {

namespace el = stridewise::elem;

__global__ void widen_kernel(const uint16_t* in, float* out, int n) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) out[i] = el::f16_to_float(in[i]);
}

__global__ void narrow_kernel(const float* in, uint16_t* out, int n) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) out[i] = el::float_to_f16(in[i]);
}

uint32_t bits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
}
float from_bits(uint32_t u) {
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

template <typename In, typename Out, typename K>
std::vector<Out> run_on_device(K kernel, const std::vector<In>& in) {
  const int n = static_cast<int>(in.size());
  In* d_in = nullptr;
  Out* d_out = nullptr;
  EXPECT_EQ(cudaMalloc(&d_in, n * sizeof(In)), cudaSuccess);
  EXPECT_EQ(cudaMalloc(&d_out, n * sizeof(Out)), cudaSuccess);
  EXPECT_EQ(cudaMemcpy(d_in, in.data(), n * sizeof(In), cudaMemcpyHostToDevice), cudaSuccess);
  EXPECT_EQ(cudaMemset(d_out, 0xA5, n * sizeof(Out)), cudaSuccess);  // poison
  kernel<<<(n + 255) / 256, 256>>>(d_in, d_out, n);
  EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  std::vector<Out> out(in.size());
  EXPECT_EQ(cudaMemcpy(out.data(), d_out, n * sizeof(Out), cudaMemcpyDeviceToHost), cudaSuccess);
  cudaFree(d_in);
  cudaFree(d_out);
  return out;
}

TEST(HalfConversions, EveryFloat16ToFloat32) {
  SWCT_REQUIRE_DEVICE();
  std::vector<uint16_t> in(65536);
  for (uint32_t h = 0; h < 65536; ++h) in[h] = static_cast<uint16_t>(h);
  const std::vector<float> got = run_on_device<uint16_t, float>(widen_kernel, in);
  int bad = 0;
  for (uint32_t h = 0; h < 65536; ++h) {
    const uint32_t want = bits(el::f16_to_float(in[h]));
    if (bits(got[h]) != want && ++bad <= 5)
      ADD_FAILURE() << "float16 0x" << std::hex << h << ": device 0x" << bits(got[h]) << ", host 0x"
                    << want;
  }
  EXPECT_EQ(bad, 0);
}

TEST(HalfConversions, Float32ToFloat16AtEveryBoundary) {
  SWCT_REQUIRE_DEVICE();
  std::vector<float> in;
  for (uint32_t h = 0; h < 0x7c00u; ++h) {  // every finite magnitude, both signs
    const uint32_t v = bits(el::f16_to_float(static_cast<uint16_t>(h)));
    const uint32_t next = bits(el::f16_to_float(static_cast<uint16_t>(h + 1)));
    const uint32_t mid = bits((from_bits(v) + from_bits(next)) / 2);  // exact in float32
    for (uint32_t u : {v, v + 1, v - (v > 0), mid, mid - 1, mid + 1})
      for (uint32_t s : {0u, 0x80000000u}) in.push_back(from_bits(u | s));
  }
  for (uint32_t u :
       {0x477fe000u, 0x477fefffu, 0x477ff000u, 0x477ff001u, 0x7f7fffffu, 0x7f800000u, 0x7f800001u,
        0x7fc00000u, 0x7fc12345u, 0x7fbfffffu, 0x33000000u, 0x33000001u, 0x32ffffffu, 0x00000001u})
    for (uint32_t s : {0u, 0x80000000u}) in.push_back(from_bits(u | s));
  std::mt19937 rng(std::random_device{}());
  for (int i = 0; i < (1 << 20); ++i) in.push_back(from_bits(static_cast<uint32_t>(rng())));
  const std::vector<uint16_t> got = run_on_device<float, uint16_t>(narrow_kernel, in);
  int bad = 0;
  for (size_t i = 0; i < in.size(); ++i) {
    const uint16_t want = el::float_to_f16(in[i]);
    if (got[i] != want && ++bad <= 5)
      ADD_FAILURE() << "float32 0x" << std::hex << bits(in[i]) << ": device 0x" << got[i]
                    << ", host 0x" << want;
  }
  EXPECT_EQ(bad, 0) << "of " << in.size();
}

}  // namespace
}  // namespace swct
