// distributed/detail/backend.hpp — the few calls of the transport xgrad needs, in bytes and counts
// (internal: distributed/collectives.cpp builds the tensor collectives on them).
//
// Two implementations, chosen by CMake: backend_mpi.cpp (Open MPI, when find_package(MPI) succeeds)
// and backend_single.cpp (a world of one process, where each call copies or returns).
#pragma once

#include <cstddef>
#include <cstdlib>
#include <string>
#include <vector>

namespace xgrad::distributed::backend {

// Whether an MPI launcher started this process: Open MPI's mpirun sets OMPI_COMM_WORLD_SIZE;
// PMIx and PMI launchers (srun, MPICH's hydra) set PMIX_RANK or PMI_RANK.
inline bool started_by_launcher() {
    for (const char* name : {"OMPI_COMM_WORLD_SIZE", "PMIX_RANK", "PMI_RANK"})
        if (std::getenv(name) != nullptr) return true;
    return false;
}

bool available();                       // built with MPI
void init(int* argc, char*** argv);     // starts MPI only under a launcher (mpirun)
void finalize();
bool initialized();
int rank();
int size();
std::string describe();
[[noreturn]] void abort(int code);

enum class Number { Float, Double };    // the element types summed by all_reduce_sum, reduce_scatter_sum
void barrier();
void all_reduce_sum(void* data, std::size_t count, Number type);       // in place, `count` elements
// send holds W segments of `count` elements each; recv (count) ← Σ over the ranks of segment rank().
// send and recv do not overlap.
void reduce_scatter_sum(const void* send, void* recv, std::size_t count, Number type);
// The same with segments of different sizes: send holds counts[0] + ... + counts[W−1] elements,
// segment r at offset Σ_{q<r} counts[q]; recv (counts[rank()]) ← Σ over the ranks of segment rank().
void reduce_scatter_v_sum(const void* send, void* recv, const std::vector<std::size_t>& counts, Number type);
void broadcast(void* data, std::size_t bytes, int root);
// recv (W·bytes) ← every rank's `bytes` bytes, in rank order.
void all_gather(const void* send, std::size_t bytes, void* recv);
// recv (Σ counts) ← rank r's counts[r] bytes at offset Σ_{q<r} counts[q]; counts known to all.
void all_gather_v(const void* send, const std::vector<std::size_t>& counts, void* recv);
// Rank r sends send_counts[q] bytes (at offset Σ_{p<q} send_counts[p] of send) to each rank q and
// receives recv_counts[q] bytes from each rank q (at offset Σ_{p<q} recv_counts[p] of recv).
void all_to_all_v(const void* send, const std::vector<std::size_t>& send_counts, void* recv,
                  const std::vector<std::size_t>& recv_counts);
// The same on `root` only: recv (Σ counts bytes) is written on root and not touched elsewhere.
void gather_v(const void* send, const std::vector<std::size_t>& counts, void* recv, int root);

}  // namespace xgrad::distributed::backend
