// tests/distributed/mpi_listener.cpp — the distributed tests run inside MPI: init before the first
// test, finalize after the last, from a Catch2 listener, so that the binaries use Catch2's own
// main (Catch2::Catch2WithMain, compiled once by Debian) instead of compiling Catch2's runner
// here. Every rank runs every test, in the same order, so their collectives pair up; a rank whose
// assertion fails still reaches the next collective, and mpirun's exit code is non-zero if any
// rank's is.
#define CATCH_CONFIG_EXTERNAL_INTERFACES  // TestEventListenerBase and CATCH_REGISTER_LISTENER
#include <catch2/catch.hpp>

#include <xgrad/distributed/distributed.hpp>

namespace {

struct MpiListener : Catch::TestEventListenerBase {
    using TestEventListenerBase::TestEventListenerBase;
    void testRunStarting(const Catch::TestRunInfo& info) override {
        TestEventListenerBase::testRunStarting(info);
        xgrad::distributed::init();  // MPI_Init_thread without argc/argv, as MPI-2 allows
    }
    void testRunEnded(const Catch::TestRunStats& stats) override {
        xgrad::distributed::finalize();
        TestEventListenerBase::testRunEnded(stats);
    }
};

}  // namespace

CATCH_REGISTER_LISTENER(MpiListener)
