# How CUDA code reaches the host link: one shared CUDA runtime, and no host-toolchain
# directories that belong to a compiler other than the one linking. Included once, right
# after enable_language(CUDA).
#
# Why. A target whose linker language is CXX but which links CUDA objects (the adapter, which
# takes the kernels from the static stridewise_core) gets CMake's CUDA implicit link
# information added to its link line: the runtime named by CMAKE_CUDA_RUNTIME_LIBRARY
# (default Static: -lcudadevrt -lcudart_static -lrt -lpthread -ldl) and every directory of
# CMAKE_CUDA_IMPLICIT_LINK_DIRECTORIES that is not implicit for CXX. CMake detects the latter
# by linking a probe through nvcc's host link launcher (CMAKE_CUDA_HOST_LINK_LAUNCHER) and
# reading its verbose output, so it holds *that* compiler's private directories. Seen on the
# H200 image (2026-12-01): the CXX compiler was /usr/bin/g++ but the link line carried
# -L/opt/gcc/bin -L/opt/gcc/lib/gcc/x86_64-linux-gnu/13 ... -L/opt/gcc/lib ahead of the
# system directories; /opt/gcc has only libstdc++.a, so g++'s own -lstdc++ took the archive
# and copied runtime internals into libstridewise_torch.so (SIGSEGV in
# std::basic_ostream::_M_insert<long> when an error message formatted an integer), and the
# same line linked both libcudart.so and -lcudart_static (two CUDA runtimes in one process).
#
# Remedy, at the cause:
#  - CMAKE_CUDA_RUNTIME_LIBRARY None: CMake adds no runtime of its own; stridewise_core links
#    CUDA::cudart (libcudart.so, by full path), as torch extensions do, so the process has one
#    runtime: the libcudart.so.<major> torch has already loaded. Nothing here uses relocatable
#    device code, so cudadevrt is not needed.
#  - CMAKE_CUDA_IMPLICIT_LINK_DIRECTORIES keeps only the toolkit's own library directories
#    (the ones nvcc itself passes, stubs excluded). The host C++ runtime and libgcc then come
#    from the directories of the compiler that links, as for any C++ target.
# The post-build check (cmake/CheckRuntime.cmake) verifies the result on the built library.
set(CMAKE_CUDA_RUNTIME_LIBRARY None)

set(_sw_keep "")
set(_sw_dropped "")
foreach(_dir IN LISTS CMAKE_CUDA_IMPLICIT_LINK_DIRECTORIES)
  if(_dir IN_LIST CMAKE_CUDA_HOST_IMPLICIT_LINK_DIRECTORIES AND NOT _dir MATCHES "/stubs/?$")
    list(APPEND _sw_keep "${_dir}")
  else()
    list(APPEND _sw_dropped "${_dir}")
  endif()
endforeach()
set(CMAKE_CUDA_IMPLICIT_LINK_DIRECTORIES "${_sw_keep}")
message(STATUS "stridewise: CUDA host link launcher ${CMAKE_CUDA_HOST_LINK_LAUNCHER}; "
               "CUDA implicit link directories kept: [${_sw_keep}]; dropped: [${_sw_dropped}]")
unset(_sw_keep)
unset(_sw_dropped)
