// bench/allreduce_order.cpp — what summing in rank order costs: one all-reduce of a gradient
// buffer done by MPI_Allreduce, against the reduce-scatter summed in rank order and the all-gather
// that DistributedDataParallel and ZeroRedundancyOptimizer use instead (bench/README.md, row T9).
//
// Legend: W ranks, r this rank, n floats in the buffer (float32, 4n bytes), counts[q] the
// elements of segment q (n/W each, the first n mod W one more).
//
//   MPI_Allreduce        buf ← Σ_q x_q, in place, in whatever order Open MPI's algorithm adds
//   rank order           segment r ← ((x_0 + x_1) + x_2) + ... + x_{W−1} on segment r only
//                        (detail::reduce_scatter_by_alltoall: one MPI_Alltoallv and W − 1 local
//                        adds), then buf ← every rank's segment (backend::all_gather_v)
//
// Both send 2(W − 1)/W · 4n bytes per rank when MPI's all-reduce is a ring; the rank-ordered one
// gives the same bits at any W and under any segmentation, which is why DDP and ZeRO use it
// beyond W = 2, where a sum has more than two terms (distributed/detail/synced.hpp). Before timing, one call of each on rank-dependent numbers
// checks that both give the same sum (exactly at W = 2, where a + b = b + a; to 1e-5 beyond).
// The timed calls sum zeros, so that the buffer stays the same from call to call: a sum of zeros
// costs what a sum of any normal numbers does.
//
// Timing: `rounds` rounds; in each, the two methods one after the other (which one first
// alternates with the round), each `calls` calls between two barriers, timed by std::chrono's
// steady clock on rank 0. Prints one line (bench/compare.py parses it):
//     allreduce_order W 2 floats 811200 rounds 20 calls 20: MPI_Allreduce 412.3 us [398.1 – 460.0],
//     rank order 455.0 us [441.7 – 503.2] per call
// (median [min – max] over the rounds of the mean per call; the figures here are only the form).
//
// Run: mpirun -np 2 allreduce_order [floats [rounds [calls]]]  (defaults 811200, 20, 20)
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <exception>
#include <stdexcept>
#include <string>
#include <vector>

#include <xgrad/distributed/detail/backend.hpp>
#include <xgrad/distributed/detail/synced.hpp>
#include <xgrad/distributed/distributed.hpp>

namespace dist = xgrad::distributed;
namespace backend = xgrad::distributed::backend;
using real = xgrad::real;

namespace {

// One all-reduce of buf (n floats) by the rank-ordered route: reduce-scatter into `segment`,
// all-gather back into buf, as DistributedDataParallel::sync_gradients does.
struct RankOrder {
    std::vector<std::size_t> counts, bytes;
    std::vector<real> scratch, segment;

    RankOrder(std::size_t n, std::size_t W) : counts(W), bytes(W) {
        for (std::size_t q = 0; q < W; ++q) {
            counts[q] = n / W + (q < n % W ? 1 : 0);
            bytes[q] = counts[q] * sizeof(real);
        }
        segment.resize(counts[std::size_t(dist::rank())]);
    }
    void operator()(std::vector<real>& buf) {
        dist::detail::reduce_scatter_by_alltoall(buf, counts, scratch, segment.data());
        backend::all_gather_v(segment.data(), bytes, buf.data());
    }
};

void all_reduce(std::vector<real>& buf) { backend::all_reduce_sum(buf.data(), buf.size(), backend::Number::Float); }

// Seconds per call of f(buf), the mean over `calls` calls between barriers (rank 0's clock).
template <class F>
double seconds_per_call(F&& f, std::vector<real>& buf, int calls) {
    backend::barrier();
    const auto t0 = std::chrono::steady_clock::now();
    for (int i = 0; i < calls; ++i) f(buf);
    backend::barrier();
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() / calls;
}

// Both routes on x_q[j] = (q + 1) · (j mod 97) / 97 agree (exactly at W = 2); throws otherwise.
void check_same_sum(std::size_t n, RankOrder& rank_order) {
    std::vector<real> a(n), b(n);
    for (std::size_t j = 0; j < n; ++j) a[j] = b[j] = real(dist::rank() + 1) * real(j % 97) / real(97);
    all_reduce(a);
    rank_order(b);
    const double tolerance = dist::world_size() == 2 ? 0.0 : 1e-5;
    for (std::size_t j = 0; j < n; ++j)
        if (std::abs(double(a[j]) - double(b[j])) > tolerance * std::abs(double(a[j])))
            throw std::runtime_error("allreduce_order: the two sums differ at element " + std::to_string(j) + ": " +
                                     std::to_string(a[j]) + " and " + std::to_string(b[j]));
}

std::string range_us(std::vector<double> s) {
    std::sort(s.begin(), s.end());
    const std::size_t k = s.size();
    const double median = k % 2 ? s[k / 2] : (s[k / 2 - 1] + s[k / 2]) / 2;
    char text[96];
    std::snprintf(text, sizeof text, "%.1f us [%.1f – %.1f]", 1e6 * median, 1e6 * s.front(), 1e6 * s.back());
    return text;
}

}  // namespace

int main(int argc, char** argv) {
    dist::InitGuard guard(&argc, &argv);
    try {
        const std::size_t n = argc > 1 ? std::stoul(argv[1]) : 811200;
        const int rounds = argc > 2 ? std::stoi(argv[2]) : 20, calls = argc > 3 ? std::stoi(argv[3]) : 20;
        if (n == 0 || rounds < 1 || calls < 1)
            throw std::invalid_argument("allreduce_order: floats, rounds and calls must be at least 1");
        RankOrder rank_order(n, std::size_t(dist::world_size()));
        check_same_sum(n, rank_order);
        std::vector<real> buf(n, real(0));
        std::vector<double> mpi, ordered;
        for (int round = 0; round < rounds; ++round) {
            if (round % 2 == 0) mpi.push_back(seconds_per_call(all_reduce, buf, calls));
            ordered.push_back(seconds_per_call(rank_order, buf, calls));
            if (round % 2 == 1) mpi.push_back(seconds_per_call(all_reduce, buf, calls));
        }
        if (dist::rank() == 0)
            std::printf("allreduce_order W %d floats %zu rounds %d calls %d: MPI_Allreduce %s, rank order %s per call\n",
                        dist::world_size(), n, rounds, calls, range_us(mpi).c_str(), range_us(ordered).c_str());
    } catch (const std::exception& e) {
        std::fprintf(stderr, "%s\n", e.what());
        dist::abort(1);
    }
    return 0;
}
