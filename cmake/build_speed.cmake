# cmake/build_speed.cmake — what keeps a clean build of xgrad short on two cores.
#
# Almost all of a build's time goes to other people's templates: every translation unit parses
# xtensor and xsimd, a test also Catch2, and each then instantiates and optimises the expressions
# it uses. tests/build_profile.sh shows where the time goes (its figures go in commit messages and
# notes, not here). Five remedies are applied here; none changes a source file.
#
# 1. Precompiled headers (XGRAD_PRECOMPILED_HEADERS, ON). A precompiled header is the compiler's
#    state after parsing a list of headers, saved to a file that every translation unit of a target
#    loads instead of parsing those headers again. xgrad_precompile(target LIST) gives a target one;
#    targets compiled with the same flags share one file (REUSE_FROM): the libraries xgrad and
#    xgrad_f64 have one each, the examples one, the float tests one, the gradchecks one. The lists:
#      XGRAD_PCH_LIBRARY  the standard headers, xtensor's container, xsimd and fmt: what nearly
#                         every file of the library, the examples and the tests includes anyway
#      XGRAD_PCH_TESTS    the library's list and Catch2
#    They hold no header of xgrad's own, so that editing one recompiles only the files that include
#    it, and no header that only a few files include: loading a header costs a file that does not
#    need it more than parsing saves (CLI11 2.1, included anywhere, makes GCC emit code for its own
#    objects, the larger part of its cost at -O3, so it stays in the five files that use it). A
#    precompiled header is included first into every file of its target, so a file that forgot an
#    #include could still compile there. Two builds go without: the find_package consumer
#    (tests/consumer.sh) compiles a program that includes <xgrad/xgrad.hpp> against the installed
#    headers, with -Werror, and `make tsan` compiles each source of the float library (core/, nn/,
#    optim/) alone, with neither a precompiled header nor a unity batch.
#
# 2. Unity builds (XGRAD_UNITY_BUILD, ON): the float library xgrad, xgrad_distributed, the
#    examples' libraries and the value tests xgrad_tests are compiled in batches of 8 files, each
#    batch one translation unit, so the headers and template instantiations its files share are
#    compiled once per batch (two library files with file-local SIMD kernels are compiled alone:
#    CMakeLists.txt says why). A file's file-local names then share that translation unit with its
#    batch's: give each helper a name of its own (the compiler reports a clash as a redefinition,
#    but two overloads of one name would silently coexist). The double library xgrad_f64 has its own switch,
#    XGRAD_UNITY_BUILD_F64, OFF: the "Adding an op" loop (README) edits one file of it and
#    recompiles only that file. Trees built once from scratch turn it on: every tree configured
#    under CI (the environment variable CI=true, which .ci/run's caller sets), where no file is
#    edited afterwards; there the gradchecks are one program in batches too (tests/CMakeLists.txt).
#    Editing one value test recompiles its batch of 8: for a loop on one test file, configure a
#    tree with -DXGRAD_UNITY_BUILD=OFF.
#
# 3. ccache, when it is installed (XGRAD_CCACHE, ON): repeated builds of the same sources, after
#    `make clean` or in a second tree, become cache hits. CI and tests/build_profile.sh set
#    CCACHE_DISABLE, so that what they measure is a cold build. ccache is looked for when a tree is
#    first configured.
#
# 4. The tests' own code is compiled with less optimisation than the library it calls
#    (XGRAD_TESTS_OPTIMIZE, applied to the Catch2 programs in tests/CMakeLists.txt): -O1 in a
#    Release tree, -O0 under the sanitizers. A test does little work of its own at run time (the
#    library, built with the tree's flags, does it), while Catch2's macros make it a large program
#    to optimise. The checkpoint fuzzer, whose own loop is the work, keeps the tree's flags.
#
# 5. The gold linker (XGRAD_GOLD_LINKER, ON, where the compiler accepts -fuse-ld=gold): binutils'
#    ld.gold, installed with the compiler, links xgrad's programs (over forty of them, the tests
#    and the examples, each against the static libraries) in about a third of the time of the
#    default ld.bfd. Only in a tree of xgrad's own: a project that adds xgrad keeps its linker.
option(XGRAD_PRECOMPILED_HEADERS "Precompile xtensor's, the standard and Catch2's headers" ON)
option(XGRAD_UNITY_BUILD "Compile xgrad, xgrad_distributed, the examples' libraries and xgrad_tests in batches of 8 files" ON)
if("$ENV{CI}" STREQUAL "true")
  option(XGRAD_UNITY_BUILD_F64 "Compile xgrad_f64 in batches of 8 files" ON)
else()
  option(XGRAD_UNITY_BUILD_F64 "Compile xgrad_f64 in batches of 8 files" OFF)
endif()
option(XGRAD_CCACHE "Compile through ccache when it is installed" ON)
if(XGRAD_SANITIZE OR XGRAD_TSAN)
  set(xgrad_tests_optimize_default -O0)
elseif(CMAKE_BUILD_TYPE MATCHES "^(Release|RelWithDebInfo)$")
  set(xgrad_tests_optimize_default -O1)
endif()
set(XGRAD_TESTS_OPTIMIZE "${xgrad_tests_optimize_default}" CACHE STRING
    "Optimisation flag of the tests' own code (empty: the tree's)")

option(XGRAD_GOLD_LINKER "Link xgrad's programs with ld.gold when the compiler accepts it" ON)
if(XGRAD_GOLD_LINKER AND PROJECT_IS_TOP_LEVEL)
  include(CheckLinkerFlag)
  check_linker_flag(CXX -fuse-ld=gold XGRAD_HAVE_GOLD_LINKER)
  if(XGRAD_HAVE_GOLD_LINKER)
    add_link_options(-fuse-ld=gold)
  endif()
endif()

if(XGRAD_CCACHE AND PROJECT_IS_TOP_LEVEL AND NOT CMAKE_CXX_COMPILER_LAUNCHER)
  find_program(XGRAD_CCACHE_PROGRAM ccache)
  if(XGRAD_CCACHE_PROGRAM)
    # ccache reuses a result compiled with a precompiled header only with these two sloppinesses.
    set(CMAKE_CXX_COMPILER_LAUNCHER ${CMAKE_COMMAND} -E env CCACHE_SLOPPINESS=pch_defines,time_macros
                                    ${XGRAD_CCACHE_PROGRAM})
  endif()
endif()

set(XGRAD_PCH_LIBRARY
  <algorithm> <cmath> <cstdint> <functional> <memory> <mutex> <optional> <random> <string> <vector>
  <xtensor/xarray.hpp> <xsimd/xsimd.hpp> <fmt/format.h> <fmt/ranges.h>)
set(XGRAD_PCH_TESTS ${XGRAD_PCH_LIBRARY} <catch2/catch.hpp>)

# xgrad_precompile(TARGET LIST [REUSE_FROM OTHER]): TARGET's files start from the precompiled
# headers of LIST (XGRAD_PCH_LIBRARY or XGRAD_PCH_TESTS), or from OTHER's file when OTHER is compiled
# with the same flags and definitions (GCC refuses a precompiled header built with another
# definition, with a warning, and then parses the headers). A no-op when XGRAD_PRECOMPILED_HEADERS
# is OFF.
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
