// tests/distributed/main.cpp — Catch2's main inside MPI: init before the first test, finalize after
// the last. Every rank runs every test, in the same order, so their collectives pair up; a rank
// whose assertion fails still reaches the next collective, and mpirun's exit code is non-zero if
// any rank's is.
#define CATCH_CONFIG_RUNNER
#include <catch2/catch.hpp>

#include <xgrad/distributed/distributed.hpp>

int main(int argc, char** argv) {
    xgrad::distributed::InitGuard mpi(&argc, &argv);
    return Catch::Session().run(argc, argv);
}
