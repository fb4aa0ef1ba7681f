// examples/char_mlp/model.hpp — the MLP language model of Bengio et al. (2003), makemore-style.
//
//   x (B, block) int64 character ids
//   → Embedding(V, d)          e (B, block, d)      one learned d-vector per character
//   → concatenate the block    h0 (B, block·d)      (a reshape: the rows are already adjacent)
//   → Linear(block·d, hidden)  → tanh               h1 (B, hidden)
//   → Linear(hidden, V)        logits (B, V)        unnormalised log-probabilities of the next char
#pragma once

#include <memory>

#include <xgrad/nn/nn.hpp>

namespace char_mlp {

using namespace xgrad;

class CharMLP : public nn::Module {
public:
    CharMLP(int vocab, int block, int embed_dim, int hidden) : block_(block), embed_dim_(embed_dim) {
        emb = register_module("emb", std::make_shared<nn::Embedding>(vocab, embed_dim));
        fc1 = register_module("fc1", std::make_shared<nn::Linear>(block * embed_dim, hidden));
        fc2 = register_module("fc2", std::make_shared<nn::Linear>(hidden, vocab));
    }

    Tensor forward(const IndexTensor& x) const {             // x: (B, block)
        Tensor e = emb->forward(x);                           // (B, block, d)
        Tensor h0 = e.reshape({-1, block_ * embed_dim_});     // (B, block·d)
        Tensor h1 = fc1->forward(h0).tanh();                  // (B, hidden)
        return fc2->forward(h1);                              // (B, V) logits
    }

    std::shared_ptr<nn::Embedding> emb;
    std::shared_ptr<nn::Linear> fc1, fc2;

private:
    int block_, embed_dim_;
};

}  // namespace char_mlp
