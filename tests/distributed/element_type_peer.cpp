// tests/distributed/element_type_peer.cpp — one rank of a pair under one mpirun, built twice: on
// xgrad (real = float) and on xgrad_f64 (real = double). float_and_double.sh starts one of each:
//     mpirun -np 1 element_type_peer_f32 : -np 1 element_type_peer_f64
// Each rank builds a DistributedDataParallel, then all-reduces a (2,) tensor of [r + 1, 2(r + 1)],
// and prints one line per step: "rank R float32: <step> refused: <message>", or "... <step> ok"
// with the values, which the script compares with the sum [3, 6].
#include <exception>
#include <iostream>

#include <fmt/format.h>

#include <xgrad/distributed/ddp.hpp>
#include <xgrad/xgrad.hpp>

using namespace xgrad;
namespace dist = xgrad::distributed;

int main(int argc, char** argv) {
    dist::InitGuard mpi(&argc, &argv);
    const int r = dist::rank();
    const char* type = sizeof(real) == 4 ? "float32" : "float64";
    try {
        nn::Linear model(3, 2);
        dist::DistributedDataParallel ddp(model);
        std::cout << fmt::format("rank {} {}: DistributedDataParallel ok\n", r, type) << std::flush;
    } catch (const ValueError& e) {
        std::cout << fmt::format("rank {} {}: DistributedDataParallel refused: {}\n", r, type, e.what()) << std::flush;
    }
    try {
        Tensor t{real(r + 1), real(2 * (r + 1))};
        dist::all_reduce(t);
        std::cout << fmt::format("rank {} {}: all_reduce ok {} {}\n", r, type, t.at({0}), t.at({1})) << std::flush;
    } catch (const ValueError& e) {
        std::cout << fmt::format("rank {} {}: all_reduce refused: {}\n", r, type, e.what()) << std::flush;
    } catch (const std::exception& e) {  // an MPI failure: end both ranks
        std::cerr << fmt::format("rank {} {}: {}\n", r, type, e.what());
        dist::abort(1);
    }
}
