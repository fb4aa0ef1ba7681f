// examples/word2vec/model.hpp — skip-gram with negative sampling (Mikolov et al. 2013).
//
// Every word w has an input vector v_w (as the centre) and an output vector u_w (as a context).
// For a centre c, its true context o and k negatives n_i drawn from P_n (corpus.hpp):
//
//     ℓ(c, o) = −log σ(u_o·v_c) − Σ_{i=1..k} log σ(−u_{n_i}·v_c)          (paper, eq. 4)
//
// = the binary cross-entropy of the k+1 logits x_j = u_j·v_c against (1, 0, …, 0), summed.
//   centres (B, 1) → in_embed → v (B, 1, d);   contexts (B, 1+k) → out_embed → u (B, 1+k, d)
//   logits (B, 1+k) = u @ v, v viewed as (B, d, 1)
// Both tables are sparse: a backward touches ≤ B rows of in_embed and ≤ B·(1+k) of out_embed, and
// Adam updates only those (optim/adam.hpp). examples/word2vec/README.md, "The model in one
// screen", derives it.
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
