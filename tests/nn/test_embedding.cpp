// tests/nn/test_embedding.cpp — nn::Embedding and functional::embedding: initialisation, lookup,
// the row-scatter backward, padding, bad IDs, sparse gradients, the one-hot oracle
// (one_hot(ids, V) @ E), statistics. Gradchecks are in gradcheck_embedding.cpp.
//
// Legend: B batch, T time, V vocabulary, d width.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <xtensor/xview.hpp>

#include <xgrad/nn/nn.hpp>
#include "test_helpers.hpp"

using namespace xgrad;
using namespace xgrad::testing;
using Catch::Matchers::Contains;
namespace F = xgrad::nn::functional;

// =============================================================================================
// Embedding
// =============================================================================================

TEST_CASE("Embedding weight is standard normal N(0 1)", "[nn][embedding]") {
    manual_seed(123);
    nn::Embedding emb(1000, 100);  // 100k values
    REQUIRE(emb.weight.shape() == Shape{1000, 100});
    REQUIRE(emb.num_parameters() == 100000);
    auto mean_std = [](const Array& a) {
        double s = 0, s2 = 0;
        for (real v : a) s += v;
        const double mean = s / double(a.size());
        for (real v : a) s2 += (v - mean) * (v - mean);
        return std::pair<double, double>{mean, std::sqrt(s2 / double(a.size()))};
    };
    const auto [mean, sd] = mean_std(emb.weight.data());
    // Standard errors for 100k samples: 0.003 for the mean, 0.002 for the std.
    REQUIRE(std::abs(mean) < 0.02);
    REQUIRE(std::abs(sd - 1) < 0.05);
    // U(-1, 1) has std 1/√3 ≈ 0.577: the test above would catch that mistake.
    Tensor u = rand({1000, 100});
    const double ustd = mean_std(Array(2 * u.data() - 1)).second;
    REQUIRE(std::abs(ustd - 1) > 0.4);
    // Tails: N(0, 1) exceeds |3| with probability 0.0027, so ~270 of 100k; U(-1, 1) never.
    std::size_t beyond3 = 0;
    for (real v : emb.weight.data()) beyond3 += std::abs(v) > 3;
    REQUIRE(beyond3 > 150);
    REQUIRE(beyond3 < 400);

    CHECK_THAT(message_of<ValueError>([] { nn::Embedding(0, 3); }), Contains("Embedding") && Contains("(0, 3)"));
    CHECK_THAT(message_of<ValueError>([] { nn::Embedding(3, -1); }), Contains("(3, -1)"));
    // V·d·4 bytes beyond 2^64 would wrap around to a tiny allocation, and lookups would then
    // read outside it.
    CHECK_THAT(message_of<ValueError>([] { nn::Embedding(std::int64_t(1) << 32, std::int64_t(1) << 32); }),
               Contains("Embedding: a (4294967296, 4294967296) table is too large"));
}

TEST_CASE("Embedding forward: ids (BxT) give (BxTxd) - each row the table's row", "[nn][embedding]") {
    nn::Embedding emb(6, 2);
    for (std::size_t r = 0; r < 6; ++r)
        for (std::size_t j = 0; j < 2; ++j) emb.weight.mutable_data()(r, j) = static_cast<real>(10 * r + j);
    Tensor y = emb.forward(IndexTensor{{1, 3, 5}, {0, 3, 3}});
    require_values(y, {{{10, 11}, {30, 31}, {50, 51}}, {{0, 1}, {30, 31}, {30, 31}}}, 0);
    // Any shape of IDs: (N,), (B, T, U), and a 0-d scalar ID.
    require_values(emb.forward(IndexTensor{4, 2}), {{40, 41}, {20, 21}}, 0);
    REQUIRE(emb.forward(IndexTensor{{{1}, {2}}, {{3}, {4}}}).shape() == Shape{2, 2, 1, 2});
    require_values(emb.forward(IndexTensor(IndexArray(std::int64_t(5)))), {50, 51}, 0);
    REQUIRE(emb.forward(IndexTensor{1}).requires_grad());
    REQUIRE(emb.forward(IndexTensor{1}).grad_fn()->name == "embedding");
}

TEST_CASE("Embedding backward touches only the looked-up rows - duplicates sum", "[nn][embedding]") {
    nn::Embedding emb(6, 2);
    IndexTensor ids{{1, 3}, {3, 0}};
    Tensor G = counting({2, 2, 2});  // [[[1,2],[3,4]],[[5,6],[7,8]]]
    weighted_sum(emb.forward(ids), G).backward();
    // row 1 ← G[0,0]; row 3 ← G[0,1] + G[1,0]; row 0 ← G[1,1]; rows 2, 4, 5: exactly 0.
    require_values(emb.weight.grad(), {{7, 8}, {1, 2}, {0, 0}, {3 + 5, 4 + 6}, {0, 0}, {0, 0}}, 0);
    // A second backward accumulates with +=.
    weighted_sum(emb.forward(IndexTensor{2}), Tensor({{100, 200}})).backward();
    require_values(emb.weight.grad(), {{7, 8}, {1, 2}, {100, 200}, {8, 10}, {0, 0}, {0, 0}}, 0);
}

TEST_CASE("Embedding padding_idx: a zero row that gets no gradient", "[nn][embedding]") {
    nn::Embedding emb(6, 2, nn::EmbeddingOptions().padding_idx(3));
    REQUIRE(emb.options().padding_idx() == 3);
    require_values(Tensor(Array(xt::view(emb.weight.data(), 3))), {0, 0}, 0);
    REQUIRE(emb.weight.at({2, 0}) != 0);  // the other rows are random
    Tensor y = emb.forward(IndexTensor{{1, 3}, {3, 0}});
    require_values(Tensor(Array(xt::view(y.data(), 0, 1))), {0, 0}, 0);  // the padding row as is
    weighted_sum(y, counting({2, 2, 2})).backward();
    require_values(emb.weight.grad(), {{7, 8}, {1, 2}, {0, 0}, {0, 0}, {0, 0}, {0, 0}}, 0);

    // Negative padding_idx counts from the end: -1 is row V - 1.
    nn::Embedding last(6, 2, nn::EmbeddingOptions().padding_idx(-1));
    REQUIRE(last.options().padding_idx() == 5);
    require_values(Tensor(Array(xt::view(last.weight.data(), 5))), {0, 0}, 0);
    weighted_sum(last.forward(IndexTensor{5, 4}), Tensor({{1, 1}, {2, 2}})).backward();
    require_values(Tensor(Array(xt::view(last.weight.grad().data(), 5))), {0, 0}, 0);
    require_values(Tensor(Array(xt::view(last.weight.grad().data(), 4))), {2, 2}, 0);
    nn::Embedding first(6, 2, nn::EmbeddingOptions().padding_idx(-6));
    REQUIRE(first.options().padding_idx() == 0);

    // Out of range: [-V, V).
    CHECK_THAT(message_of<ValueError>([] { nn::Embedding(6, 2, nn::EmbeddingOptions().padding_idx(6)); }),
               Contains("padding_idx 6 out of range [-6, 6)"));
    CHECK_THAT(message_of<ValueError>([] { nn::Embedding(6, 2, nn::EmbeddingOptions().padding_idx(-7)); }),
               Contains("padding_idx -7 out of range [-6, 6)"));
    Tensor w = randn({4, 2}, true);
    CHECK_THAT(message_of<ValueError>([&] { F::embedding(w, IndexTensor{0}, 4); }),
               Contains("embedding") && Contains("padding_idx 4 out of range [-4, 4)"));
}

TEST_CASE("hostile: Embedding: IDs outside 0..V-1 throw IndexError at forward time", "[nn][embedding][hostile]") {
    nn::Embedding emb(5, 3);
    const Snapshot before = snapshot(emb);
    const std::string msg = message_of<IndexError>([&] { emb.forward(IndexTensor{{0, 1, 2}, {3, 4, 7}}); });
    // The position, the value and V, in the project's format.
    REQUIRE(msg == "embedding: index 7 at position (1, 2) out of range [0, 5)");
    CHECK_THAT(message_of<IndexError>([&] { emb.forward(IndexTensor{{0, -1}}); }),
               Contains("index -1 at position (0, 1) out of range [0, 5)"));
    CHECK_THAT(message_of<IndexError>([&] { emb.forward(IndexTensor{5}); }),
               Contains("index 5 at position (0) out of range [0, 5)"));
    CHECK_THAT(message_of<IndexError>([&] { emb.forward(IndexTensor{std::numeric_limits<std::int64_t>::max()}); }),
               Contains("index 9223372036854775807"));
    CHECK_THAT(message_of<IndexError>([&] { emb.forward(IndexTensor{std::numeric_limits<std::int64_t>::min()}); }),
               Contains("index -9223372036854775808"));
    require_unchanged(emb, before);
    REQUIRE_FALSE(emb.weight.has_grad());
    // A weight that is not (V, d).
    CHECK_THAT(message_of<ValueError>([] { F::embedding(zeros({4}), IndexTensor{0}); }),
               Contains("weight must be (V, d)"));
}

TEST_CASE("hostile: Embedding: an empty batch of IDs", "[nn][embedding][hostile]") {
    nn::Embedding emb(5, 3);
    Tensor y = emb.forward(IndexTensor(IndexArray::from_shape({0})));
    REQUIRE(y.shape() == Shape{0, 3});
    y.sum().backward();
    REQUIRE(emb.last_backward_stats().tokens == 0);
    REQUIRE(emb.last_backward_stats().rows_touched == 0);
    require_values(emb.weight.grad(), zeros({5, 3}), 0);

    nn::Embedding sparse(5, 3, nn::EmbeddingOptions().sparse(true));
    Tensor ys = sparse.forward(IndexTensor(IndexArray::from_shape({2, 0})));
    REQUIRE(ys.shape() == Shape{2, 0, 3});
    ys.sum().backward();
    REQUIRE(sparse.weight.sparse_grad() != nullptr);
    REQUIRE(sparse.weight.sparse_grad()->indices.empty());
    require_values(from_array(sparse.weight.sparse_grad()->to_dense()), zeros({5, 3}), 0);
}

TEST_CASE("Embedding sparse=true: a coalesced gradient equal to the dense one", "[nn][embedding][sparse]") {
    manual_seed(7);
    nn::Embedding dense(6, 2);
    nn::Embedding sparse(6, 2, nn::EmbeddingOptions().sparse(true));
    sparse.weight.mutable_data() = dense.weight.data();
    IndexTensor ids{{3, 1}, {3, 0}};
    Tensor G = counting({2, 2, 2});
    weighted_sum(dense.forward(ids), G).backward();
    weighted_sum(sparse.forward(ids), G).backward();

    const SparseGrad* sg = sparse.weight.sparse_grad();
    REQUIRE(sg != nullptr);
    REQUIRE(sg->dense_shape == Shape{6, 2});
    REQUIRE(sg->indices == std::vector<std::int64_t>{0, 1, 3});  // sorted, unique: (k,)
    require_values(from_array(sg->values), {{7, 8}, {3, 4}, {1 + 5, 2 + 6}}, 0);  // (k, d)
    REQUIRE(sg->nbytes() == 3 * 8 + 3 * 2 * sizeof(real));
    require_values(from_array(sg->to_dense()), dense.weight.grad(), 0);
    CHECK_THAT(message_of<ValueError>([&] { sparse.weight.grad(); }), Contains("row-sparse"));

    // A second backward accumulates and re-coalesces: row 3 appears in both batches.
    IndexTensor ids2{5, 3, 5};
    Tensor G2({{10, 20}, {30, 40}, {50, 60}});
    weighted_sum(dense.forward(ids2), G2).backward();
    weighted_sum(sparse.forward(ids2), G2).backward();
    REQUIRE(sg->indices == std::vector<std::int64_t>{0, 1, 3, 5});
    require_values(from_array(sg->values), {{7, 8}, {3, 4}, {6 + 30, 8 + 40}, {60, 80}}, 0);
    require_values(from_array(sg->to_dense()), dense.weight.grad(), 0);

    // A dense gradient meeting the sparse one (the table used again, as by a tied output head,
    // nn/tying.hpp) sums into a dense gradient.
    Tensor w = sparse.weight;
    (w * 2).sum().backward();
    REQUIRE(sparse.weight.sparse_grad() == nullptr);
    require_values(sparse.weight.grad(), add(dense.weight.grad(), 2), 0);
    // sparse=true on a non-leaf weight that requires grad is refused at forward time.
    Tensor base = randn({4, 2}, true);
    CHECK_THAT(message_of<ValueError>([&] { F::embedding(base * 2, IndexTensor{0}, {}, true); }),
               Contains("sparse=true needs the weight to be a leaf"));
}

TEST_CASE("Embedding equals the one-hot oracle: one_hot(ids V) @ E - in output and gradient",
          "[nn][embedding][oracle]") {
    const std::size_t V = 7, d = 4;
    IndexTensor ids{{1, 6, 1}, {0, 3, 6}};  // (B, T) = (2, 3), with duplicates
    manual_seed(8);
    Tensor G = randn({2, 3, d});
    for (bool sparse : {false, true}) {
        INFO("sparse = " << sparse);
        Tensor E = randn({V, d}, true);
        Tensor E_ref = from_array(E.data(), true);  // same values, a separate leaf
        Tensor y = F::embedding(E, ids, {}, sparse);
        Tensor y_ref = matmul(one_hot(ids, V), E_ref);  // (B, T, V) @ (V, d) = (B, T, d)
        require_values(y, y_ref, 0);  // 1·e + Σ 0·e' is exact
        weighted_sum(y, G).backward();
        weighted_sum(y_ref, G).backward();
        const Array grad = sparse ? E.sparse_grad()->to_dense() : E.grad().data();
        require_values(from_array(grad), E_ref.grad(), 1e-6);
        // Rows 2, 4, 5 were never looked up: exactly zero in both paths.
        for (std::size_t r : {2, 4, 5})
            for (std::size_t j = 0; j < d; ++j) REQUIRE(grad(r, j) == 0);
    }
}

TEST_CASE("Embedding statistics of the last backward", "[nn][embedding][stats]") {
    // V = 5, d = 4, padding 0; ids [[1, 3, 3], [0, 2, 3]]: 6 tokens, one of them padding; the
    // other 5 hit rows {1, 2, 3}, so k = 3 and duplicates = 5 - 3 = 2.
    IndexTensor ids{{1, 3, 3}, {0, 2, 3}};
    nn::Embedding dense(5, 4, nn::EmbeddingOptions().padding_idx(0));
    dense.forward(ids).sum().backward();
    const auto& s = dense.last_backward_stats();
    REQUIRE(s.tokens == 6);
    REQUIRE(s.rows_touched == 3);
    REQUIRE(s.duplicates == 2);
    REQUIRE(s.bytes_written == 5 * 4 * sizeof(real));  // 5 row additions of d floats: 80 bytes

    nn::Embedding sparse(5, 4, nn::EmbeddingOptions().padding_idx(0).sparse(true));
    sparse.forward(ids).sum().backward();
    const auto& ss = sparse.last_backward_stats();
    REQUIRE(ss.tokens == 6);
    REQUIRE(ss.rows_touched == 3);
    REQUIRE(ss.duplicates == 2);
    REQUIRE(ss.bytes_written == 3 * (4 * sizeof(real) + 8));  // k rows + k int64 indices: 72 bytes
    // Every row of ones was summed: row 3 three times.
    require_values(from_array(sparse.weight.sparse_grad()->values), {{1, 1, 1, 1}, {1, 1, 1, 1}, {3, 3, 3, 3}}, 0);
}
