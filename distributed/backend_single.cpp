// distributed/backend_single.cpp — the transport of a build without MPI: one process, rank 0 of
// a world of 1. A sum over one rank is its own value; a gather copies; a broadcast does nothing;
// a reduce-scatter copies rank 0's segment, which is the whole input.
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <stdexcept>
#include <string>

#include <xgrad/distributed/detail/backend.hpp>

namespace xgrad::distributed::backend {

static bool initialized_ = false;

bool available() { return false; }
// Under mpirun with W > 1 every rank would believe it is alone and train on its own: refused.
void init(int*, char***) {
    const char* w = std::getenv("OMPI_COMM_WORLD_SIZE");
    if (w != nullptr && std::string(w) != "1")
        throw std::runtime_error(std::string("distributed::init: xgrad was built without MPI, but mpirun started this "
                                             "process as one of ") + w + " ranks, each of which would train alone; "
                                             "install libopenmpi-dev (.ci/install-deps) and rebuild");
    initialized_ = true;
}
void finalize() { initialized_ = false; }
bool initialized() { return initialized_; }
int rank() { return 0; }
int size() { return 1; }
std::string describe() { return "1 process (xgrad was built without MPI)"; }

void abort(int code) {
    std::fflush(stdout);
    std::fflush(stderr);
    std::exit(code);
}

void barrier() {}
void all_reduce_sum(void*, std::size_t, Number) {}
void reduce_scatter_sum(const void* send, void* recv, std::size_t count, Number type) {
    const std::size_t width = type == Number::Float ? sizeof(float) : sizeof(double);
    if (count > 0) std::memcpy(recv, send, count * width);
}
void reduce_scatter_v_sum(const void* send, void* recv, const std::vector<std::size_t>& counts, Number type) {
    reduce_scatter_sum(send, recv, counts.at(0), type);
}
void broadcast(void*, std::size_t, int) {}
void all_gather(const void* send, std::size_t bytes, void* recv) {
    if (bytes > 0) std::memcpy(recv, send, bytes);
}
void all_gather_v(const void* send, const std::vector<std::size_t>& counts, void* recv) {
    if (counts.at(0) > 0) std::memcpy(recv, send, counts[0]);
}

void all_to_all_v(const void* send, const std::vector<std::size_t>& send_counts, void* recv,
                  const std::vector<std::size_t>&) {
    if (send_counts.at(0) > 0) std::memcpy(recv, send, send_counts[0]);
}
void gather_v(const void* send, const std::vector<std::size_t>& counts, void* recv, int) {
    if (counts.at(0) > 0) std::memcpy(recv, send, counts[0]);
}

}  // namespace xgrad::distributed::backend
