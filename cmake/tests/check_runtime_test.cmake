# ctest driver for cmake/CheckRuntime.cmake: links cmake/tests/runtime_probe.cpp the right
# way and with each planted fault (a static libstdc++; the static CUDA runtime), then expects
# the check to pass on the first and to fail, naming the fault and renaming the library, on
# the others.
#   cmake -DCXX=<c++> -DNM=<nm> -DOBJDUMP=<objdump> -DWORK=<dir> [-DCUDA_INC=<dir>
#         -DCUDA_LIBDIR=<dir>] -P check_runtime_test.cmake
set(_here "${CMAKE_CURRENT_LIST_DIR}")
file(REMOVE_RECURSE "${WORK}")
file(MAKE_DIRECTORY "${WORK}")

set(_cuda OFF)
set(_cuda_flags "")
set(_shared_rt "")
set(_static_rt "")
if(CUDA_INC AND CUDA_LIBDIR)
  set(_cuda ON)
  set(_cuda_flags -DSW_PROBE_CUDA -I${CUDA_INC})
  set(_shared_rt -L${CUDA_LIBDIR} -lcudart)
  set(_static_rt -L${CUDA_LIBDIR} -lcudart_static -lrt -lpthread -ldl)
endif()

# name;expected substring of the failure ("" = must pass);extra link flags
set(_cases "good" "static_stdcxx" "static_cudart")
set(_good_flags ${_shared_rt})
set(_good_expect "")
set(_static_stdcxx_flags -static-libstdc++ ${_shared_rt})
set(_static_stdcxx_expect "a static libstdc++ was linked in")
set(_static_cudart_flags ${_static_rt})
set(_static_cudart_expect "cudart_static was linked in")

set(_failed "")
foreach(c IN LISTS _cases)
  if(c STREQUAL "static_cudart" AND NOT _cuda)
    continue()
  endif()
  set(lib "${WORK}/lib${c}.so")
  execute_process(
    COMMAND "${CXX}" -shared -fPIC -O1 ${_cuda_flags} "${_here}/runtime_probe.cpp" -o "${lib}"
            ${_${c}_flags}
    RESULT_VARIABLE rc ERROR_VARIABLE err)
  if(NOT rc EQUAL 0)
    list(APPEND _failed "${c}: probe did not link: ${err}")
    continue()
  endif()
  execute_process(
    COMMAND "${CMAKE_COMMAND}" -DLIB=${lib} -DNM=${NM} -DOBJDUMP=${OBJDUMP} -DCUDA=${_cuda}
            -P "${_here}/../CheckRuntime.cmake"
    RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  set(msg "${out}${err}")
  if(_${c}_expect STREQUAL "")
    if(NOT rc EQUAL 0 OR NOT EXISTS "${lib}")
      list(APPEND _failed "${c}: the check rejected a correctly linked library: ${msg}")
    endif()
  else()
    string(FIND "${msg}" "${_${c}_expect}" at)
    if(rc EQUAL 0)
      list(APPEND _failed "${c}: the check passed a library with the planted fault")
    elseif(at EQUAL -1)
      list(APPEND _failed "${c}: the check failed without naming the fault: ${msg}")
    elseif(EXISTS "${lib}" OR NOT EXISTS "${lib}.rejected")
      list(APPEND _failed "${c}: the rejected library was not renamed to ${lib}.rejected")
    endif()
  endif()
endforeach()

if(_failed)
  string(REPLACE ";" "\n" _failed "${_failed}")
  message(FATAL_ERROR "${_failed}")
endif()
message(STATUS "runtime check: good passes; planted faults caught (CUDA: ${_cuda})")
