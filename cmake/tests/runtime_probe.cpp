// A library that formats an integer through iostreams and, when SW_PROBE_CUDA is defined,
// asks the CUDA runtime for the current device: the two runtime uses the adapter has.
#include <sstream>
#include <string>
#ifdef SW_PROBE_CUDA
#include <cuda_runtime_api.h>
#endif

extern "C" const char* sw_runtime_probe(long v) {
  static std::string s;
  std::ostringstream o;
  o << v;
#ifdef SW_PROBE_CUDA
  int device = -1;
  o << ' ' << static_cast<int>(cudaGetDevice(&device));
#endif
  s = o.str();
  return s.c_str();
}
