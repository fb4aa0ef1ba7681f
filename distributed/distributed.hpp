// distributed/distributed.hpp — several processes, one model: the collectives of MPI on tensors.
//
// Legend: W processes ("ranks") numbered r = 0..W−1; n values per rank; k rows of a row-sparse
// gradient of a (V, d) table.
//
// The collectives below (torch.distributed's names; the table in distributed/README.md, "The
// collectives") and, inside DDP and ZeRO, the gradients' reduce-scatter in rank order
// (detail/synced.hpp) are the only messages xgrad sends: every rank calls each, in the same order.
// The transport is Open MPI's (backend_mpi.cpp). A process not started by mpirun, or a build without
// MPI (backend_single.cpp), is rank 0 of a world of 1, where every collective returns its input.
// A rank that skips a call is not detected (its next call pairs with the others' skipped one). A
// rank that throws while the others wait ends them all with abort() (the README's "Faults").
//
// ref: MPI Forum, MPI-3.1 standard, ch. 5 (collective communication); PyTorch docs, torch.distributed.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <xgrad/core/tensor.hpp>

namespace xgrad::distributed {

enum class ReduceOp { Sum, Mean };

// ---- the process group ------------------------------------------------------------------------
// Starts MPI (MPI_Init_thread, MPI_THREAD_FUNNELED: only the main thread calls MPI) when the process
// was started by mpirun; otherwise the world is this process alone. Idempotent. argc/argv may be null.
// Throws std::runtime_error when MPI was already finalized in this process (it cannot restart), or
// when xgrad was built without MPI but mpirun started this process among W > 1 ranks.
void init(int* argc = nullptr, char*** argv = nullptr);
// Ends MPI (MPI_Finalize) if init started it. Every rank must call it; idempotent.
void finalize();
// init() on construction, finalize() on destruction: the first line of a distributed main().
// A failure must end every rank, not only its own: MPI_Finalize, and the other ranks' next
// collective, would wait for it forever. So main() catches, prints and calls abort(1):
//     try { ... } catch (const std::exception& e) { std::cerr << e.what() << "\n"; distributed::abort(1); }
// (an exception that leaves main() uncaught ends the process without unwinding: mpirun then stops
// the others). The guard's destructor also calls abort(1) when an exception unwinds through it.
class InitGuard {
public:
    InitGuard(int* argc = nullptr, char*** argv = nullptr) { init(argc, argv); }
    ~InitGuard();
    InitGuard(const InitGuard&) = delete;
    InitGuard& operator=(const InitGuard&) = delete;
};

bool mpi_available();  // built with MPI (false: backend_single.cpp)
bool is_initialized(); // init() has run and finalize() has not
int rank();            // r in [0, W); 0 before init
int world_size();      // W ≥ 1; 1 before init
// "rank 1 of 2 (Open MPI v4.1.4 ...)" or "1 process (not started by mpirun)": for a run's first lines.
std::string describe();

// Ends every rank of the world at once with exit code `code` (MPI_Abort), after flushing stdout
// and stderr; with W = 1, std::exit(code). For a rank that has failed while the others may wait.
[[noreturn]] void abort(int code);

// ---- collectives on tensors: every rank calls each one, in the same order ---------------------
// Each first compares the ranks' calls (one all-gather of a 64-bit hash) and throws the same
// ValueError on every rank when they differ (collective, op, root, element type: float32 on
// xgrad, float64 on xgrad_f64; shape), when an argument is invalid on any rank, and before init()
// under mpirun; an MPI failure is a std::runtime_error.
void barrier();
// t's values (any shape, same on every rank) become root's. Bumps t's version. No autograd.
// Throws ValueError for an undefined t or a root outside [0, W).
void broadcast(Tensor& t, int root = 0);
// Elementwise sum (or mean) of t over the ranks, written into t on every rank. No autograd.
// Mean divides each rank's values by W before the sum, as PyTorch's DDP, so it overflows only
// where the mean does.
void all_reduce(Tensor& t, ReduceOp op = ReduceOp::Sum);
// The ranks' tensors stacked along a new first axis: t (...) → (W, ...), row r from rank r.
// Throws std::runtime_error above MPI's 2 GiB per call (W·t's bytes).
Tensor all_gather(const Tensor& t);
// Rank r's share of a sum: t (W, ...) on every rank → (...), the elementwise sum (or mean) over the
// ranks s of t_s[r] (PyTorch's torch.distributed.reduce_scatter_tensor; ref: PyTorch docs,
// https://pytorch.org/docs/stable/distributed.html). Elements of real: float32 on xgrad, float64
// on xgrad_f64. Mean divides each rank's values by W before the sum, as all_reduce. No autograd:
// the result is a new tensor without a graph. A reduce-scatter then an all-gather of the (...)
// results is an all-reduce moving the same bytes, as the ring does it: in each half every rank
// sends and receives (W − 1)/W of t's bytes, so a rank can work on its shard in between.
// Throws ValueError for an undefined t, a 0-dimensional t or t.shape[0] ≠ W, and on every rank when
// the ranks' shapes, element types or ops differ; std::runtime_error above MPI's INT_MAX elements
// per call (t's W·n).
Tensor reduce_scatter(const Tensor& t, ReduceOp op = ReduceOp::Sum);

// A row-sparse gradient summed (or averaged) over the ranks without densifying it: every rank
// contributes its k_r (indices, rows); the union of Σ k_r rows is coalesced, duplicates summed in
// rank order, so every rank holds the same (k ≤ Σ k_r, d) result. Cost: Σ k_r·(8 + d·sizeof(real))
// bytes received per rank, instead of V·d·sizeof(real) for the dense all-reduce.
// Throws ValueError for a g whose values do not match its indices or whose indices fall outside
// [0, V); std::runtime_error above MPI's 2 GiB per call (the rows of all ranks together).
SparseGrad all_reduce(const SparseGrad& g, ReduceOp op = ReduceOp::Sum);

// ---- collectives on plain values --------------------------------------------------------------
// values (n,) summed or averaged elementwise over the ranks (losses, counts).
void all_reduce(std::vector<double>& values, ReduceOp op = ReduceOp::Sum);
// Every rank's text, in rank order, when they differ; empty when every rank passes the same text.
// One round of 64-bit hashes (FNV-1a), and a second with the texts only when the hashes differ.
std::vector<std::string> gather_if_different(const std::string& text);
// Throws the same ValueError on every rank unless every rank passes the same text, naming `what`,
// the ranks whose text differs from rank 0's, and the first differing line ("flags: rank 1 differs
// from rank 0: line 3 is '--lr=0.002' on rank 1 and '--lr=0.001' on rank 0"). The texts are
// compared by a 64-bit FNV-1a hash and sent only when they differ. For configurations: flags, data,
// model shapes.
void check_same_on_all_ranks(const std::string& what, const std::string& text);

}  // namespace xgrad::distributed
