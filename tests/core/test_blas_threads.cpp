// tests/core/test_blas_threads.cpp — the thread default a program gets when it never calls
// set_num_threads: its first matrix product puts OpenBLAS on one thread, one per xgrad thread.
// Its own process (ctest entry blas_threads_default), started without OPENBLAS_NUM_THREADS, so that
// OpenBLAS begins on its own default of one thread per core.
#include <cblas.h>

#include <catch2/catch.hpp>

#include <xgrad/core/ops.hpp>
#include <xgrad/core/threads.hpp>

using namespace xgrad;

TEST_CASE("without set_num_threads, the first matmul leaves OpenBLAS on one thread", "[threads][blas]") {
    INFO("OpenBLAS threads before the first product: " << openblas_get_num_threads());
    REQUIRE(get_num_threads() == 1);
    const Tensor y = matmul(ones({64, 64}), ones({64, 64}));
    REQUIRE(y.data()(0, 0) == 64);
    REQUIRE(openblas_get_num_threads() == 1);
}
