// nn/tying.hpp — weight tying: the output head of a language model reuses the token table.
//
//   table E (V, d):   x_t     = E[id_t]                    (d,)   the input embedding
//   head  W (V, d):   logit_t = h_t Wᵀ                     (V,)   the output layer, Linear(d, V)
//   tied:             W = E, one tensor of V·d numbers instead of two
//
// Row v of E says how token v enters the model; row v of W says how much a hidden state h
// points at token v. Press & Wolf (2017) and Inan et al. (2017) share the two: the model gets
// V·d fewer parameters (38.6M of GPT-2 small's 124M), and a rare token's row is trained by
// every output softmax, not only when it appears as input. GPT-2 and nanoGPT do this.
//
// The shared table is ONE parameter, so it gets the sum of both uses' gradients:
//   dL/dE = Σ_{t : id_t = v} dL/dx_t  (row scatter of the lookup, rows v that appeared)
//         + (dL/dlogits)ᵀ · h          (the head's matmul gradient, (V, N)·(N, d), every row)
// Backward simply accumulates both into E.grad (+=), as for any tensor used twice.
//
// Legend: V vocabulary, d width, N rows (B·T tokens).
// ref: Press & Wolf 2017, "Using the Output Embedding to Improve Language Models";
//      Inan et al. 2017, "Tying Word Vectors and Word Classifiers"; nanoGPT model.py
#pragma once

#include "nn/embedding.hpp"
#include "nn/linear.hpp"

namespace xgrad::nn {

// Makes `head` (Linear(d, V), weight (V, d)) use `table`'s weight (Embedding(V, d)): after
// the call head.weight and table.weight are the same tensor, and the parameter registered in
// `head` as "weight" is that tensor. So the table is one parameter: named_parameters() lists
// it once, under its first name in traversal order (register the table's module before the
// head's to get "transformer.wte.weight"), an optimizer steps it once, its memory report row
// appears once, and state_dict()/save() store it once. The head's own former weight is dropped.
// The head's bias, if any, stays its own.
//
// Call it before building the optimizer: an optimizer made earlier holds the dropped tensor.
// Do not write `head.weight = table.weight` instead: Linear::forward then throws, because
// the optimizer would train a tensor the forward no longer reads.
//
// A sparse Embedding (EmbeddingOptions::sparse) tied to a head still trains: the head's
// gradient covers all V rows, so the lookup's rows are summed into that dense (V, d) gradient.
//
// Throws ValueError naming both shapes if head.weight is not (V, d) for table (V, d).
void tie_weights(Linear& head, const Embedding& table);

}  // namespace xgrad::nn
