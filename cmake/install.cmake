# cmake/install.cmake — `cmake --install`: headers, libraries and the CMake package of xgrad
# (`make install PREFIX=P` builds xgrad and xgrad_f64 in build/, then runs cmake --install)
# (included from the top-level CMakeLists.txt when XGRAD_INSTALL is on, by default only when xgrad
# is the top-level project: inside another project's add_subdirectory, that project's own
# `cmake --install` does not also install xgrad unless it sets XGRAD_INSTALL=ON).
#
# What lands under the prefix P:
#   P/include/xgrad/{core,nn,optim,data,train,distributed,text,io}/*.hpp  the headers; a user includes <xgrad/core/tensor.hpp>,
#   P/include/xgrad/xgrad.hpp                  <xgrad/nn/nn.hpp>, ... or all of them: <xgrad/xgrad.hpp>
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
set(XGRAD_INSTALL_TARGETS xgrad_io xgrad xgrad_distributed xgrad_text)
if(TARGET xgrad_f64)
  list(APPEND XGRAD_INSTALL_TARGETS xgrad_f64)
endif()

install(TARGETS ${XGRAD_INSTALL_TARGETS} EXPORT xgradTargets
        ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
        LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR})
# Every public header of the eight library directories, also those added later; the internal ones,
# under a detail/ folder, are included only by the library's own .cpp files and are not installed.
install(DIRECTORY ${PROJECT_SOURCE_DIR}/core ${PROJECT_SOURCE_DIR}/nn ${PROJECT_SOURCE_DIR}/optim ${PROJECT_SOURCE_DIR}/data
                  ${PROJECT_SOURCE_DIR}/train ${PROJECT_SOURCE_DIR}/distributed ${PROJECT_SOURCE_DIR}/text ${PROJECT_SOURCE_DIR}/io
        DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/xgrad
        FILES_MATCHING PATTERN "*.hpp" PATTERN "detail" EXCLUDE)
install(FILES ${PROJECT_SOURCE_DIR}/xgrad.hpp DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/xgrad)
install(EXPORT xgradTargets NAMESPACE xgrad:: DESTINATION ${XGRAD_INSTALL_CMAKEDIR})

# The config file finds MPI again only when xgrad_distributed was built on it.
set(XGRAD_WITH_MPI ${MPI_CXX_FOUND})
# libxsmm is a static library linked PRIVATE into a static xgrad: a consumer links it too, so the
# config file re-finds it when this build used it.
if(LIBXSMM_FOUND)
  set(XGRAD_WITH_LIBXSMM ON)
else()
  set(XGRAD_WITH_LIBXSMM OFF)
endif()
configure_package_config_file(${CMAKE_CURRENT_LIST_DIR}/xgradConfig.cmake.in
                              ${PROJECT_BINARY_DIR}/xgradConfig.cmake
                              INSTALL_DESTINATION ${XGRAD_INSTALL_CMAKEDIR})
# 0.x: only the same minor version is compatible (the API still changes between minors).
write_basic_package_version_file(${PROJECT_BINARY_DIR}/xgradConfigVersion.cmake
                                 COMPATIBILITY SameMinorVersion)
install(FILES ${PROJECT_BINARY_DIR}/xgradConfig.cmake ${PROJECT_BINARY_DIR}/xgradConfigVersion.cmake
        DESTINATION ${XGRAD_INSTALL_CMAKEDIR})

# ---- a Debian package: `cd build && cpack -G DEB` → xgrad_<version>_<arch>.deb ------------------
# Installs under /usr (headers in /usr/include/xgrad, the package in /usr/lib/cmake/xgrad, where
# find_package looks without any CMAKE_PREFIX_PATH), and depends on the Debian packages the
# config file finds. `sudo apt-get install ./xgrad_0.1.0_amd64.deb` installs it with them.
# Only when xgrad is the top-level project: a parent project packages itself.
if(PROJECT_IS_TOP_LEVEL)
  set(CPACK_PACKAGE_NAME xgrad)
  set(CPACK_PACKAGE_VENDOR "xgrad")
  set(CPACK_PACKAGE_DESCRIPTION_SUMMARY "small deep-learning framework in C++17 on xtensor, written to be read")
  set(CPACK_PACKAGE_CONTACT "xgrad maintainers")
  set(CPACK_PACKAGING_INSTALL_PREFIX /usr)
  set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)
  set(CPACK_DEBIAN_PACKAGE_SECTION devel)
  set(CPACK_DEBIAN_PACKAGE_DEPENDS
      "xtl-dev, libxsimd-dev, libxtensor-dev, libopenblas-dev, nlohmann-json3-dev, libfmt-dev, zlib1g-dev, libpcre2-dev, pkgconf, cmake")
  if(LIBXSMM_FOUND)
    string(APPEND CPACK_DEBIAN_PACKAGE_DEPENDS ", libxsmm-dev")
  endif()
  include(CPack)
endif()
