// examples/embedding_basics.cpp — the embedding lesson's worked numbers, computed with xgrad.
//
// Walks through the lesson "From Token IDs to Embedding Vectors", the one xgrad grew from, in code:
//   1. a toy table E (V = 4, d = 3) for the tokens robot, arm, box, tool
//   2. lookup = row selection, and the same result as one_hot(ids) @ E
//   3. dot products and cosine similarities between rows
//   4. parameter counts and memory of real tables (GPT-2 small, a 50k × 1,024 table)
//   5. the sparse gradient: only the rows that were looked up receive one
//
// Every number is checked against the lesson's value; the program exits with status 1 if any
// differs, which is how the test suite runs it (ctest: example_embedding_basics).
//
// Run: build/examples/embedding_basics
#include <cmath>
#include <cstdio>
#include <iostream>

#include <fmt/format.h>

#include <xgrad/core/ops.hpp>
#include <xgrad/nn/nn.hpp>
#include <xgrad/optim/optim.hpp>

using namespace xgrad;

static int failures = 0;

// Prints "label: got (lesson: want)" and counts a mismatch beyond `tol`.
static void expect(const std::string& label, double got, double want, double tol = 1e-6) {
    const bool ok = std::abs(got - want) <= tol;
    fmt::print("  {:<46} {:>16.6g}   (lesson: {:.6g}) {}\n", label, got, want, ok ? "ok" : "MISMATCH");
    if (!ok) ++failures;
}

// cos(a, b) = a·b / (|a| |b|), for 1-D tensors (d,)
static double cosine(const Tensor& a, const Tensor& b) {
    const double dot = sum(a * b).item();
    return dot / std::sqrt(sum(a * a).item() * sum(b * b).item());
}

// ---- 1. the toy table ------------------------------------------------------------------
// One row per token; columns are 3 learned features (here set by hand, as in the lesson).
static Tensor toy_table() {
    //                 f0    f1   f2
    Tensor E({{ 1.0, 0.0, 1.0},    // 0 robot
              { 0.9, 0.1, 0.8},    // 1 arm
              { 0.0, 1.0, 0.0},    // 2 box
              {-1.0, 0.0, 0.5}});  // 3 tool
    fmt::print("1. The toy table E, shape {} (V tokens × d features)\n", shape_str(E.shape()));
    expect("parameter count V·d", double(E.numel()), 12);
    return E;
}

// ---- 2. lookup is row selection, and equals the one-hot product ------------------------
static void lookup(const Tensor& E) {
    const std::int64_t V = E.size(0);
    IndexTensor ids{0, 1, 2};                        // robot, arm, box
    Tensor X = index_select(E, 0, ids);              // (3, 3): row i is E[ids[i]]
    Tensor X_onehot = matmul(one_hot(ids, V), E);    // (3, 4) @ (4, 3) → (3, 3)
    fmt::print("\n2. Looking up ids [0, 1, 2] gives shape {}\n", shape_str(X.shape()));
    expect("rows of the lookup", double(X.shape()[0]), 3);
    expect("max |lookup - one_hot(ids) @ E|", double(xt::amax(xt::abs(X.data() - X_onehot.data()))()), 0);

    // A batch of 8 sequences of 128 IDs into a d = 256 table gives (8, 128, 256).
    nn::Embedding table(/*V=*/1000, /*d=*/256);
    Tensor batch = table.forward(randint(0, 1000, {8, 128}));
    fmt::print("   a batch of IDs (8, 128) through a (1000, 256) table gives {}\n", shape_str(batch.shape()));
    expect("batch output dims", double(batch.dim()), 3);
    expect("batch output size", double(batch.numel()), 8.0 * 128 * 256);
}

// ---- 3. similarity -----------------------------------------------------------------------
static void similarity(const Tensor& E) {
    auto row = [&](std::int64_t i) { return index_select(E, 0, IndexTensor{i}).reshape({-1}); };
    fmt::print("\n3. Dot products and cosines against robot\n");
    expect("robot · arm", sum(row(0) * row(1)).item(), 1.7);
    expect("robot · box", sum(row(0) * row(2)).item(), 0.0);
    expect("robot · tool", sum(row(0) * row(3)).item(), -0.5);
    expect("cos(robot, arm)", cosine(row(0), row(1)), 0.995, 5e-4);
    expect("cos(robot, box)", cosine(row(0), row(2)), 0.0);
    expect("cos(robot, tool)", cosine(row(0), row(3)), -0.316, 5e-4);
    Tensor a({3, 4}), b({4, 3});
    expect("[3, 4] · [4, 3]", sum(a * b).item(), 24);
    expect("cos([3, 4], [4, 3])", cosine(a, b), 0.96);
}

// ---- 4. real table sizes ------------------------------------------------------------------
static void table_sizes() {
    fmt::print("\n4. Table sizes\n");
    const double gpt2_params = 50257.0 * 768;
    expect("GPT-2 small table: 50,257 × 768 parameters", gpt2_params, 38597376);
    expect("  in float32, MB (4 bytes each)", gpt2_params * 4 / 1e6, 154.389504);
    expect("50,000 × 1,024 table, millions of parameters", 50000.0 * 1024 / 1e6, 51.2);
    expect("  in 16-bit floats, MB (2 bytes each)", 50000.0 * 1024 * 2 / 1e6, 102.4);

    // Measure the training memory of a real GPT-2-sized table with Adam, using xgrad's own
    // report: parameter + gradient + exp_avg + exp_avg_sq = 4 copies of the table.
    nn::Embedding gpt2(50257, 768);
    optim::Adam opt(gpt2.named_parameters(), optim::AdamOptions(1e-3));
    Tensor out = gpt2.forward(IndexTensor{{464, 3290, 318, 257}});  // 4 token IDs
    sum(out).backward();
    opt.step();
    const optim::MemoryReport report = opt.memory_report();
    std::cout << report << "\n";
    const optim::MemoryRow total = report.total();
    const double table_bytes = gpt2_params * sizeof(real);
    expect("parameter bytes / table bytes", double(total.param_bytes) / table_bytes, 1);
    // The step counter (8 bytes) is the only part not a multiple of the table.
    expect("(param + grad + Adam state) / table bytes",
           double(total.param_bytes + total.grad_bytes + total.state_bytes()) / table_bytes, 4, 1e-6);
}

// ---- 5. the sparse gradient ----------------------------------------------------------------
// loss = Σ lookup(ids): dL/dE[r] = (number of times r appears) · 1, other rows exactly 0.
static void sparse_gradient(const Tensor& E) {
    Tensor E2 = E.detach().requires_grad_();
    sum(index_select(E2, 0, IndexTensor{0, 2, 2})).backward();  // robot once, box twice
    fmt::print("\n5. After one backward through the lookup of [robot, box, box]\n");
    const Tensor g = E2.grad();
    std::size_t nonzero_rows = 0;
    for (std::int64_t r = 0; r < E.size(0); ++r) {
        bool any = false;
        for (std::int64_t j = 0; j < 3; ++j) any = any || g.at({r, j}) != 0;
        nonzero_rows += any;
    }
    expect("rows with a non-zero gradient", double(nonzero_rows), 2);
    expect("dL/dE[robot, 0] (looked up once)", g.at({0, 0}), 1);
    expect("dL/dE[box, 0] (looked up twice: summed)", g.at({2, 0}), 2);
    expect("dL/dE[arm, 0] (never looked up)", g.at({1, 0}), 0);
}

int main() {
    const Tensor E = toy_table();
    lookup(E);
    similarity(E);
    table_sizes();
    sparse_gradient(E);
    fmt::print("\n{}\n", failures == 0 ? "All values match the lesson." : fmt::format("{} MISMATCHES", failures));
    return failures == 0 ? 0 : 1;
}
