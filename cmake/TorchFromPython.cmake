# Finds torch through the python3 that will load the adapter, instead of find_package(Torch):
# Caffe2's CMake config re-detects CUDA on its own terms and breaks on toolkits newer than
# the one torch was built with. We only need headers, libraries and the ABI flag.
#
# Defines SW_TORCH_FOUND, the INTERFACE target sw::torch (and sw::torch_cuda when torch has
# CUDA), SW_TORCH_VERSION and SW_TORCH_HAS_CUDA.
find_package(Python3 COMPONENTS Interpreter REQUIRED)
execute_process(
  COMMAND ${Python3_EXECUTABLE} -c
    "import torch, torch.utils.cpp_extension as c; print(torch.__version__); print(','.join(c.include_paths())); print(c.library_paths()[0]); print(int(torch.compiled_with_cxx11_abi())); print(torch.version.cuda or 'none')"
  OUTPUT_VARIABLE _sw_torch_out
  RESULT_VARIABLE _sw_torch_rc
  ERROR_QUIET OUTPUT_STRIP_TRAILING_WHITESPACE)
set(SW_TORCH_FOUND OFF)
if(_sw_torch_rc EQUAL 0)
  string(REPLACE "\n" ";" _sw_lines "${_sw_torch_out}")
  list(GET _sw_lines 0 SW_TORCH_VERSION)
  list(GET _sw_lines 1 _sw_inc)
  list(GET _sw_lines 2 _sw_libdir)
  list(GET _sw_lines 3 _sw_abi)
  list(GET _sw_lines 4 SW_TORCH_CUDA_VERSION)
  if(SW_TORCH_CUDA_VERSION STREQUAL "none")
    set(SW_TORCH_CUDA_VERSION "")
  endif()
  string(REPLACE "," ";" _sw_inc "${_sw_inc}")
  add_library(sw_torch INTERFACE)
  add_library(sw::torch ALIAS sw_torch)
  target_include_directories(sw_torch SYSTEM INTERFACE ${_sw_inc})
  target_compile_definitions(sw_torch INTERFACE _GLIBCXX_USE_CXX11_ABI=${_sw_abi})
  target_link_directories(sw_torch INTERFACE ${_sw_libdir})
  target_link_libraries(sw_torch INTERFACE c10 torch_cpu)
  set(SW_TORCH_LIBDIR ${_sw_libdir})
  set(SW_TORCH_HAS_CUDA OFF)
  if(SW_TORCH_CUDA_VERSION AND SW_HAVE_CUDA)
    set(SW_TORCH_HAS_CUDA ON)
    add_library(sw_torch_cuda INTERFACE)
    add_library(sw::torch_cuda ALIAS sw_torch_cuda)
    target_link_libraries(sw_torch_cuda INTERFACE sw_torch c10_cuda torch_cuda CUDA::cudart)
  endif()
  set(SW_TORCH_FOUND ON)
  message(STATUS "stridewise: torch ${SW_TORCH_VERSION} (CUDA: '${SW_TORCH_CUDA_VERSION}') at ${_sw_libdir}")
else()
  message(STATUS "stridewise: python3 could not import torch; the adapter is not built")
endif()
