# What `cmake --install` (and so the wheel) ships: the headers, stridewise::core (static) and
# stridewise::torch (the adapter), a CMake package config for find_package(stridewise CONFIG),
# and sw-compare.
#
# Two layouts from one set of rules:
# - plain install (cmake --install build --prefix P): P/include/stridewise, P/lib/lib*.{a,so},
#   P/lib/cmake/stridewise, P/bin/sw-compare;
# - wheel (scikit-build-core: SKBUILD set, prefix = site-packages/stridewise): the adapter and
#   build_info.json in _lib/ where the Python loader looks, include/, lib/, share/cmake/stridewise
#   (stridewise.cmake_prefix_path points at share/cmake, as torch.utils.cmake_prefix_path does),
#   and sw-compare in the environment's scripts directory (on PATH).
include(GNUInstallDirs)
include(CMakePackageConfigHelpers)

if(SKBUILD)
  set(SW_INSTALL_ADAPTERDIR _lib)
  set(SW_INSTALL_LIBDIR lib)
  set(SW_INSTALL_INCLUDEDIR include)
  set(SW_INSTALL_CMAKEDIR share/cmake/stridewise)
  set(SW_INSTALL_BINDIR ${SKBUILD_SCRIPTS_DIR})
else()
  set(SW_INSTALL_ADAPTERDIR ${CMAKE_INSTALL_LIBDIR})
  set(SW_INSTALL_LIBDIR ${CMAKE_INSTALL_LIBDIR})
  set(SW_INSTALL_INCLUDEDIR ${CMAKE_INSTALL_INCLUDEDIR})
  set(SW_INSTALL_CMAKEDIR ${CMAKE_INSTALL_LIBDIR}/cmake/stridewise)
  set(SW_INSTALL_BINDIR ${CMAKE_INSTALL_BINDIR})
endif()

install(DIRECTORY core/include/stridewise DESTINATION ${SW_INSTALL_INCLUDEDIR}
        FILES_MATCHING PATTERN "*.h" PATTERN "*.def")  # ops.def: the op table status.h includes
set(_sw_export_targets stridewise_core)
if(TARGET stridewise_torch)
  install(FILES adapter/include/stridewise/torch.h DESTINATION ${SW_INSTALL_INCLUDEDIR}/stridewise)
  install(FILES ${SW_LIB_DIR}/build_info.json DESTINATION ${SW_INSTALL_ADAPTERDIR})
  list(APPEND _sw_export_targets stridewise_torch)
endif()
install(TARGETS ${_sw_export_targets} EXPORT stridewiseTargets
        ARCHIVE DESTINATION ${SW_INSTALL_LIBDIR}
        LIBRARY DESTINATION ${SW_INSTALL_ADAPTERDIR}
        INCLUDES DESTINATION ${SW_INSTALL_INCLUDEDIR})
install(EXPORT stridewiseTargets NAMESPACE stridewise:: DESTINATION ${SW_INSTALL_CMAKEDIR})
if(TARGET sw-compare)
  install(TARGETS sw-compare RUNTIME DESTINATION ${SW_INSTALL_BINDIR})
endif()

# What the config must re-establish in the consumer: the torch this was built against (checked
# by major.minor and C++ ABI, then found again through Python), and the CUDA runtime when the
# core has CUDA kernels.
set(SW_CONFIG_HAS_TORCH OFF)
if(TARGET stridewise_torch)
  set(SW_CONFIG_HAS_TORCH ON)
endif()
set(SW_CONFIG_HAS_CUDA OFF)
if(SW_HAVE_CUDA)
  set(SW_CONFIG_HAS_CUDA ON)
endif()
configure_package_config_file(cmake/stridewiseConfig.cmake.in
  ${PROJECT_BINARY_DIR}/stridewiseConfig.cmake INSTALL_DESTINATION ${SW_INSTALL_CMAKEDIR})
write_basic_package_version_file(${PROJECT_BINARY_DIR}/stridewiseConfigVersion.cmake
  COMPATIBILITY SameMinorVersion)
install(FILES ${PROJECT_BINARY_DIR}/stridewiseConfig.cmake
              ${PROJECT_BINARY_DIR}/stridewiseConfigVersion.cmake
              cmake/TorchFromPython.cmake
        DESTINATION ${SW_INSTALL_CMAKEDIR})
unset(_sw_export_targets)
