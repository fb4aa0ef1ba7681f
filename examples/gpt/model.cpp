// examples/gpt/model.cpp — the GPT's modules, its initialisation, and one training step.
// The shapes and the math are in model.hpp; each forward below names the shapes it makes.
#include "model.hpp"

#include "llama.hpp"

#include <algorithm>
#include <cmath>
#include <limits>

namespace gpt {

namespace F = nn::functional;

MLP::MLP(const GPTConfig& c) : dropout_(c.dropout) {
    c_fc = register_module("c_fc", std::make_shared<nn::Linear>(c.d, 4 * c.d, c.bias));
    c_proj = register_module("c_proj", std::make_shared<nn::Linear>(4 * c.d, c.d, c.bias));
}

Tensor MLP::forward(const Tensor& x) const {
    Tensor h = F::gelu(c_fc->forward(x));                     // (B, T, 4d)  exact erf GELU
    return F::dropout(c_proj->forward(h), dropout_, is_training());  // (B, T, d)
}

Block::Block(const GPTConfig& c) {
    const auto opts = nn::CausalSelfAttentionOptions()
                          .dropout(c.dropout)
                          .bias(c.bias)
                          .rope(c.pos == "rope")
                          .fast_kernels(c.fused_attention)
                          .n_kv_head(c.n_kv_head);
    ln_1 = register_module("ln_1", std::make_shared<nn::LayerNorm>(c.d, 1e-5, true, c.bias));
    attn = register_module("attn", std::make_shared<nn::CausalSelfAttention>(c.d, c.n_head, opts));
    ln_2 = register_module("ln_2", std::make_shared<nn::LayerNorm>(c.d, 1e-5, true, c.bias));
    mlp = register_module("mlp", std::make_shared<MLP>(c));
}

Tensor Block::forward(Tensor x) const {
    x = x + attn->forward(ln_1->forward(x));  // (B, T, d)  tokens look at earlier tokens
    x = x + mlp->forward(ln_2->forward(x));   // (B, T, d)  each token alone: d → 4d → d
    return x;
}

Tensor Block::forward_cached(Tensor x, nn::KVCache& cache) const {
    x = x + attn->forward_cached(ln_1->forward(x), cache);  // (B, t, d)  the new tokens read the cache
    x = x + mlp->forward(ln_2->forward(x));                 // (B, t, d)
    return x;
}

Transformer::Transformer(const GPTConfig& c) {
    wte = register_module("wte", std::make_shared<nn::Embedding>(c.vocab, c.d,
                                                                 nn::EmbeddingOptions().sparse(c.sparse_embedding)));
    if (c.pos == "learned") wpe = register_module("wpe", std::make_shared<nn::LearnedPositions>(c.block, c.d));
    h = register_module("h", std::make_shared<nn::ModuleList<Block>>());
    for (std::int64_t i = 0; i < c.n_layer; ++i) h->push_back(std::make_shared<Block>(c));  // "0", "1", ...
    ln_f = register_module("ln_f", std::make_shared<nn::LayerNorm>(c.d, 1e-5, true, c.bias));
}

std::string config_field(const std::string& field) {
    if (field == "untied") return "tie false";
    if (field == "no_bias") return "bias false";
    return field;
}

void check_config(const GPTConfig& c, const char* op, const std::function<std::string(const std::string&)>& name) {
    auto n = [&](const char* field) { return name(field); };
    for (auto [field, v] : {std::pair{"vocab", c.vocab}, {"block", c.block}, {"n_layer", c.n_layer},
                            {"n_head", c.n_head}, {"d", c.d}})
        check(v > 0, op, "{} {} must be positive", n(field), v);
    check(c.arch == "gpt2" || c.arch == "llama", op, "{} '{}' is not one of gpt2, llama", n("arch"), c.arch);
    check(c.d % c.n_head == 0, op, "{} {} does not divide {} {}: each head gets d/H dimensions", n("n_head"), c.n_head,
          n("d"), c.d);
    check(c.n_kv_head >= 0 && (c.n_kv_head == 0 || c.n_head % c.n_kv_head == 0), op,
          "{} {} does not divide {} {}: each K/V head serves n_head / n_kv_head query heads", n("n_kv_head"),
          c.n_kv_head, n("n_head"), c.n_head);
    check(c.pos == "learned" || c.pos == "sinusoidal" || c.pos == "rope" || c.pos == "none", op,
          "{} '{}' is not one of learned, sinusoidal, rope, none", n("pos"), c.pos);
    check(c.arch != "llama" || c.pos == "rope", op, "{} {}: {} llama always uses rope positions", n("pos"), c.pos,
          n("arch"));
    check(c.arch != "llama" || !c.bias, op, "{} llama has no biases: set {}", n("arch"), n("no_bias"));
    check(c.pos != "rope" || (c.d / c.n_head) % 2 == 0, op, "{} rope needs an even head width, but {} {} / {} {} = {}",
          n("pos"), n("d"), c.d, n("n_head"), c.n_head, c.d / c.n_head);
    check(c.pos != "sinusoidal" || c.d % 2 == 0, op, "{} sinusoidal needs an even {}; got {}", n("pos"), n("d"), c.d);
    check(c.ffn_hidden >= 0, op, "{} must be >= 0 (0: LLaMA's rule); got {}", n("ffn_hidden"), c.ffn_hidden);
    check(c.arch == "llama" || c.ffn_hidden == 0, op, "{} sets the SwiGLU width of {} llama only", n("ffn_hidden"),
          n("arch"));
    check(c.dropout >= 0 && c.dropout < 1, op, "{} {} is outside [0, 1)", n("dropout"), c.dropout);
    check(!(c.sparse_embedding && c.tie), op, "{} needs {}: the tied head would give every row of the token table a "
          "gradient", n("sparse_embedding"), n("untied"));
}

static GPTConfig checked(const GPTConfig& c) {
    check_config(c, "GPT");
    check(c.arch == "gpt2", "GPT", "arch '{}' is not gpt2: make_model builds the others", c.arch);
    return c;
}

GPT::GPT(const GPTConfig& config) : LanguageModel(checked(config)) {
    transformer = register_module("transformer", std::make_shared<Transformer>(config_));
    lm_head = register_module("lm_head", std::make_shared<nn::Linear>(config_.d, config_.vocab, /*bias=*/false));
    if (config_.tie) nn::tie_weights(*lm_head, *transformer->wte);  // one (V, d) parameter
    if (config_.pos == "sinusoidal") sinusoidal_ = nn::sinusoidal_positions(config_.block, config_.d);

    init_gpt2("ln_", {"c_proj.weight"});  // attn.c_proj and mlp.c_proj write into the residual stream
}

Tensor GPT::embed(const IndexTensor& idx, std::int64_t P) const {
    check_window(idx, P, "GPT");
    const std::int64_t T = std::int64_t(idx.shape()[1]);
    Tensor x = transformer->wte->forward(idx);                         // (B, T, d)
    if (config_.pos == "learned")                                      // + (T, d) rows P..P+T-1, broadcast over B
        x = x + transformer->wpe->Embedding::forward(IndexTensor::arange(P, P + T));
    else if (config_.pos == "sinusoidal")
        x = x + narrow(sinusoidal_, 0, P, T);                          // + (T, d), fixed
    return F::dropout(x, config_.dropout, is_training());              // rope / none: positions elsewhere
}

Tensor GPT::forward(const IndexTensor& idx) const {
    Tensor x = embed(idx, 0);                        // (B, T, d)
    for (std::size_t i = 0; i < transformer->h->size(); ++i) x = run_block(i, (*transformer->h)[i], x);
    return lm_head->forward(transformer->ln_f->forward(x));  // (B, T, V)
}

Tensor GPT::forward_cached(const IndexTensor& idx, std::vector<nn::KVCache>& caches) const {
    const std::int64_t P = cached_positions(idx, caches, "GPT");
    NoGradGuard no_grad;
    Tensor x = embed(idx, P);                        // (B, t, d): the new tokens at positions P..P+t-1
    for (std::size_t i = 0; i < caches.size(); ++i) x = (*transformer->h)[i]->forward_cached(x, caches[i]);
    return lm_head->forward(transformer->ln_f->forward(x));  // (B, t, V)
}

Tensor GPT::attention_weights(const IndexTensor& idx, std::int64_t layer) const {
    check(layer >= 0 && layer < config_.n_layer, "GPT", "layer {} is outside [0, {})", layer, config_.n_layer);
    NoGradGuard no_grad;
    Tensor x = embed(idx, 0);
    for (std::int64_t i = 0; i < layer; ++i) x = (*transformer->h)[std::size_t(i)]->forward(x);
    const Block& b = *(*transformer->h)[std::size_t(layer)];
    return b.attn->attention_weights(b.ln_1->forward(x));  // (B, H, T, T)
}

// ---- what every model shares -----------------------------------------------------------------------

LanguageModel::LanguageModel(const GPTConfig& config) : config_(config) {
    for (std::int64_t i = 0; i < config_.n_layer; ++i) block_names_.push_back("block " + std::to_string(i));
}

void LanguageModel::check_window(const IndexTensor& idx, std::int64_t P, const char* op) const {
    check(idx.dim() == 2, op, "idx must be (B, T), got {} dims", idx.dim());
    const std::int64_t T = std::int64_t(idx.shape()[1]);
    check(P + T <= config_.block, op, "sequence length T = {} after {} cached positions exceeds the block size {}", T,
          P, config_.block);
}

std::int64_t LanguageModel::cached_positions(const IndexTensor& idx, const std::vector<nn::KVCache>& caches,
                                             const char* op) const {
    check(caches.size() == std::size_t(config_.n_layer), op, "{} caches for {} layers", caches.size(),
          config_.n_layer);
    const std::int64_t P = caches[0].length();
    check_window(idx, P, op);
    return P;
}

void LanguageModel::init_gpt2(const std::string& norm, const std::vector<std::string>& residual) {
    NoGradGuard no_grad;
    const double residual_std = 0.02 / std::sqrt(2.0 * double(config_.n_layer));
    for (auto& [name, p] : named_parameters()) {
        auto ends_with = [&n = name](const std::string& s) {
            return n.size() >= s.size() && n.compare(n.size() - s.size(), s.size(), s) == 0;
        };
        if (name.find(norm) != std::string::npos) continue;
        if (ends_with(".bias")) {
            nn::init::zeros_(p);
            continue;
        }
        const bool writes_residual = std::any_of(residual.begin(), residual.end(), ends_with);
        nn::init::normal_(p, 0.0, writes_residual ? residual_std : 0.02);
    }
}

std::vector<nn::KVCache> LanguageModel::make_kv_caches() const {
    return nn::KVCache::per_layer(config_.n_layer, config_.block);
}

std::size_t LanguageModel::kv_cache_bytes_per_token() const {
    const std::int64_t kv = config_.n_kv_head == 0 ? config_.n_head : config_.n_kv_head;
    return std::size_t(2 * config_.n_layer * kv * (config_.d / config_.n_head)) * sizeof(real);
}

std::unique_ptr<optim::AdamW> make_adamw(const LanguageModel& model, double lr, double beta1, double beta2,
                                         double weight_decay, double eps) {
    optim::ParamGroup decay, no_decay;
    decay.weight_decay = weight_decay;
    no_decay.weight_decay = 0.0;
    for (const auto& [name, p] : model.named_parameters())  // the tied table appears once
        if (p.requires_grad())  // a frozen weight (LoRA's base) gets no gradient, so no state
            (p.dim() >= 2 ? decay : no_decay).params.emplace_back(name, p);
    return std::make_unique<optim::AdamW>(std::vector<optim::ParamGroup>{decay, no_decay},
                                          optim::AdamWOptions(lr).betas({beta1, beta2}).eps(eps));
}

double clip_gradients(LanguageModel& model, double max_norm) {
    const NamedTensors params = model.named_parameters();
    return optim::clip_grad_norm_(params, max_norm > 0 ? max_norm : std::numeric_limits<double>::infinity());
}

StepResult train_step(LanguageModel& model, optim::Optimizer& opt, const IndexTensor& x, const IndexTensor& y,
                      double max_norm) {
    opt.zero_grad();
    Tensor logits = model.forward(x);            // (B, T, V)
    Tensor loss = F::cross_entropy(logits, y);   // () nats, mean over B·T positions
    loss.backward();
    const double norm = clip_gradients(model, max_norm);
    opt.step();
    return {loss.item(), norm};
}

std::unique_ptr<LanguageModel> make_model(const GPTConfig& config) {
    check_config(config, "make_model");
    if (config.arch == "llama") return std::make_unique<Llama>(config);
    return std::make_unique<GPT>(config);
}

}  // namespace gpt
