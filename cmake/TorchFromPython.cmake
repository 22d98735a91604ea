# Finds torch through a Python interpreter instead of find_package(Torch): Caffe2's CMake
# config re-detects CUDA on its own terms and breaks on toolkits newer than the one torch was
# built with. We only need headers, libraries and the C++ ABI flag.
#
# Used by the project's own build and by the installed stridewiseConfig.cmake, so a consumer
# compiles against the same torch the Python package runs with.
#
# In:  SW_TORCH_PYTHON (optional) the interpreter whose torch to use; else Python3_EXECUTABLE
#      (found here when not set).
# Out: SW_TORCH_FOUND, SW_TORCH_VERSION, SW_TORCH_CUDA_VERSION ("" for a CPU torch),
#      SW_TORCH_CXX11_ABI (0/1), SW_TORCH_LIBDIR, SW_TORCH_PYTHON (the interpreter that worked),
#      the IMPORTED INTERFACE targets sw::torch (c10 + torch_cpu) and, when torch has CUDA and
#      CUDA::cudart exists, sw::torch_cuda. A failure leaves SW_TORCH_FOUND OFF and the reason in
#      SW_TORCH_ERROR.
if(NOT SW_TORCH_PYTHON)
  if(NOT Python3_EXECUTABLE)
    find_package(Python3 COMPONENTS Interpreter REQUIRED)
  endif()
  set(SW_TORCH_PYTHON "${Python3_EXECUTABLE}")
endif()

set(_sw_torch_probe
    "import torch, torch.utils.cpp_extension as c; print(torch.__version__); print(','.join(c.include_paths())); print(c.library_paths()[0]); print(int(torch.compiled_with_cxx11_abi())); print(torch.version.cuda or 'none')")
execute_process(COMMAND "${SW_TORCH_PYTHON}" -c "${_sw_torch_probe}"
                OUTPUT_VARIABLE _sw_torch_out RESULT_VARIABLE _sw_torch_rc
                ERROR_VARIABLE _sw_torch_err OUTPUT_STRIP_TRAILING_WHITESPACE)
if(NOT _sw_torch_rc EQUAL 0 AND DEFINED ENV{PYTHONPATH})
  # pip's isolated build environment hides the target environment's site-packages through
  # PYTHONPATH (a sitecustomize); -I ignores it, so the build uses the torch that the package
  # will be installed beside, and build isolation never needs a second torch.
  execute_process(COMMAND "${SW_TORCH_PYTHON}" -I -c "${_sw_torch_probe}"
                  OUTPUT_VARIABLE _sw_torch_out RESULT_VARIABLE _sw_torch_rc
                  ERROR_VARIABLE _sw_torch_err OUTPUT_STRIP_TRAILING_WHITESPACE)
  if(_sw_torch_rc EQUAL 0)
    message(STATUS "stridewise: torch not importable with this PYTHONPATH (an isolated build "
                   "environment); found with ${SW_TORCH_PYTHON} -I")
  endif()
endif()

set(SW_TORCH_FOUND OFF)
if(NOT _sw_torch_rc EQUAL 0)
  string(REGEX REPLACE ".*\n([^\n]+)\n?$" "\\1" _sw_torch_err "${_sw_torch_err}")
  set(SW_TORCH_ERROR "${SW_TORCH_PYTHON} could not import torch (${_sw_torch_err})")
  return()
endif()

string(REPLACE "\n" ";" _sw_lines "${_sw_torch_out}")
list(GET _sw_lines 0 SW_TORCH_VERSION)
list(GET _sw_lines 1 _sw_inc)
list(GET _sw_lines 2 SW_TORCH_LIBDIR)
list(GET _sw_lines 3 SW_TORCH_CXX11_ABI)
list(GET _sw_lines 4 SW_TORCH_CUDA_VERSION)
if(SW_TORCH_CUDA_VERSION STREQUAL "none")
  set(SW_TORCH_CUDA_VERSION "")
endif()
string(REPLACE "," ";" _sw_inc "${_sw_inc}")

if(NOT TARGET sw::torch)
  add_library(sw::torch INTERFACE IMPORTED GLOBAL)
  # Full paths, not -L/-l: a consumer's link and its run-time search path both come from them.
  set_target_properties(sw::torch PROPERTIES
    INTERFACE_INCLUDE_DIRECTORIES "${_sw_inc}"
    INTERFACE_COMPILE_DEFINITIONS "_GLIBCXX_USE_CXX11_ABI=${SW_TORCH_CXX11_ABI}"
    INTERFACE_LINK_LIBRARIES "${SW_TORCH_LIBDIR}/libc10.so;${SW_TORCH_LIBDIR}/libtorch_cpu.so")
endif()
if(SW_TORCH_CUDA_VERSION AND TARGET CUDA::cudart AND NOT TARGET sw::torch_cuda)
  add_library(sw::torch_cuda INTERFACE IMPORTED GLOBAL)
  set_target_properties(sw::torch_cuda PROPERTIES INTERFACE_LINK_LIBRARIES
    "sw::torch;${SW_TORCH_LIBDIR}/libc10_cuda.so;${SW_TORCH_LIBDIR}/libtorch_cuda.so;CUDA::cudart")
endif()
set(SW_TORCH_FOUND ON)
unset(_sw_torch_probe)
unset(_sw_torch_out)
unset(_sw_torch_err)
unset(_sw_lines)
unset(_sw_inc)
