// tests/examples/test_gpt.cpp — examples/gpt: its data pipeline by hand (characters and byte pairs,
// the loss per character, the tokenizer beside a checkpoint), and its model against PyTorch.
//
// The reference cases load tests/reference/gpt_reference.safetensors, written by
// tests/reference/make_gpt_reference.py: a tiny GPT (V 17, L 2, H 2, d 16, block T 8, batch B 2)
// in three variants (learned positions with the head tied to wte, rope, an untied head), checked
// as gpt_reference.hpp says. The weights use nanoGPT's names, so the same names load into PyTorch.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <map>
#include <memory>
#include <random>
#include <sstream>
#include <string>

#include "examples/gpt/data.hpp"
#include "examples/gpt/model.hpp"
#include "examples/gpt/report.hpp"
#include "examples/gpt/tokens.hpp"
#include "common/checkpoint.hpp"
#include "examples/gpt_reference.hpp"
#include "test_helpers.hpp"
#include <xgrad/nn/serialize.hpp>
#include <xgrad/text/tokenizer.hpp>

// Inside a namespace of this file: the tests are compiled in batches (unity builds), and a
// using-directive at file scope would reach the other files of the batch.
namespace test_gpt {
using namespace gpt;
using gpt::testing::check_model_against;

// ==== data =================================================================================================

TEST_CASE("gpt data: the bigram baseline by hand", "[gpt][data]") {
    // train 0 1 0 1: pairs (0,1) twice, (1,0) once; add-one counts [[1, 3], [2, 1]], row totals 4, 3.
    // eval 0 1 0: −(log 3/4 + log 2/3) / 2 = 0.3465736
    const double nll = -(std::log(0.75) + std::log(2.0 / 3.0));
    REQUIRE(bigram_nll({0, 1, 0, 1}, {0, 1, 0}, 2) == Approx(nll / 2));
    // Per character, token 0 of 1 byte and token 1 of 3: the predicted tokens 1, 0 hold 3 + 1 bytes.
    const BigramLoss b = bigram_loss({0, 1, 0, 1}, {0, 1, 0}, 2, {1, 3});
    REQUIRE(b.per_token == Approx(nll / 2));
    REQUIRE(b.per_char == Approx(nll / 4));
    // A pair never seen in train and a row never seen: (0 + 1) / (0 + V) = 1/2 for 1 → 1 with V 2.
    REQUIRE(bigram_nll({0, 0}, {1, 1}, 2) == Approx(std::log(2.0)));
}

// ==== tokens: characters or byte pairs =====================================================================

namespace {

// A byte-pair tokenizer with one merge, "a" "a" → 256: V 257.
xgrad::text::Tokenizer aa_tokenizer() { return xgrad::text::Tokenizer({{97, 97}}); }

}  // namespace

TEST_CASE("gpt tokens: the text is split at 90% of its bytes, moved back to a character's first byte", "[gpt][tokens]") {
    const TextSplit ascii = split_text("abcdefghij");  // ⌊9·10/10⌋ = 9
    REQUIRE(ascii.train == "abcdefghi");
    REQUIRE(ascii.val == "j");
    // 8 bytes "aaaaaaaa" and "€" (E2 82 AC, bytes 8-10): ⌊9·11/10⌋ = 9 is inside the €, so the cut moves to 8.
    const std::string euro = "aaaaaaaa\xE2\x82\xAC";
    const TextSplit utf8 = split_text(euro);
    REQUIRE(utf8.train == "aaaaaaaa");
    REQUIRE(utf8.val == "\xE2\x82\xAC");
}

TEST_CASE("gpt tokens: characters and byte pairs behind one interface", "[gpt][tokens]") {
    const Tokens chars = Tokens::characters(Vocab::from_text("hello"));
    REQUIRE(chars.size() == 4);
    REQUIRE(chars.encode("hello") == Ids{1, 0, 2, 2, 3});
    REQUIRE(chars.byte_counts() == std::vector<std::int64_t>{1, 1, 1, 1});
    REQUIRE(chars.identity().empty());
    REQUIRE(chars.fingerprint_vocab() == "ehlo");

    const Tokens pairs = Tokens::byte_pairs(aa_tokenizer());
    REQUIRE(pairs.size() == 257);
    REQUIRE(pairs.encode("aaab") == Ids{256, 97, 98});
    REQUIRE(pairs.decode({256, 97, 98}) == "aaab");
    REQUIRE(pairs.bytes(256) == "aa");
    REQUIRE(pairs.byte_counts()[256] == 2);
    REQUIRE(pairs.byte_counts()[97] == 1);
    REQUIRE(pairs.fingerprint_vocab().size() == 256);
    REQUIRE_THROWS_AS(pairs.decode({257}), std::out_of_range);
    REQUIRE_THROWS_AS(pairs.vocab(), std::logic_error);
    // The identity names V and the merges, and differs as soon as one merge does.
    REQUIRE(pairs.identity().rfind("bpe V 257: 1 merges, FNV-1a ", 0) == 0);
    REQUIRE(Tokens::byte_pairs(xgrad::text::Tokenizer({{97, 98}})).identity() != pairs.identity());
    REQUIRE(Tokens::byte_pairs(aa_tokenizer()).identity() == pairs.identity());
}

TEST_CASE("gpt tokens: a tokenizer whose special token leaves IDs unused has a row for every ID", "[gpt][tokens]") {
    // IDs 257..299 are no token (tokenizer.bpe edited to hold "300 <|eot|>"): their rows spell
    // nothing, so the identity check that follows can name the mismatch.
    xgrad::text::Tokenizer t = aa_tokenizer();
    t.register_special_tokens({{"<|eot|>", 300}});
    const Tokens pairs = Tokens::byte_pairs(t);
    REQUIRE(pairs.size() == 301);
    REQUIRE(pairs.bytes(257).empty());
    REQUIRE(pairs.byte_counts()[299] == 0);
    REQUIRE(pairs.bytes(300) == "<|eot|>");
    REQUIRE(pairs.decode({256, 299, 300}) == "aa<|eot|>");
}

TEST_CASE("gpt tokens: the loss per character, summed by hand", "[gpt][tokens]") {
    const std::vector<std::int64_t> bytes = Tokens::byte_pairs(aa_tokenizer()).byte_counts();
    LossSum sum;
    sum.add(2.0, xgrad::IndexTensor({{256, 97}}), bytes);  // 2 tokens at 2 nats: 4 nats over 2 + 1 = 3 bytes
    REQUIRE(sum.nats == Approx(4.0));
    REQUIRE(sum.bytes == 3);
    sum.add(1.0, xgrad::IndexTensor({{97, 98}}), bytes);  // 2 more nats over 2 more bytes
    REQUIRE(sum.tokens == 4);
    REQUIRE(sum.per_token() == Approx(6.0 / 4));
    REQUIRE(sum.per_char() == Approx(6.0 / 5));
    LossSum chars;  // no byte counts: one byte a token, so both figures agree
    chars.add(1.5, xgrad::IndexTensor({{3, 1, 2}}), {});
    REQUIRE(chars.per_char() == Approx(chars.per_token()));
}

TEST_CASE("gpt tokens: a model with a zero token table pays ln V a token, and ln V · tokens / bytes a character",
          "[gpt][tokens]") {
    GPTConfig c;
    c.vocab = 257, c.block = 8, c.n_layer = 1, c.n_head = 2, c.d = 16;
    GPT model(c);
    {
        NoGradGuard no_grad;
        nn::init::zeros_(model.transformer->wte->weight);  // the tied head too: every logit is 0
    }
    // data[i] = 256 ("aa", 2 bytes) at even i, 97 ("a") at odd i. fixed_offsets(40, 8, 4) = 0, 7, 15, 23
    // (span 31); every window's 8 targets alternate, 4 of 2 bytes and 4 of 1: 8 tokens for 12 bytes.
    Ids data(40);
    for (std::size_t i = 0; i < data.size(); ++i) data[i] = i % 2 == 0 ? 256 : 97;
    const EvalLoss loss = evaluate_fixed(model, data, 2, 2, Tokens::byte_pairs(aa_tokenizer()).byte_counts());
    REQUIRE(loss.per_token == Approx(std::log(257.0)).epsilon(1e-5));
    REQUIRE(loss.per_char == Approx(std::log(257.0) * 8 / 12).epsilon(1e-5));
    REQUIRE(evaluate_fixed(model, data, 2, 2) == loss.per_token);  // the per-token figure alone, the same
}

TEST_CASE("gpt tokens: a resume with another tokenizer, or another --vocab-size, is refused", "[gpt][tokens]") {
    xgrad::testing::TempDir dir;
    GPTConfig c;
    c.vocab = 257, c.block = 8, c.n_layer = 1, c.n_head = 2, c.d = 16;
    GPT model(c);
    auto opt = make_adamw(model, 1e-3, 0.9, 0.99, 0.1);
    std::mt19937_64 rng(1);
    const Tokens saved = Tokens::byte_pairs(aa_tokenizer());
    const std::string text = "aaab aaab aaab";
    xgrad::train::TextFingerprint data = xgrad::train::fingerprint(saved.fingerprint_vocab(), text);
    data.tokenizer = saved.identity();
    const std::string path = dir.file("checkpoint.safetensors");
    examples::save_checkpoint(path, model, *opt, 3, rng, {{"--steps", "5"}}, data);
    REQUIRE(examples::load_checkpoint(path, model, *opt, rng, {{"--steps", "5"}}, data) == 3);

    // The same V and text, another merge: id 256 would mean "ab", not "aa".
    xgrad::train::TextFingerprint other = data;
    other.tokenizer = Tokens::byte_pairs(xgrad::text::Tokenizer({{97, 98}})).identity();
    std::string msg = xgrad::testing::message_of<std::runtime_error>(
        [&] { examples::load_checkpoint(path, model, *opt, rng, {{"--steps", "5"}}, other); });
    REQUIRE_THAT(msg, Catch::Contains("tokenizer mismatch") && Catch::Contains(data.tokenizer) &&
                          Catch::Contains(other.tokenizer));
    msg = xgrad::testing::message_of<std::runtime_error>([&] {
        examples::load_model_weights(path, model, {}, other.vocab, other.tokenizer);
    });
    REQUIRE_THAT(msg, Catch::Contains("tokenizer mismatch"));
    // A character run's fingerprint (no tokenizer) against the byte-pair checkpoint.
    msg = xgrad::testing::message_of<std::runtime_error>([&] {
        examples::load_checkpoint(path, model, *opt, rng, {{"--steps", "5"}},
                                  xgrad::train::fingerprint(saved.fingerprint_vocab(), text));
    });
    REQUIRE_THAT(msg, Catch::Contains("one byte per token"));

    // The tokenizer beside the checkpoint: missing, then of another size than --vocab-size.
    msg = xgrad::testing::message_of<std::runtime_error>([&] { load_bpe_beside(path, 257, "--resume"); });
    REQUIRE_THAT(msg, Catch::Contains("--resume") && Catch::Contains(dir.file("tokenizer.bpe")));
    saved.tokenizer().save(tokenizer_beside(path));
    REQUIRE(load_bpe_beside(path, 257, "--resume") == saved.tokenizer());
    msg = xgrad::testing::message_of<std::runtime_error>([&] { load_bpe_beside(path, 300, "--init-from"); });
    REQUIRE_THAT(msg, Catch::Contains("--init-from") && Catch::Contains("has 257 tokens") &&
                          Catch::Contains("pass --vocab-size 257"));
}

TEST_CASE("gpt tokens: the split in tokens refuses parts shorter than a window, in tokens", "[gpt][tokens]") {
    REQUIRE(split_tokens(Ids(9), Ids(9), 8, "t.txt").val.size() == 9);
    REQUIRE_THROWS_WITH(split_tokens(Ids(20), Ids(8), 8, "t.txt"),
                        Catch::Contains("t.txt") && Catch::Contains("validation 8 tokens") &&
                            Catch::Contains("block + 1 = 9 tokens"));
}

TEST_CASE("gpt tokens: the most frequent tokens and their nearest tokens by cosine", "[gpt][tokens]") {
    const Tokens pairs = Tokens::byte_pairs(aa_tokenizer());
    const Ids ids{97, 256, 98, 256, 97, 256, 99};  // 256 three times, 97 twice, 98 and 99 once
    REQUIRE(frequent_tokens(ids, pairs, 3, 1) == std::vector<std::int64_t>{256, 97, 98});  // ties: the lower id
    REQUIRE(frequent_tokens(ids, pairs, 3, 2) == std::vector<std::int64_t>{256});           // 2 bytes or more
    // Rows 97, 98, 99 of the table point at 0°, 45° and 90°; every other row at (−1, −0.1), away from them.
    xgrad::Array table = xt::zeros<real>(xgrad::ArrayShape{257, 2});
    for (std::size_t r = 0; r < 257; ++r) table(r, 0) = -1, table(r, 1) = real(-0.1);
    table(97, 0) = 1, table(97, 1) = 0, table(98, 0) = 1, table(98, 1) = 1, table(99, 0) = 0, table(99, 1) = 1;
    // Row 97: 98 at cos 45° = 0.71, 99 at cos 90° = 0.00 (the rest below −0.99); row 99: 98, then 97.
    REQUIRE(nearest_tokens(table, pairs, {97, 99}, 2) == "  'a'   'b' 0.71, 'c' 0.00\n  'c'   'b' 0.71, 'a' 0.00\n");
}

TEST_CASE("gpt model: the sparse token table needs an untied head and receives k rows", "[gpt][tokens]") {
    GPTConfig c;
    c.vocab = 17, c.block = 8, c.n_layer = 1, c.n_head = 2, c.d = 16, c.sparse_embedding = true;
    REQUIRE_THROWS_AS(GPT(c), ValueError);  // tied
    c.tie = false;
    GPT model(c);
    const xgrad::IndexTensor x({{3, 5, 3, 9}, {5, 5, 1, 3}}), y({{5, 3, 9, 5}, {5, 1, 3, 2}});
    nn::functional::cross_entropy(model.forward(x), y).backward();
    const SparseGrad* g = model.transformer->wte->weight.sparse_grad();
    REQUIRE(g != nullptr);
    REQUIRE(g->indices == std::vector<std::int64_t>{1, 3, 5, 9});  // the distinct ids of x
    REQUIRE(model.token_embedding().last_backward_stats().rows_touched == 4);
}

// ==== the model against PyTorch ===========================================================================

namespace {

void check_against_pytorch(const std::string& variant, const std::string& pos, bool tie, bool fused = true) {
    GPTConfig c;
    c.vocab = 17, c.block = 8, c.n_layer = 2, c.n_head = 2, c.d = 16, c.pos = pos, c.tie = tie;
    c.fused_attention = fused;
    xgrad::manual_seed(0);
    GPT model(c);
    check_model_against("gpt_reference.safetensors", variant, model);
}

}  // namespace

TEST_CASE("gpt reference: learned positions and the tied head match PyTorch", "[gpt][reference]") {
    check_against_pytorch("learned", "learned", true);
}

TEST_CASE("gpt reference: rope matches PyTorch", "[gpt][reference]") {
    check_against_pytorch("rope", "rope", true);
}

TEST_CASE("gpt reference: the untied head matches PyTorch", "[gpt][reference]") {
    check_against_pytorch("notie", "learned", false);
}

// The same model with CausalSelfAttentionOptions::fast_kernels off: the composed attention path.
TEST_CASE("gpt reference: the composed attention path matches PyTorch too", "[gpt][reference]") {
    check_against_pytorch("learned", "learned", true, /*fused=*/false);
    check_against_pytorch("rope", "rope", true, /*fused=*/false);
}

TEST_CASE("gpt model: the tied table is one parameter, in the weight-decay group", "[gpt]") {
    GPTConfig c;
    c.vocab = 17, c.block = 8, c.n_layer = 2, c.n_head = 2, c.d = 16;
    GPT model(c);
    // wte 17·16 + wpe 8·16 + 2 blocks · (2 LayerNorms 2·32 + c_attn 16·48+48 + c_proj 16·16+16
    // + c_fc 16·64+64 + c_proj 64·16+16) + ln_f 32 = 272 + 128 + 2·3280 + 32
    REQUIRE(model.num_parameters() == 6992);
    c.tie = false;
    REQUIRE(GPT(c).num_parameters() == 6992 + 272);
    auto opt = make_adamw(model, 1e-3, 0.9, 0.99, 0.1);
    const auto& groups = opt->param_groups();
    REQUIRE(groups.size() == 2);
    REQUIRE(groups[0].weight_decay == 0.1);
    REQUIRE(groups[1].weight_decay == 0.0);
    REQUIRE(groups[0].params.front().first == "transformer.wte.weight");
    REQUIRE(groups[0].params.size() == 2 + 2 * 4);  // wte, wpe, 4 Linear weights per block
    for (const auto& [name, p] : groups[1].params) REQUIRE(p.dim() == 1);
    REQUIRE_THROWS_AS(GPT(GPTConfig{17, 8, 2, 3, 16}), ValueError);  // 16 not divisible by 3
}

TEST_CASE("gpt report: the graph-memory table sums its rows and aligns its columns", "[gpt]") {
    GPTConfig c;
    c.vocab = 17, c.block = 8, c.n_layer = 1, c.n_head = 2, c.d = 16;
    xgrad::manual_seed(0);
    GPT model(c);
    IndexArray xs(ArrayShape{2, 8}), ys(ArrayShape{2, 8});  // B 2, T 8
    for (std::size_t i = 0; i < 16; ++i) xs.data()[i] = std::int64_t(i % 17), ys.data()[i] = std::int64_t((i + 1) % 17);
    const Tensor loss = nn::functional::cross_entropy(model.forward(IndexTensor(xs)), IndexTensor(ys));
    const std::string text = graph_memory_report(loss, model, 2, 0);
    INFO(text);
    std::vector<std::string> lines;
    std::istringstream in(text);
    for (std::string line; std::getline(in, line);) lines.push_back(line);
    // lines: title, header, one per op, "total (tensors)", "+ inside closures, nodes", "beside: ...".
    REQUIRE(lines.size() >= 6);
    const std::string& header = lines[1];
    const std::size_t end_tensors = header.find("tensors") + 7, end_bytes = header.find("bytes") + 5;
    // A number right-aligned to end at column `end`, read back.
    auto number_ending_at = [](const std::string& line, std::size_t end) {
        REQUIRE(end <= line.size());
        REQUIRE((end == line.size() || line[end] == ' '));
        std::size_t begin = end;
        while (begin > 0 && std::isdigit(static_cast<unsigned char>(line[begin - 1]))) --begin;
        REQUIRE(begin < end);
        REQUIRE(line[begin - 1] == ' ');
        return std::stoull(line.substr(begin, end - begin));
    };
    std::size_t sum = 0;
    std::map<std::string, std::pair<std::size_t, std::size_t>> ops;  // name → (tensors, bytes)
    const std::size_t n_ops = lines.size() - 5;
    for (std::size_t i = 2; i < 2 + n_ops; ++i) {
        const std::string name = lines[i].substr(2, lines[i].find("  ", 2) - 2);
        ops[name] = {number_ending_at(lines[i], end_tensors), number_ending_at(lines[i], end_bytes)};
        sum += ops[name].second;
    }
    REQUIRE(lines[2 + n_ops].rfind("  total (tensors) ", 0) == 0);
    REQUIRE(number_ending_at(lines[2 + n_ops], end_bytes) == sum);
    REQUIRE(number_ending_at(lines[3 + n_ops], end_bytes) == 0);  // malloc_delta 0: nothing beyond the tensors
    // By hand: the token rows (2, 8, 16) and the position rows (8, 16), float32; the loss, one float.
    REQUIRE(ops.at("embedding") == std::pair<std::size_t, std::size_t>{2, (2 * 8 * 16 + 8 * 16) * 4});
    REQUIRE(ops.at("cross_entropy") == std::pair<std::size_t, std::size_t>{1, 4});
}

// ==== --checkpoint-blocks ===================================================================================

// A config flag, not a trajectory flag: the same seed gives the same losses and the same weights, bit for bit,
// with dropout on (the recomputation replays the masks) and for both blocks.
TEST_CASE("gpt checkpoint_blocks: the same losses and parameters bit for bit, GPT and Llama, with dropout",
          "[gpt][checkpoint]") {
    for (const std::string arch : {"gpt2", "llama"}) {
        INFO("arch " << arch);
        auto train = [&](bool checkpoint_blocks) {
            GPTConfig c;
            c.vocab = 17, c.block = 8, c.n_layer = 2, c.n_head = 2, c.d = 16, c.dropout = 0.2, c.arch = arch;
            if (arch == "llama") c.pos = "rope", c.bias = false;
            c.checkpoint_blocks = checkpoint_blocks;
            xgrad::manual_seed(7);
            std::unique_ptr<LanguageModel> model = make_model(c);
            auto opt = make_adamw(*model, 1e-2, 0.9, 0.99, 0.1);
            std::mt19937_64 rng(3);
            const Ids text = [] {
                Ids t(200);
                for (std::size_t i = 0; i < t.size(); ++i) t[i] = std::int64_t((i * i + 3 * i) % 17);
                return t;
            }();
            std::vector<double> losses;
            for (int step = 0; step < 3; ++step) {
                const Batch b = sample_windows(text, 4, 8, rng);
                losses.push_back(train_step(*model, *opt, b.x, b.y, 1.0).loss);
            }
            int checkpoint_nodes = 0;  // one per block when on
            visit_graph(model->forward(sample_windows(text, 4, 8, rng).x), [&](const TensorImpl& t) {
                checkpoint_nodes += t.grad_fn && t.grad_fn->name == "checkpoint";
            });
            REQUIRE(checkpoint_nodes == (checkpoint_blocks ? 2 : 0));
            return std::make_pair(losses, model->state_dict());
        };
        const auto [plain_losses, plain_state] = train(false);
        const auto [ckpt_losses, ckpt_state] = train(true);
        REQUIRE(ckpt_losses == plain_losses);  // doubles from the same floats: equal bit for bit
        REQUIRE(plain_losses.front() != plain_losses.back());
        REQUIRE(ckpt_state.size() == plain_state.size());
        for (std::size_t i = 0; i < plain_state.size(); ++i) {
            INFO(plain_state[i].first);
            REQUIRE(ckpt_state[i].first == plain_state[i].first);
            REQUIRE(xgrad::testing::bits_equal(ckpt_state[i].second, plain_state[i].second));
        }
    }
}

}  // namespace test_gpt
