// nn/tying.cpp — tie_weights: the head's registered weight becomes the table's (nn/tying.hpp).
#include <xgrad/nn/tying.hpp>

namespace xgrad::nn {

void tie_weights(Linear& head, Embedding& table) {
    // head: Linear(in = d, out = V), weight (out, in) = (V, d); table: Embedding(V, d), (V, d).
    check(head.weight.shape() == table.weight.shape(), "tie_weights",
          "the head's weight {} (Linear({}, {}): (out, in)) and the table {} (Embedding({}, {}): (V, d)) "
          "differ; tying needs Linear(d, V) with Embedding(V, d)",
          shape_str(head.weight.shape()), head.in_features(), head.out_features(), shape_str(table.weight.shape()),
          table.num_embeddings(), table.embedding_dim());
    // An adapter holds the head's W (nn/lora.hpp): merge() would write into the untied W, and the
    // frozen base would read the table, trainable. Tie first, then adapt.
    check(head.lora() == nullptr, "tie_weights",
          "the head (Linear({}, {})) has a LoRA adapter; call tie_weights before nn::add_lora / nn::apply_lora",
          head.in_features(), head.out_features());
    check(table.lora() == nullptr, "tie_weights",
          "the table (Embedding({}, {})) has a LoRA adapter, which froze it; call tie_weights before nn::add_lora / "
          "nn::apply_lora", table.num_embeddings(), table.embedding_dim());
    head.weight = table.weight;                    // what forward reads
    head.replace_parameter("weight", table.weight);  // what named_parameters(), optimizers and save() see
    head.tied_ = true;
    table.tied_ = true;
}

}  // namespace xgrad::nn
