# sw_use_shared_stdcxx(TARGET): make sure TARGET (a shared library loaded into python) takes
# every C++ runtime symbol from the process's shared libstdc++.so.6.
#
# Why: some GCC installs have no shared libstdc++ to link against, so -lstdc++ takes the
# static archive and copies parts of the runtime (locale facets, iostreams) into the .so, where
# they mix with the interpreter's libstdc++.so.6 at run time. The GPU image's /opt/gcc (the
# default CXX there) is one: `g++ -print-file-name=libstdc++.so` finds nothing, only
# libstdc++.a, and its specs add -Bsymbolic for shared objects, so our calls bind to those
# copies. Seen 2026-11-29: formatting an integer into a TORCH_CHECK message segfaulted in
# std::basic_ostream::_M_insert<long> defined inside libstridewise_torch.so. Devtoolset-style
# installs (manylinux) do the same through a linker script `INPUT(libstdc++.so.6
# -lstdc++_nonshared)`.
# Remedy: link the runtime's own libstdc++.so.6 (the one `python3 -c 'import torch'` maps)
# ahead of the compiler's default -lstdc++, so no archive member is needed. A post-build check
# (sw_check_runtime, cmake/CheckRuntime.cmake) fails the build and renames the library if
# runtime internals still ended up in it.
# sw_use_shared_stdcxx(TARGET [NO_CUDA]): NO_CUDA for a library that never touches CUDA (the
# runtime check then does not ask for the shared CUDA runtime).
function(sw_use_shared_stdcxx target)
  execute_process(
    COMMAND ${CMAKE_CXX_COMPILER} -print-file-name=libstdc++.so
    OUTPUT_VARIABLE _link_stdcxx OUTPUT_STRIP_TRAILING_WHITESPACE ERROR_QUIET)
  set(_script OFF)
  if(NOT IS_ABSOLUTE "${_link_stdcxx}" OR NOT EXISTS "${_link_stdcxx}")
    set(_script ON)  # no shared libstdc++ at all: -lstdc++ would take libstdc++.a
  else()
    file(READ "${_link_stdcxx}" _head LIMIT 4096 HEX)
    # A linker script is text starting with "/* " or "INPUT"/"GROUP"; an ELF starts 7f454c46.
    if(NOT _head MATCHES "^7f454c46")
      set(_script ON)
    endif()
  endif()
  if(_script)
    execute_process(
      COMMAND ${Python3_EXECUTABLE} -c
        "import torch\nfor l in open('/proc/self/maps'):\n    if 'libstdc++.so' in l:\n        print(l.split()[-1]); break"
      OUTPUT_VARIABLE _runtime_stdcxx OUTPUT_STRIP_TRAILING_WHITESPACE ERROR_QUIET)
    if(EXISTS "${_runtime_stdcxx}")
      message(STATUS "stridewise: no plain shared libstdc++ to link ('${_link_stdcxx}'); "
                     "linking ${_runtime_stdcxx} first")
      target_link_libraries(${target} PRIVATE "${_runtime_stdcxx}")
    else()
      message(WARNING "stridewise: no plain shared libstdc++ to link ('${_link_stdcxx}') and the "
                      "runtime libstdc++ was not found; C++ runtime parts may be copied into ${target}")
    endif()
  endif()
  sw_check_runtime(${target} ${ARGN})
endfunction()

# sw_check_runtime(TARGET): after every link of TARGET, run cmake/CheckRuntime.cmake on it
# (one C++ runtime and, with CUDA, one CUDA runtime in the process; else the library is
# renamed to *.rejected and the build fails).
function(sw_check_runtime target)
  set(_cuda OFF)
  if(SW_HAVE_CUDA AND NOT "NO_CUDA" IN_LIST ARGN)
    set(_cuda ON)
  endif()
  if(NOT CMAKE_NM OR NOT CMAKE_OBJDUMP)
    message(FATAL_ERROR "stridewise: nm and objdump (binutils) are needed for the runtime check")
  endif()
  add_custom_command(TARGET ${target} POST_BUILD
    COMMAND ${CMAKE_COMMAND} -DLIB=$<TARGET_FILE:${target}> -DNM=${CMAKE_NM}
            -DOBJDUMP=${CMAKE_OBJDUMP} -DCUDA=${_cuda} -P ${PROJECT_SOURCE_DIR}/cmake/CheckRuntime.cmake
    VERBATIM)
endfunction()
