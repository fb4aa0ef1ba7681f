# examples/libraries.cmake — the libraries of the examples, which the tests link too.
#
#   xgrad_examples_common  examples/common/: checkpoint (the examples' flags and advice around
#                          train::save and train::load, train/state.hpp), run_log (loss CSV,
#                          progress line, loss curve, clock), gnuplot (drawing PNGs), flags (an
#                          example's flags as one table, with their roles in a resume), cli
#                          (strict numeric flags with CLI11, up-front checks, main's errors,
#                          which end every rank under mpirun), data_parallel (the batch rule of
#                          W ranks × --grad-accum, rank 0 alone on stdout, the ranks' agreement),
#                          outputs (--out's files checked up front, saved one by one at the end),
#                          profile (--profile N: a window of steps through the profiler, its
#                          table, trace.json and profile.png),
#                          similarity (cosines and nearest rows of an embedding table).
#                          Included as "common/checkpoint.hpp"; its include path is examples/, so
#                          "char_mlp/model.hpp" (header-only) is reachable the same way.
#   word2vec_lib           examples/word2vec's data and similarity code (tests/examples/test_word2vec.cpp)
#   gpt_lib                examples/gpt's data, tokens (characters or byte pairs, with xgrad_text), model
#                          and reports (tests/examples/test_gpt.cpp)
# An example links xgrad_examples_common and its own library, never another example's sources.
# Included from examples/CMakeLists.txt, and from tests/CMakeLists.txt when the examples are off.
include_guard(GLOBAL)
set(_xgrad_examples ${CMAKE_CURRENT_LIST_DIR})

find_package(CLI11 REQUIRED)
add_library(xgrad_examples_common STATIC ${_xgrad_examples}/common/checkpoint.cpp
            ${_xgrad_examples}/common/cli.cpp ${_xgrad_examples}/common/data_parallel.cpp
            ${_xgrad_examples}/common/flags.cpp
            ${_xgrad_examples}/common/gnuplot.cpp ${_xgrad_examples}/common/outputs.cpp
            ${_xgrad_examples}/common/profile.cpp ${_xgrad_examples}/common/run_log.cpp ${_xgrad_examples}/common/similarity.cpp)
target_include_directories(xgrad_examples_common PUBLIC ${_xgrad_examples})
target_link_libraries(xgrad_examples_common PUBLIC xgrad xgrad::distributed CLI11::CLI11)

add_library(word2vec_lib STATIC ${_xgrad_examples}/word2vec/corpus.cpp ${_xgrad_examples}/word2vec/similarity.cpp)
target_link_libraries(word2vec_lib PUBLIC xgrad_examples_common)

add_library(gpt_lib STATIC ${_xgrad_examples}/gpt/data.cpp ${_xgrad_examples}/gpt/model.cpp
            ${_xgrad_examples}/gpt/report.cpp ${_xgrad_examples}/gpt/generate.cpp
            ${_xgrad_examples}/gpt/llama.cpp ${_xgrad_examples}/gpt/tokens.cpp
            ${_xgrad_examples}/gpt/config.cpp ${_xgrad_examples}/gpt/setup.cpp ${_xgrad_examples}/gpt/results.cpp
            ${_xgrad_examples}/gpt/lora.cpp)
target_link_libraries(gpt_lib PUBLIC xgrad_examples_common xgrad_text)

# Each library is compiled as one batch (XGRAD_UNITY_BUILD), and every file of the examples and
# their libraries starts from one precompiled header, built for xgrad_examples_common
# (cmake/build_speed.cmake).
set_target_properties(xgrad_examples_common word2vec_lib gpt_lib PROPERTIES UNITY_BUILD ${XGRAD_UNITY_BUILD})
xgrad_precompile(xgrad_examples_common XGRAD_PCH_LIBRARY)
xgrad_precompile(word2vec_lib XGRAD_PCH_LIBRARY REUSE_FROM xgrad_examples_common)
xgrad_precompile(gpt_lib XGRAD_PCH_LIBRARY REUSE_FROM xgrad_examples_common)
