# cmake/install.cmake — `cmake --install`: headers, libraries and the CMake package of xgrad
# (included from the top-level CMakeLists.txt).
#
# What lands under the prefix P:
#   P/include/xgrad/{core,nn,optim}/*.hpp      the headers; a user includes "core/tensor.hpp",
#                                              "nn/nn.hpp", "optim/optim.hpp" as the examples do
#   P/lib/libxgrad.a, P/lib/libxgrad_f64.a     float32 and float64 builds of the same sources
#   P/lib/cmake/xgrad/                         xgradConfig.cmake, its version file, the targets
#
# Another project then writes
#     find_package(xgrad CONFIG REQUIRED)                  # with -DCMAKE_PREFIX_PATH=P
#     target_link_libraries(my_app PRIVATE xgrad::xgrad)   # or xgrad::xgrad_f64
# and gets the include path, C++17, and the flags every translation unit must share: xsimd
# (XTENSOR_USE_XSIMD changes xtensor's allocator), -march=native (xtensor::optimize),
# -mno-avx512f, and XGRAD_DOUBLE=1 for xgrad_f64. Those are usage requirements of the exported
# targets; the config file finds xtensor, BLAS (OpenBLAS), nlohmann_json and fmt again with
# find_dependency, since the static libraries need them at link time.
include(CMakePackageConfigHelpers)

set(XGRAD_INSTALL_CMAKEDIR ${CMAKE_INSTALL_LIBDIR}/cmake/xgrad)
set(XGRAD_INSTALL_TARGETS xgrad)
if(TARGET xgrad_f64)
  list(APPEND XGRAD_INSTALL_TARGETS xgrad_f64)
endif()

install(TARGETS ${XGRAD_INSTALL_TARGETS} EXPORT xgradTargets
        ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
        LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR})
# Every header of the three library directories, also those added later.
install(DIRECTORY ${PROJECT_SOURCE_DIR}/core ${PROJECT_SOURCE_DIR}/nn ${PROJECT_SOURCE_DIR}/optim
        DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/xgrad
        FILES_MATCHING PATTERN "*.hpp")
install(EXPORT xgradTargets NAMESPACE xgrad:: DESTINATION ${XGRAD_INSTALL_CMAKEDIR})

configure_package_config_file(${CMAKE_CURRENT_LIST_DIR}/xgradConfig.cmake.in
                              ${PROJECT_BINARY_DIR}/xgradConfig.cmake
                              INSTALL_DESTINATION ${XGRAD_INSTALL_CMAKEDIR})
# 0.x: only the same minor version is compatible (the API still changes between minors).
write_basic_package_version_file(${PROJECT_BINARY_DIR}/xgradConfigVersion.cmake
                                 COMPATIBILITY SameMinorVersion)
install(FILES ${PROJECT_BINARY_DIR}/xgradConfig.cmake ${PROJECT_BINARY_DIR}/xgradConfigVersion.cmake
        DESTINATION ${XGRAD_INSTALL_CMAKEDIR})
