// examples/attention_basics.cpp — attention step by step on the embedding lesson's toy table.
//
// The sequence is the four tokens of the lesson's table, robot arm box tool (T = 4, d = 3):
//   1. queries, keys and values Q, K, V (T, d) = X (T, d) · Wq, Wk, Wv (d, d)
//   2. scores (T, T) = Q·Kᵀ / √d: how well each query matches each key
//   3. weights (T, T) = softmax over each row: ≥ 0, each row sums to 1
//   4. context (T, d) = weights · V: each token's weighted average of the values
//   5. all of it again with the causal mask (token t sees tokens 0..t only)
//   6. the permutation check: without positions, attention ignores order; with sinusoidal
//      positions added to the embeddings, it does not
// and a heatmap of both weight matrices (gnuplot), in out/attention_basics/weights.png (exit
// status 1 if it cannot be written).
//
// Every number is checked against a plain loop in double written here (and the scores against
// the embedding lesson's dot products); the program exits with status 1 on a mismatch, which is
// how the test suite runs it (ctest: example_attention_basics).
//
// Run: build/examples/attention_basics
#include <cmath>
#include <filesystem>
#include <iterator>
#include <limits>
#include <sstream>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <xtensor/xview.hpp>

#include <xgrad/core/ops.hpp>
#include <xgrad/io/atomic_file.hpp>
#include "common/gnuplot.hpp"
#include <xgrad/nn/attention.hpp>
#include <xgrad/nn/positional.hpp>

using namespace xgrad;
namespace F = xgrad::nn::functional;

static int failures = 0;
static const std::vector<std::string> tokens{"robot", "arm", "box", "tool"};

// Counts a mismatch beyond `tol` between two tensors of the same shape, and says which.
static void expect_close(const std::string& label, const Tensor& got, const Tensor& want, double tol = 1e-5) {
    double worst = got.shape() == want.shape() ? 0 : std::numeric_limits<double>::infinity();
    for (std::size_t i = 0; worst < 1e300 && i < got.data().size(); ++i)
        worst = std::max(worst, double(std::abs(got.data().data()[i] - want.data().data()[i])));
    const bool ok = worst <= tol;
    fmt::print("  check {:<66} max |diff| {:.1e}  {}\n", label, worst, ok ? "ok" : "MISMATCH");
    if (!ok) ++failures;
}

// A (T, n) matrix with the token names down the side.
static void print_rows(const std::string& title, const Tensor& m, const std::vector<std::string>& columns) {
    fmt::print("\n{}\n        ", title);
    for (const std::string& c : columns) fmt::print("{:>8}", c);
    fmt::print("\n");
    for (std::int64_t i = 0; i < m.size(0); ++i) {
        fmt::print("  {:<6}", tokens[i]);
        for (std::int64_t j = 0; j < m.size(1); ++j) fmt::print("{:>8.4f}", m.at({i, j}));
        fmt::print("\n");
    }
}

// The reference: attention for one (T, d) sequence as plain loops in double, no xgrad ops.
static std::vector<Tensor> attention_by_hand(const Tensor& Q, const Tensor& K, const Tensor& V, bool causal) {
    const std::int64_t T = Q.size(0), d = Q.size(1);
    Tensor scores = zeros({T, T}), weights = zeros({T, T}), context = zeros({T, d});
    for (std::int64_t i = 0; i < T; ++i) {
        const std::int64_t seen = causal ? i + 1 : T;  // keys 0 .. seen-1 may be attended
        double z = 0;
        for (std::int64_t j = 0; j < T; ++j) {
            double dot = 0;
            for (std::int64_t c = 0; c < d; ++c) dot += double(Q.at({i, c})) * K.at({j, c});
            scores.mutable_data()(i, j) = real(dot / std::sqrt(double(d)));
            if (j < seen) z += std::exp(dot / std::sqrt(double(d)));
        }
        for (std::int64_t j = 0; j < seen; ++j) weights.mutable_data()(i, j) = real(std::exp(double(scores.at({i, j}))) / z);
        for (std::int64_t j = 0; j < T; ++j)
            for (std::int64_t c = 0; c < d; ++c) context.mutable_data()(i, c) += weights.at({i, j}) * V.at({j, c});
    }
    return {scores, weights, context};
}

static const std::size_t T = 4, d = 3;  // 4 tokens, 3 features

// ---- the toy table of the embedding lesson: one row per token, d = 3 features -----------
static Tensor toy_table() {
    return Tensor({{ 1.0, 0.0, 1.0},    // robot
                   { 0.9, 0.1, 0.8},    // arm
                   { 0.0, 1.0, 0.0},    // box
                   {-1.0, 0.0, 0.5}});  // tool
}

// ---- the projections --------------------------------------------------------------------
// A trained model learns Wq, Wk, Wv. These small fixed ones are chosen to be read:
// Wq = I, so each query is the token's own embedding; Wk = I too, so every score is a dot
// product from the embedding lesson (robot·arm = 1.7) divided by √3; Wv keeps features 0
// and 2 and drops feature 1, so the context vectors are visibly mixtures of the rows.
struct Projections {
    Tensor Wq, Wk, Wv;  // (d, d) each
};

static Projections fixed_projections() {
    return {Tensor({{1, 0, 0}, {0, 1, 0}, {0, 0, 1}}),
            Tensor({{1, 0, 0}, {0, 1, 0}, {0, 0, 1}}),
            Tensor({{1, 0, 0}, {0, 0, 0}, {0, 0, 1}})};
}

// scores (T, T) = Q (T, d) · Kᵀ (d, T) / √d: how well each query matches each key
static Tensor scaled_scores(const Tensor& Q, const Tensor& K) {
    return matmul(Q, transpose(K, 0, 1)) * real(1 / std::sqrt(double(d)));
}

// ---- without a mask: every token sees every token ------------------------------------
// Returns the weights (T, T), for the heatmap.
static Tensor attention_without_mask(const Tensor& Q, const Tensor& K, const Tensor& V) {
    const Tensor scores = scaled_scores(Q, K);
    // weights (T, T) = softmax over each row (over the keys)
    const Tensor weights = softmax(scores, -1);
    // context (T, d) = weights (T, T) · V (T, d)
    const Tensor context = matmul(weights, V);
    print_rows("scores = Q·Kᵀ/√d (row: query, column: key)", scores, tokens);
    print_rows("weights = softmax(scores) over each row", weights, tokens);
    print_rows("context = weights·V", context, {"f0", "f1", "f2"});
    const auto hand = attention_by_hand(Q, K, V, /*causal=*/false);
    fmt::print("\n");
    expect_close("score[robot, arm] = robot·arm / √3 = 1.7 / √3 (lesson)",
                 Tensor(scores.at({0, 1})), Tensor(real(1.7 / std::sqrt(3.0))));
    expect_close("score[robot, tool] = -0.5 / √3 (lesson)", Tensor(scores.at({0, 3})), Tensor(real(-0.5 / std::sqrt(3.0))));
    expect_close("scores against a loop in double", scores, hand[0]);
    expect_close("weights against a loop in double", weights, hand[1]);
    expect_close("every row of the weights sums to 1", sum(weights, -1), ones({T}));
    expect_close("context against a loop in double", context, hand[2]);
    expect_close("scaled_dot_product_attention(Q, K, V) = context", F::scaled_dot_product_attention(Q, K, V), context);
    return weights;
}

// ---- with the causal mask: token t sees tokens 0..t ------------------------------------
// Returns the weights (T, T), for the heatmap.
static Tensor attention_with_causal_mask(const Tensor& Q, const Tensor& K, const Tensor& V) {
    const Tensor scores = scaled_scores(Q, K);
    // blocked (T, T) = 1 above the diagonal; those scores become -inf, so e^-inf = 0 weight
    const Tensor blocked = triu(ones({T, T}), 1);
    const Tensor scores_c = masked_fill(scores, blocked, -std::numeric_limits<real>::infinity());
    const Tensor weights_c = softmax(scores_c, -1);
    const Tensor context_c = matmul(weights_c, V);
    print_rows("causal scores (-inf: a later token, not visible)", scores_c, tokens);
    print_rows("causal weights", weights_c, tokens);
    print_rows("causal context", context_c, {"f0", "f1", "f2"});
    const auto hand_c = attention_by_hand(Q, K, V, /*causal=*/true);
    fmt::print("\n");
    expect_close("causal weights against a loop in double", weights_c, hand_c[1]);
    expect_close("causal weights: every row sums to 1", sum(weights_c, -1), ones({T}));
    expect_close("causal weights above the diagonal are exactly 0", weights_c * blocked, zeros({T, T}), 0);
    expect_close("robot (first) attends only to itself: context = its value",
                 narrow(context_c, 0, 0, 1), narrow(V, 0, 0, 1));
    expect_close("causal context against a loop in double", context_c, hand_c[2]);
    expect_close("scaled_dot_product_attention(..., is_causal) = causal context",
                 F::scaled_dot_product_attention(Q, K, V, Tensor(), /*is_causal=*/true), context_c);
    return weights_c;
}

// ---- the permutation check --------------------------------------------------------------
// Attention over the rows of x, without a mask: a causal mask is itself a notion of order.
static Tensor attend(const Tensor& x, const Projections& W) {
    return F::scaled_dot_product_attention(matmul(x, W.Wq), matmul(x, W.Wk), matmul(x, W.Wv));
}

static void permutation_check(const Tensor& X, const Projections& W) {
    // Reorder the tokens to box robot tool arm (perm[i] = the old position of new token i).
    const IndexTensor perm{2, 0, 3, 1};
    fmt::print("\nPermutation check: the sequence reordered to box robot tool arm\n");
    // Without positions: out(permuted x) = the rows of out(x), permuted the same way.
    expect_close("no positions: out(P·X) = P·out(X), attention is blind to order",
                 attend(index_select(X, 0, perm), W), index_select(attend(X, W), 0, perm));
    // With sinusoidal positions added by slot (Vaswani et al. 2017, §3.5), a token's vector
    // depends on where it stands, and the same check fails: order now matters.
    const Tensor pe = nn::sinusoidal_positions(std::int64_t(T), std::int64_t(d));  // (T, d)
    const Tensor moved = attend(index_select(X, 0, perm) + pe, W) - index_select(attend(X + pe, W), 0, perm);
    const double gap = xt::amax(xt::abs(moved.data()))();
    const bool order_matters = gap > 1e-2;  // far above float rounding (float rounding is about 1e-7)
    fmt::print("  check {:<66} max |diff| {:.1e}  {}\n", "with positions: out(P·X + PE) differs from P·out(X + PE)",
               gap, order_matters ? "ok" : "MISMATCH");
    failures += !order_matters;
}

// ---- the heatmap ------------------------------------------------------------------------
// Both weight matrices side by side, in out/attention_basics/weights.png (gnuplot): the numbers
// in weights.dat and the script in weights.gp, each written with io::write_file_atomically.
// Throws std::runtime_error naming the file that cannot be written.
static void draw_heatmap(const Tensor& weights, const Tensor& weights_c) {
    const std::string dir = "out/attention_basics";
    std::filesystem::create_directories(dir);
    std::string data;
    for (const Tensor* w : {&weights, &weights_c}) {  // two blocks, each T rows of T numbers
        for (std::size_t i = 0; i < T; ++i)
            fmt::format_to(std::back_inserter(data), "{:.6f}\n", fmt::join(xt::view(w->data(), i, xt::all()), " "));
        data += "\n\n";
    }
    io::write_file_atomically(dir + "/weights.dat", data, "draw_heatmap");
    std::ostringstream gp;
    gp << "set terminal pngcairo size 960,430 noenhanced font ',11'\n"
       << "set output '" << dir << "/weights.png'\n"
       << "set multiplot layout 1,2 title 'attention weights softmax(Q·Kᵀ/√d): row = query, column = key'\n"
       << "set xtics ('robot' 0, 'arm' 1, 'box' 2, 'tool' 3)\nset ytics ('robot' 0, 'arm' 1, 'box' 2, 'tool' 3)\n"
       << "set yrange [3.5:-0.5]\nset xrange [-0.5:3.5]\nset cbrange [0:1]\nset palette defined (0 'white', 1 '#2c5d9f')\n"
       << "set size square\nunset key\n";
    for (int block = 0; block < 2; ++block)
        gp << "set title '" << (block == 0 ? "no mask" : "causal mask") << "'\n"
           << "plot '" << dir << "/weights.dat' index " << block << " matrix with image, "
           << "'' index " << block << " matrix using 1:2:(sprintf('%.2f', $3)) with labels\n";
    gp << "unset multiplot\n";
    fmt::print("\n{}\n", examples::run_gnuplot(dir + "/weights.gp", gp.str(), dir + "/weights.png", "wrote"));
}

int main() {
    const Tensor X = toy_table();
    const Projections W = fixed_projections();
    // Q, K, V (T, d) = X (T, d) · W (d, d)
    const Tensor Q = matmul(X, W.Wq), K = matmul(X, W.Wk), V = matmul(X, W.Wv);
    fmt::print("Attention over the sequence robot arm box tool (T = {}, d = {})\n", T, d);
    const Tensor weights = attention_without_mask(Q, K, V);
    const Tensor weights_c = attention_with_causal_mask(Q, K, V);
    permutation_check(X, W);
    bool drawn = true;
    try {
        draw_heatmap(weights, weights_c);
    } catch (const std::exception& e) {  // out/ not writable: the checks above still stand
        drawn = false;
        fmt::print(stderr, "\nheatmap not drawn: {}\n", e.what());
    }
    fmt::print("\n{}\n", failures == 0 ? "All values check." : fmt::format("{} MISMATCHES", failures));
    return failures == 0 && drawn ? 0 : 1;
}
