// examples/ddp_basics.cpp — data parallelism in one page: W ranks, each on B/W rows of a batch of B.
// Run: build/examples/ddp_basics (one process) or mpirun -np 2 build/examples/ddp_basics (2 ranks);
// both print the same losses, to rounding. W must divide B = 8: mpirun -np 3 is refused.
#include <exception>
#include <iostream>
#include <vector>

#include <fmt/format.h>

#include <xgrad/distributed/ddp.hpp>  // DistributedDataParallel; distributed.hpp: InitGuard, collectives
#include <xgrad/xgrad.hpp>            // Tensor, nn::Linear, optim::AdamW

using namespace xgrad;
namespace dist = xgrad::distributed;

int main(int argc, char** argv) {
    dist::InitGuard mpi(&argc, &argv);  // under mpirun: rank r of W; alone: rank 0 of 1
    const int B = 8, W = dist::world_size(), r = dist::rank();  // the global batch: B rows
    if (B % W != 0) {  // unequal slices: the mean of the ranks' gradients is not the batch's gradient
        // one write per rank, so that the ranks' lines do not interleave
        std::cerr << fmt::format("ddp_basics: rank {} of {}: the batch of B = {} rows does not split into {} "
                                 "equal slices; run with -np 1, 2, 4 or 8\n", r, W, B, W);
        return 1;  // every rank sees the same B and W, so every rank refuses: none waits in a collective
    }
    const int b = B / W;  // rank r: rows [r·b, (r+1)·b) of B
    try {
        manual_seed(0);  // the same seed on every rank: the same data below
        nn::Linear model(8, 2);
        optim::AdamW opt(model.named_parameters(), optim::AdamWOptions(1e-3));
        dist::DistributedDataParallel ddp(model);  // every rank now holds rank 0's weights
        Tensor x = randn({B, 8}), y = randn({B, 2});  // the global batch, the same on every rank
        for (int step = 0; step < 10; ++step) {
            opt.zero_grad();
            Tensor err = model.forward(x.narrow(0, r * b, b)) - y.narrow(0, r * b, b);  // this rank's rows
            Tensor loss = mean(err * err);  // this rank's mean over its b rows
            loss.backward();
            ddp.sync_gradients();           // ∇ ← the mean over the ranks: the global batch's gradient
            opt.step();
            std::vector<double> l{loss.item()};
            dist::all_reduce(l, dist::ReduceOp::Mean);  // the global batch's loss
            if (r == 0) std::cout << "step " << step << " loss " << l[0] << "\n";
        }
    } catch (const std::exception& e) {  // end every rank: the others may wait in a collective
        std::cerr << "ddp_basics: rank " << r << ": " << e.what() << "\n";
        dist::abort(1);
    }
}
