// The sorted paths' one radix sort (scatter_cuda.cu, index_k_cuda.cu): CUB's stable
// DeviceRadixSort::SortPairs over the DoubleBuffers of sort_space.h's layout. Device TUs only
// (includes CUB).
#pragma once

#include <cuda_runtime.h>

#include <cub/device/device_radix_sort.cuh>

namespace stridewise {
namespace cuda_common {

// Sorts n (key, value) pairs by key bits [0, end_bit) from keys[0]/vals[0], the other
// buffers CUB's to use. temp == nullptr: the size query (*bytes receives CUB's temporary
// bytes; host only, nothing launched). *sel: the buffer (0 or 1) holding the sorted pairs,
// which CUB decides on the host; -1 if keys and values ended apart (never, by CUB's contract).
template <typename K, typename V, typename N>
cudaError_t radix_sort_pairs(void* temp, size_t* bytes, K* const (&keys)[2], V* const (&vals)[2],
                             N n, int end_bit, cudaStream_t stream, int* sel) {
  cub::DoubleBuffer<K> k(keys[0], keys[1]);
  cub::DoubleBuffer<V> v(vals[0], vals[1]);
  const cudaError_t e = cub::DeviceRadixSort::SortPairs(temp, *bytes, k, v, n, 0, end_bit, stream);
  *sel = k.selector == v.selector ? k.selector : -1;
  return e;
}

}  // namespace cuda_common
}  // namespace stridewise
