// data/sampler.cpp — windows, their offsets (random and fixed), and the WindowSampler.
#include <xgrad/data/sampler.hpp>


#include <fmt/format.h>

#include <xgrad/core/error.hpp>
#include <xgrad/core/parse.hpp>

namespace xgrad::data {

Batch windows(TokenView tokens, const std::vector<std::size_t>& offsets, int block) {
    check(block >= 1, "windows", "block {} must be at least 1", block);
    const std::size_t B = offsets.size(), T = std::size_t(block), N = tokens.size();
    IndexArray x(ArrayShape{B, T}), y(ArrayShape{B, T});
    for (std::size_t i = 0; i < B; ++i) {
        const std::size_t o = offsets[i];
        if (N < T + 1 || o > N - T - 1)  // o + T + 1 > N, without wrapping for a huge o
            throw IndexError(fmt::format("windows: offset {} + block {} + 1 exceeds the {} tokens (offsets lie in "
                                         "[0, N − T − 1])", o, T, N));
        tokens.copy_to(o, T, x.data() + i * T);      // x = tokens[o : o+T]
        tokens.copy_to(o + 1, T, y.data() + i * T);  // y = tokens[o+1 : o+T+1]
    }
    return {IndexTensor(std::move(x)), IndexTensor(std::move(y))};
}

std::vector<std::size_t> sample_offsets(std::size_t n_tokens, int batch, int block, std::mt19937_64& rng) {
    check(batch >= 1 && block >= 1, "sample_offsets", "batch {} and block {} must be at least 1", batch, block);
    check(n_tokens >= std::size_t(block) + 1, "sample_offsets",
          "{} tokens hold no window of block + 1 = {} tokens", n_tokens, std::int64_t(block) + 1);
    std::uniform_int_distribution<std::size_t> pick(0, n_tokens - std::size_t(block) - 1);
    std::vector<std::size_t> offsets(static_cast<std::size_t>(batch));
    for (auto& o : offsets) o = pick(rng);
    return offsets;
}

Batch sample_windows(TokenView tokens, int batch, int block, std::mt19937_64& rng) {
    return windows(tokens, sample_offsets(tokens.size(), batch, block, rng), block);
}

std::vector<std::size_t> fixed_offsets(std::size_t n_tokens, int block, std::size_t n) {
    check(block >= 1, "fixed_offsets", "block {} must be at least 1", block);
    check(n_tokens >= std::size_t(block) + 1, "fixed_offsets", "{} tokens hold no window of block + 1 = {} tokens",
          n_tokens, std::int64_t(block) + 1);
    const std::size_t span = n_tokens - std::size_t(block) - 1;  // the last valid offset: o + T + 1 ≤ N
    std::vector<std::size_t> offsets(n);
    for (std::size_t j = 0; j < n; ++j) offsets[j] = j * span / n;
    return offsets;
}

Batch fixed_windows(TokenView tokens, std::size_t n, int block) {
    return windows(tokens, fixed_offsets(tokens.size(), block, n), block);
}

// ---- WindowSampler ---------------------------------------------------------------------------------
WindowSampler::WindowSampler(TokenView tokens, WindowSamplerOptions options)
    : tokens_(tokens), options_(options), rng_(options.seed()) {
    const int B = options.batch(), T = options.block(), W = options.world_size(), A = options.grad_accum();
    check(B >= 1 && T >= 1, "WindowSampler", "batch {} and block {} must be at least 1", B, T);
    check(W >= 1 && A >= 1, "WindowSampler", "world_size {} and grad_accum {} must be at least 1", W, A);
    check(options.rank() >= 0 && options.rank() < W, "WindowSampler", "rank {} outside [0, {})", options.rank(), W);
    const std::int64_t WA = std::int64_t(W) * A;  // up to 2^62: no int overflow
    check(B % WA == 0, "WindowSampler",
          "batch {} is not a multiple of world_size {} × grad_accum {} = {}: every rank's micro-batch needs the same "
          "number of windows", B, W, A, WA);
    check(tokens.size() >= std::size_t(T) + 1, "WindowSampler", "{} tokens hold no window of block + 1 = {} tokens",
          tokens.size(), std::int64_t(T) + 1);
}

std::vector<std::size_t> WindowSampler::next_offsets() {
    ++batches_;
    return sample_offsets(tokens_.size(), options_.batch(), options_.block(), rng_);
}

std::pair<std::int64_t, std::int64_t> micro_batch_rows(int batch, int world_size, int grad_accum, int rank, int k) {
    check(world_size >= 1 && grad_accum >= 1 && rank >= 0 && rank < world_size && k >= 0 && k < grad_accum &&
              batch % (std::int64_t(world_size) * grad_accum) == 0,
          "micro_batch_rows",
          "batch {}, world_size {}, grad_accum {}, rank {}, micro-step {}: need W, A >= 1, rank in [0, W), micro-step "
          "in [0, A), W·A dividing the batch",
          batch, world_size, grad_accum, rank, k);
    const std::int64_t b = batch / (std::int64_t(world_size) * grad_accum);
    const std::int64_t begin = std::int64_t(k) * (batch / grad_accum) + std::int64_t(rank) * b;  // k·B/A + r·b
    return {begin, begin + b};
}

std::vector<Batch> WindowSampler::next() {
    const std::vector<std::size_t> offsets = next_offsets();  // all B, on every rank
    const WindowSamplerOptions& o = options_;
    std::vector<Batch> micro;
    for (int k = 0; k < o.grad_accum(); ++k) {  // this rank's rows of micro-step k
        const auto [begin, end] = micro_batch_rows(o.batch(), o.world_size(), o.grad_accum(), o.rank(), k);
        micro.push_back(windows(tokens_, std::vector<std::size_t>(offsets.begin() + begin, offsets.begin() + end),
                                o.block()));
    }
    return micro;
}

Batch WindowSampler::next_batch() {
    check(options_.world_size() * options_.grad_accum() == 1, "WindowSampler::next_batch",
          "world_size {} × grad_accum {} gives {} micro-batches a step: call next()", options_.world_size(),
          options_.grad_accum(), options_.world_size() * options_.grad_accum());
    return std::move(next().front());
}

std::map<std::string, std::string> WindowSampler::state_dict() const {
    return {{"rng", generator_text(rng_)}, {"batches", std::to_string(batches_)}};
}

void WindowSampler::load_state_dict(const std::map<std::string, std::string>& state) {
    const char* op = "WindowSampler::load_state_dict";
    for (const auto& [key, value] : state)
        check(key == "rng" || key == "batches", op, "unknown key {} (the keys are 'rng' and 'batches')", quoted_text(key));
    for (const char* key : {"rng", "batches"}) check(state.count(key) == 1, op, "missing key '{}'", key);
    const std::string& saved = state.at("rng");
    const std::optional<std::mt19937_64> restored = generator_from_text(saved);  // exactly operator<<'s text
    check(restored.has_value(), op, "'rng' = {} is not a std::mt19937_64 state as operator<< writes it",
          quoted_text(saved));
    const std::int64_t batches = parse_int64(state.at("batches"), op, "batches", 0);
    rng_ = *restored;
    batches_ = batches;
}

}  // namespace xgrad::data
