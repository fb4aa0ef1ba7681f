# cmake/build_speed.cmake — what keeps a clean build of xgrad short on two cores.
#
# Almost all of a build's time is spent on other people's templates: every translation unit parses
# xtensor and xsimd (about 2 s alone), a test also Catch2, an example also CLI11, and each then
# instantiates the expressions it uses. tests/build_profile.sh shows where the time goes.
# Two remedies are applied here; both leave the compiled code as it was.
#
# 1. Precompiled headers (XGRAD_PRECOMPILED_HEADERS, ON by default). A precompiled header is the
#    compiler's state after parsing a list of headers, saved to a file and loaded by every
#    translation unit of a target in place of parsing them again. xgrad_precompile(target LIST)
#    gives a target one; targets whose compile flags are the same share one file (REUSE_FROM) rather
#    than each building their own. The lists:
#      XGRAD_PCH_LIBRARY  the standard headers and xtensor headers the library's files use; not
#                         xgrad's own headers, so that editing one recompiles only its users
#      XGRAD_PCH_PROGRAM  the library's list, xgrad.hpp (every module) and fmt: the tests
#      XGRAD_PCH_EXAMPLES the tests' list and CLI11: the examples and their libraries
#    A precompiled header is included first into every file of its target, so a file that forgot an
#    #include can still compile there. The installed headers are checked without it: the
#    find_package consumer (tests/consumer.sh) compiles against them with -Werror and no
#    precompiled header, and the header check (tests/CMakeLists.txt) compiles each public header
#    alone.
#
# 2. Unity builds of the tests (XGRAD_UNITY_BUILD_TESTS, ON by default): xgrad_tests compiles its
#    test files in batches of XGRAD_TEST_BATCH, so the headers and the Catch2 and xtensor templates
#    the files share are compiled once per batch instead of once per file. Each test file must then
#    give its file-local helpers names of its own (a unity batch is one translation unit). The
#    library has the same switch, XGRAD_UNITY_BUILD (CMakeLists.txt), off by default: there an edit
#    to one source would recompile its whole batch, which the "Adding an op" loop cannot afford.
option(XGRAD_PRECOMPILED_HEADERS "Precompile the heavy headers (xtensor, Catch2, CLI11) once per target" ON)
option(XGRAD_UNITY_BUILD_TESTS "Compile the test files of xgrad_tests in batches" ON)
set(XGRAD_TEST_BATCH 8 CACHE STRING "Test files per batch when XGRAD_UNITY_BUILD_TESTS is ON")

set(XGRAD_PCH_LIBRARY
  <algorithm> <atomic> <cmath> <cstddef> <cstdint> <cstring> <functional> <limits> <memory> <mutex>
  <optional> <random> <sstream> <string> <type_traits> <utility> <vector>
  <xtensor/xarray.hpp> <xtensor/xbroadcast.hpp> <xtensor/xbuilder.hpp> <xtensor/xmath.hpp>
  <xtensor/xnoalias.hpp> <xtensor/xoperation.hpp> <xtensor/xreducer.hpp> <xtensor/xview.hpp>
  <xsimd/xsimd.hpp>)
set(XGRAD_PCH_PROGRAM ${XGRAD_PCH_LIBRARY} <filesystem> <fstream> <iostream> <fmt/format.h>
  <xgrad/xgrad.hpp>)
set(XGRAD_PCH_EXAMPLES ${XGRAD_PCH_PROGRAM} <CLI/CLI.hpp>)

# xgrad_precompile(TARGET LIST [REUSE_FROM OTHER]): TARGET's files start from the precompiled
# headers of LIST (XGRAD_PCH_LIBRARY or XGRAD_PCH_PROGRAM), or reuse OTHER's file, when OTHER is
# compiled with the same flags (the same library flavour, float or double). A no-op when
# XGRAD_PRECOMPILED_HEADERS is OFF.
function(xgrad_precompile target list)
  cmake_parse_arguments(PARSE_ARGV 2 arg "" "REUSE_FROM" "")
  if(NOT XGRAD_PRECOMPILED_HEADERS)
    return()
  endif()
  if(arg_REUSE_FROM)
    target_precompile_headers(${target} REUSE_FROM ${arg_REUSE_FROM})
  else()
    target_precompile_headers(${target} PRIVATE ${${list}})
  endif()
endfunction()
