// nn/tying.hpp — weight tying: the output head of a language model reuses the token table.
//
//   table E (V, d): x_t = E[id_t];   head W (V, d): logit_t = h_t Wᵀ;   tied: W = E, one tensor
//
// V·d fewer parameters, and a rare token's row is trained by every output softmax (GPT-2 and
// nanoGPT do it). The one parameter accumulates both uses' gradients:
//   dL/dE = Σ_{t : id_t = v} dL/dx_t  (the lookup's row scatter)  +  (dL/dlogits)ᵀ · h  (the head's)
//
// Legend: V vocabulary, d width. ref: Press & Wolf 2017, "Using the Output Embedding to Improve
// Language Models"; nanoGPT model.py (self.transformer.wte.weight = self.lm_head.weight).
#pragma once

#include <xgrad/nn/embedding.hpp>
#include <xgrad/nn/linear.hpp>

namespace xgrad::nn {

// Makes `head` (Linear(d, V)) use `table`'s weight (Embedding(V, d)) as its registered "weight":
// one parameter, listed, stepped and saved once under its first name (register the table's
// module first). The head keeps its bias. Call it before building the optimizer and adapting it.
// The table keeps Embedding's N(0, 1), right for a lookup but not for a head: logits of std ≈ ‖h‖
// give a first loss far above ln V nats. Re-initialise it as GPT-2 does (nn/init.hpp):
//     nn::tie_weights(*head, *wte);
//     nn::init::normal_(wte->weight, 0.0, 0.02);   // first loss ≈ ln V
// Throws ValueError naming both shapes if head.weight is not table's (V, d), or if either has LoRA.
void tie_weights(Linear& head, Embedding& table);

}  // namespace xgrad::nn
