// distributed/backend_mpi.cpp — the transport: Open MPI's collectives on MPI_COMM_WORLD.
//
// MPI counts are int, so a buffer of more than INT_MAX elements is sent in pieces; the gathers and
// the reduce-scatter, whose pieces would be strided, refuse more than INT_MAX bytes or elements per
// call instead. Each call's return code is checked (MPI_ERRORS_RETURN) and turned into a
// std::runtime_error with MPI's text.
// ref: MPI-3.1 standard, §5.4 MPI_Bcast, §5.5 MPI_Allgather(v), §5.9 MPI_Allreduce,
// §5.5 MPI_Gatherv, §5.8 MPI_Alltoallv, §5.10.1 MPI_Reduce_scatter_block and MPI_Reduce_scatter, §8.3 error handlers.
#include <algorithm>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <stdexcept>

#include <fmt/format.h>
#include <mpi.h>

#include <xgrad/distributed/detail/backend.hpp>

namespace xgrad::distributed::backend {

// Whether this process runs under MPI: started by a launcher that gave it a rank, and init()
// has run. A program started without mpirun never calls MPI_Init, so it needs no MPI runtime.
static bool under_mpi_ = false;
static bool initialized_ = false;
static bool started_mpi_ = false;  // init() called MPI_Init (a program may have called it itself)

static void ok(int rc, const char* call) {
    if (rc == MPI_SUCCESS) return;
    char text[MPI_MAX_ERROR_STRING];
    int length = 0;
    MPI_Error_string(rc, text, &length);
    throw std::runtime_error(fmt::format("{} failed on rank {}: {}", call, rank(), std::string(text, std::size_t(length))));
}

bool available() { return true; }

void init(int* argc, char*** argv) {
    if (initialized_) return;
    int already = 0, finished = 0;
    MPI_Initialized(&already);
    MPI_Finalized(&finished);
    if (finished)  // MPI-3.1 §8.7: after MPI_Finalize, MPI cannot be started again in this process
        throw std::runtime_error("distributed::init: MPI was already finalized in this process and cannot start again");
    initialized_ = true;
    if (!already && !started_by_launcher()) return;  // alone: rank 0 of 1, MPI untouched
    if (!already) {
        int provided = 0;
        ok(MPI_Init_thread(argc, argv, MPI_THREAD_FUNNELED, &provided), "MPI_Init_thread");
        started_mpi_ = true;
    }
    under_mpi_ = true;
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
}

void finalize() {
    if (!initialized_) return;
    initialized_ = false;
    under_mpi_ = false;
    if (!started_mpi_) return;  // MPI started by the program itself: it finalizes it
    started_mpi_ = false;
    int done = 0;
    MPI_Finalized(&done);
    if (!done) MPI_Finalize();
}

bool initialized() { return initialized_; }

int rank() {
    int r = 0;
    if (under_mpi_) MPI_Comm_rank(MPI_COMM_WORLD, &r);
    return r;
}

int size() {
    int w = 1;
    if (under_mpi_) MPI_Comm_size(MPI_COMM_WORLD, &w);
    return w;
}

std::string describe() {
    if (!under_mpi_) return "1 process (not started by mpirun)";
    char version[MPI_MAX_LIBRARY_VERSION_STRING];
    int length = 0;
    MPI_Get_library_version(version, &length);
    std::string v(version, std::size_t(length));
    v = v.substr(0, v.find(','));  // "Open MPI v4.1.4, package: ..." → "Open MPI v4.1.4"
    return fmt::format("rank {} of {} ({})", rank(), size(), v);
}

void abort(int code) {
    std::fflush(stdout);
    std::fflush(stderr);
    if (under_mpi_) MPI_Abort(MPI_COMM_WORLD, code);  // mpirun then ends every rank
    std::exit(code);
}

void barrier() {
    if (under_mpi_) ok(MPI_Barrier(MPI_COMM_WORLD), "MPI_Barrier");
}

void all_reduce_sum(void* data, std::size_t count, Number type) {
    if (!under_mpi_ || size() == 1) return;
    const MPI_Datatype t = type == Number::Float ? MPI_FLOAT : MPI_DOUBLE;
    const std::size_t width = type == Number::Float ? sizeof(float) : sizeof(double);
    char* p = static_cast<char*>(data);
    for (std::size_t done = 0; done < count;) {  // pieces of at most INT_MAX elements
        const std::size_t n = std::min<std::size_t>(count - done, INT_MAX);
        ok(MPI_Allreduce(MPI_IN_PLACE, p + done * width, int(n), t, MPI_SUM, MPI_COMM_WORLD), "MPI_Allreduce");
        done += n;
    }
}

void reduce_scatter_sum(const void* send, void* recv, std::size_t count, Number type) {
    const std::size_t width = type == Number::Float ? sizeof(float) : sizeof(double);
    if (!under_mpi_ || size() == 1) {  // W = 1: segment 0 is the whole input, summed over one rank
        if (count > 0) std::copy_n(static_cast<const char*>(send), count * width, static_cast<char*>(recv));
        return;
    }
    const std::size_t W = std::size_t(size());
    if (count > std::size_t(INT_MAX) / W)  // the send buffer's W·count elements, counted in int by MPI
        throw std::runtime_error(fmt::format("reduce_scatter: {} segments of {} elements ({} in all) exceed MPI's {} "
                                             "elements per call", W, count, W * count, INT_MAX));
    const MPI_Datatype t = type == Number::Float ? MPI_FLOAT : MPI_DOUBLE;
    ok(MPI_Reduce_scatter_block(send, recv, int(count), t, MPI_SUM, MPI_COMM_WORLD), "MPI_Reduce_scatter_block");
}

// MPI's int counts and displacements of `counts` (elements or bytes), refused past INT_MAX in all.
static void int_counts(const std::vector<std::size_t>& counts, const char* call, std::vector<int>& c,
                       std::vector<int>& offset) {
    c.assign(counts.size(), 0);
    offset.assign(counts.size(), 0);
    std::size_t total = 0;
    for (std::size_t r = 0; r < counts.size(); ++r) {
        if (total + counts[r] > std::size_t(INT_MAX))
            throw std::runtime_error(fmt::format("{}: {} in all exceed MPI's {} per call", call, total + counts[r], INT_MAX));
        c[r] = int(counts[r]);
        offset[r] = int(total);
        total += counts[r];
    }
}

void reduce_scatter_v_sum(const void* send, void* recv, const std::vector<std::size_t>& counts, Number type) {
    const std::size_t width = type == Number::Float ? sizeof(float) : sizeof(double);
    if (!under_mpi_ || size() == 1) {
        if (counts.at(0) > 0) std::copy_n(static_cast<const char*>(send), counts[0] * width, static_cast<char*>(recv));
        return;
    }
    std::vector<int> c, offset;
    int_counts(counts, "reduce_scatter (elements)", c, offset);
    const MPI_Datatype t = type == Number::Float ? MPI_FLOAT : MPI_DOUBLE;
    ok(MPI_Reduce_scatter(send, recv, c.data(), t, MPI_SUM, MPI_COMM_WORLD), "MPI_Reduce_scatter");
}

void broadcast(void* data, std::size_t bytes, int root) {
    if (!under_mpi_ || size() == 1) return;
    char* p = static_cast<char*>(data);
    for (std::size_t done = 0; done < bytes;) {
        const std::size_t n = std::min<std::size_t>(bytes - done, INT_MAX);
        ok(MPI_Bcast(p + done, int(n), MPI_BYTE, root, MPI_COMM_WORLD), "MPI_Bcast");
        done += n;
    }
}

void all_gather(const void* send, std::size_t bytes, void* recv) {
    if (!under_mpi_ || size() == 1) {
        if (bytes > 0) std::copy_n(static_cast<const char*>(send), bytes, static_cast<char*>(recv));
        return;
    }
    if (bytes * std::size_t(size()) > std::size_t(INT_MAX))
        throw std::runtime_error(fmt::format("all_gather: {} bytes from each of {} ranks exceed MPI's {} bytes per call",
                                             bytes, size(), INT_MAX));
    ok(MPI_Allgather(send, int(bytes), MPI_BYTE, recv, int(bytes), MPI_BYTE, MPI_COMM_WORLD), "MPI_Allgather");
}

void all_gather_v(const void* send, const std::vector<std::size_t>& counts, void* recv) {
    if (!under_mpi_ || size() == 1) {
        if (counts.at(0) > 0) std::copy_n(static_cast<const char*>(send), counts[0], static_cast<char*>(recv));
        return;
    }
    std::vector<int> c, offset;
    int_counts(counts, "all_gather (bytes)", c, offset);
    ok(MPI_Allgatherv(send, c[std::size_t(rank())], MPI_BYTE, recv, c.data(), offset.data(), MPI_BYTE, MPI_COMM_WORLD),
       "MPI_Allgatherv");
}

void all_to_all_v(const void* send, const std::vector<std::size_t>& send_counts, void* recv,
                  const std::vector<std::size_t>& recv_counts) {
    if (!under_mpi_ || size() == 1) {
        if (send_counts.at(0) > 0) std::copy_n(static_cast<const char*>(send), send_counts[0], static_cast<char*>(recv));
        return;
    }
    std::vector<int> sc, so, rc, ro;
    int_counts(send_counts, "all_to_all (bytes sent)", sc, so);
    int_counts(recv_counts, "all_to_all (bytes received)", rc, ro);
    ok(MPI_Alltoallv(send, sc.data(), so.data(), MPI_BYTE, recv, rc.data(), ro.data(), MPI_BYTE, MPI_COMM_WORLD),
       "MPI_Alltoallv");
}

void gather_v(const void* send, const std::vector<std::size_t>& counts, void* recv, int root) {
    if (!under_mpi_ || size() == 1) {
        if (counts.at(0) > 0) std::copy_n(static_cast<const char*>(send), counts[0], static_cast<char*>(recv));
        return;
    }
    std::vector<int> c, offset;
    int_counts(counts, "gather (bytes)", c, offset);
    ok(MPI_Gatherv(send, c[std::size_t(rank())], MPI_BYTE, recv, c.data(), offset.data(), MPI_BYTE, root, MPI_COMM_WORLD),
       "MPI_Gatherv");
}

}  // namespace xgrad::distributed::backend
