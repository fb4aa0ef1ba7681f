// examples/word2vec/model.hpp — skip-gram with negative sampling (Mikolov et al. 2013).
//
// Every word w has two vectors: v_w, its "input" vector, used when w is the centre word, and
// u_w, its "output" vector, used when w is a context word. For a centre c, its true context o
// and k negatives n_1..n_k drawn from P_n (corpus.hpp), the loss of one pair is
//
//     ℓ(c, o) = −log σ(u_o·v_c) − Σ_{i=1..k} log σ(−u_{n_i}·v_c)          (paper, eq. 4)
//
// i.e. logistic regression that tells the true context (label 1) from noise (label 0). Since
// −log σ(x) = BCE(x, 1) and −log σ(−x) = BCE(x, 0), ℓ is the binary cross-entropy of the k+1
// logits x_j = u_j·v_c against the targets (1, 0, …, 0), summed over j.
//
// Shapes, per batch of B pairs with k negatives each:
//   centres  (B, 1)   int64  → in_embed   → v (B, 1, d)
//   contexts (B, 1+k) int64  → out_embed  → u (B, 1+k, d)
//   u @ v               (B, 1+k, 1)     v viewed as (B, d, 1): B matrix-vector products
//   reshape             (B, 1+k)        the logits x_j = u_j·v_c
//
// Both tables are nn::Embedding(V, d, sparse=true): a batch touches at most B rows of
// in_embed and B·(1+k) rows of out_embed, so each backward yields a row-sparse gradient of
// those rows only, and Adam updates only them (optim/adam.hpp, the lazy update).
#pragma once

#include <memory>

#include "corpus.hpp"
#include <xgrad/nn/nn.hpp>

namespace word2vec {

using namespace xgrad;

class SkipGram : public nn::Module {
public:
    // Initialised as word2vec.c does (InitNet): v ~ U[−0.5/d, 0.5/d), u = 0. Small v keeps the
    // first logits near 0 (σ ≈ 1/2, the steepest point); nn::Embedding's N(0, 1) would give
    // logits of size ~√d and saturate σ. u = 0 costs nothing: the first step moves u along
    // ±v_c, and from then on both tables learn.
    SkipGram(std::int64_t vocab, std::int64_t dim, bool sparse, std::mt19937_64& rng) {
        const auto opts = nn::EmbeddingOptions().sparse(sparse);
        in_embed = register_module("in_embed", std::make_shared<nn::Embedding>(vocab, dim, opts));
        out_embed = register_module("out_embed", std::make_shared<nn::Embedding>(vocab, dim, opts));
        const double half_width = 0.5 / static_cast<double>(dim);
        for (real& x : in_embed->weight.mutable_data())
            x = static_cast<real>(half_width * (2 * uniform01(rng) - 1));
        out_embed->weight.mutable_data().fill(0);
    }

    // centres (B, 1), contexts (B, 1+k) → logits (B, 1+k), logits[b, j] = u_{contexts[b,j]}·v_{centres[b]}
    // The B dot-product groups are one batched matmul, (B, 1+k, d) @ (B, d, 1). The same
    // numbers come from (u * v).sum(-1) with v broadcast over the 1+k contexts; the matmul is
    // preferred because that form's backward copies one element at a time.
    Tensor forward(const IndexTensor& centres, const IndexTensor& contexts) const {
        const auto B = static_cast<std::int64_t>(contexts.shape()[0]);
        const auto K1 = static_cast<std::int64_t>(contexts.shape()[1]);
        Tensor v = in_embed->forward(centres).reshape({B, -1, 1});     // (B, 1, d) → (B, d, 1)
        Tensor u = out_embed->forward(contexts);                      // (B, 1+k, d)
        return matmul(u, v).reshape({B, K1});                          // (B, 1+k, 1) → (B, 1+k)
    }

    std::shared_ptr<nn::Embedding> in_embed, out_embed;
};

}  // namespace word2vec
