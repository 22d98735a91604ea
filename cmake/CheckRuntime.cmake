# Post-build check of a shared library that is loaded into a process which already has its
# own C++ and CUDA runtimes (python + torch). Script mode:
#
#   cmake -DLIB=<library> -DNM=<nm> -DOBJDUMP=<objdump> [-DCUDA=ON] -P CheckRuntime.cmake
#
# Fails (and renames LIB to LIB.rejected, so that nothing can load a library that a failed
# build left behind, and the next build relinks it) when:
#  - C++ runtime internals are defined inside LIB: a static libstdc++ was linked in. Those
#    private copies (locale facets, iostream inserters) mix with the process's libstdc++.so.6
#    and crash (seen on the H200 image, 2026-11-29 and 2026-12-01: SIGSEGV in
#    std::basic_ostream::_M_insert<long> defined inside libstridewise_torch.so);
#  - LIB does not depend on libstdc++.so.6;
#  - with CUDA=ON: the CUDA runtime is defined inside LIB (cudart_static linked in), or LIB
#    does not depend on the shared libcudart.so.<major> that torch loads.
# Markers are symbols the runtime archives define and a normal build only references: the
# explicit instantiations of libstdc++ (extern templates in its headers) and cudart's API.
# tests/cmake/ plants both faults (-static-libstdc++, cudart_static) and expects this to fire.
foreach(var LIB NM OBJDUMP)
  if(NOT DEFINED ${var})
    message(FATAL_ERROR "CheckRuntime.cmake: ${var} is not set")
  endif()
endforeach()

execute_process(COMMAND "${NM}" --defined-only "${LIB}" OUTPUT_VARIABLE _static ERROR_QUIET)
execute_process(COMMAND "${NM}" -D --defined-only "${LIB}" OUTPUT_VARIABLE _dynamic
                RESULT_VARIABLE _nm_rc ERROR_QUIET)
execute_process(COMMAND "${OBJDUMP}" -p "${LIB}" OUTPUT_VARIABLE _headers
                RESULT_VARIABLE _od_rc ERROR_QUIET)
set(_defined "${_static}\n${_dynamic}")

set(_problems "")
if(NOT _nm_rc EQUAL 0 OR NOT _od_rc EQUAL 0)
  list(APPEND _problems "could not read the library with ${NM} / ${OBJDUMP}")
endif()
# Mangled, so the check does not depend on how a binutils version demangles them:
# std::ostream::_M_insert<long>, std::codecvt<char16_t, char, mbstate_t>, std::locale::classic.
foreach(marker _ZNSo9_M_insertIlEERSoT_ _ZNSt7codecvtIDsc11__mbstate_tE _ZNSt6locale7classicEv)
  string(FIND "${_defined}" "${marker}" _at)
  if(NOT _at EQUAL -1)
    list(APPEND _problems "defines the C++ runtime's ${marker} (a static libstdc++ was linked in)")
  endif()
endforeach()
if(NOT _headers MATCHES "NEEDED +libstdc\\+\\+\\.so\\.6")
  list(APPEND _problems "does not depend on libstdc++.so.6")
endif()
if(CUDA)
  if(_defined MATCHES "[TtWw] cudaGetDevice\n")
    list(APPEND _problems "defines the CUDA runtime's cudaGetDevice (cudart_static was linked in)")
  endif()
  if(NOT _headers MATCHES "NEEDED +libcudart\\.so\\.[0-9]+")
    list(APPEND _problems "does not depend on the shared CUDA runtime libcudart.so.<major>")
  endif()
endif()

if(_problems)
  file(RENAME "${LIB}" "${LIB}.rejected")
  string(REPLACE ";" "\n  - " _list "${_problems}")
  message(FATAL_ERROR "stridewise: ${LIB} fails the runtime check (renamed to ${LIB}.rejected, "
                      "see cmake/CudaHostLink.cmake and cmake/StdcxxRuntime.cmake):\n  - ${_list}")
endif()
message(STATUS "stridewise: runtime check passed for ${LIB}")
