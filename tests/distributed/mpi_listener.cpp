// tests/distributed/mpi_listener.cpp — the distributed tests run inside MPI: init before the first
// test, finalize after the run, from a Catch2 listener, so that the binaries use Catch2's own
// main (Catch2::Catch2WithMain, compiled once by Debian) instead of compiling Catch2's runner
// here. Every rank runs every test, in the same order, so their collectives pair up; a rank whose
// assertion fails still reaches the next collective, and mpirun's exit code is non-zero if any
// rank's is.
#define CATCH_CONFIG_EXTERNAL_INTERFACES  // TestEventListenerBase and CATCH_REGISTER_LISTENER
#include <catch2/catch.hpp>

#include <xgrad/distributed/distributed.hpp>

namespace {

// MPI ends in the destructor, not in testRunEnded: Catch2 also calls testRunEnded from its
// handler of a fatal signal (a crash, an abort), where MPI_Finalize would wait for the other
// ranks, which may be waiting for this one. After a crash the listener is never destroyed, the
// rank dies unfinalized, and mpirun ends the job at once.
struct MpiListener : Catch::TestEventListenerBase {
    using TestEventListenerBase::TestEventListenerBase;
    MpiListener(const MpiListener&) = delete;
    MpiListener& operator=(const MpiListener&) = delete;
    ~MpiListener() override { xgrad::distributed::finalize(); }
    void testRunStarting(const Catch::TestRunInfo& info) override {
        TestEventListenerBase::testRunStarting(info);
        xgrad::distributed::init();  // MPI_Init_thread without argc/argv, as MPI-2 allows
    }
};

}  // namespace

CATCH_REGISTER_LISTENER(MpiListener)
