// tests/data/test_sampler.cpp — data/sampler: windows at given and fixed offsets, the random
// offsets as std::uniform_int_distribution draws them, W ranks × A micro-steps against one
// process, a resume through state_dict, the refusals, and a sampler over a memory-mapped shard.
#include <catch2/catch.hpp>

#include <climits>
#include <cstdint>
#include <map>
#include <random>
#include <string>
#include <vector>

#include <fmt/format.h>

#include <xgrad/core/error.hpp>
#include <xgrad/data/sampler.hpp>
#include "test_helpers.hpp"

namespace test_data_sampler {
using namespace xgrad::testing;
using namespace xgrad::data;
using Ids = std::vector<std::int64_t>;

// tokens[i] = i: a window's first token is its offset.
Ids iota_ids(std::size_t n) {
    Ids t(n);
    for (std::size_t i = 0; i < n; ++i) t[i] = std::int64_t(i);
    return t;
}
// Column 0 of x (rows, T): the offsets of the windows of iota_ids.
std::vector<std::size_t> first_column(const Batch& b) {
    const std::size_t rows = std::size_t(b.x.shape()[0]), T = std::size_t(b.x.shape()[1]);
    std::vector<std::size_t> out;
    for (std::size_t i = 0; i < rows; ++i) out.push_back(std::size_t(b.x.data().data()[i * T]));
    return out;
}

TEST_CASE("windows and the fixed validation offsets", "[data][sampler]") {
    const Ids data = iota_ids(20);
    const Batch w = windows(data, {0, 5}, 3);
    REQUIRE(w.x.data() == xgrad::IndexTensor({{0, 1, 2}, {5, 6, 7}}).data());
    REQUIRE(w.y.data() == xgrad::IndexTensor({{1, 2, 3}, {6, 7, 8}}).data());
    CHECK(message_of<xgrad::IndexError>([&] { windows(data, {17}, 3); }) ==  // 17 + 3 + 1 > 20
          "windows: offset 17 + block 3 + 1 exceeds the 20 tokens (offsets lie in [0, N − T − 1])");
    // o_j = ⌊j · (N − T − 1) / n⌋ with N 100, T 8, n 4: span 91 → 0, 22, 45, 68
    REQUIRE(fixed_offsets(100, 8, 4) == std::vector<std::size_t>{0, 22, 45, 68});
    CHECK(first_column(fixed_windows(iota_ids(100), 4, 8)) == std::vector<std::size_t>{0, 22, 45, 68});
}

TEST_CASE("WindowSampler draws the offsets std::uniform_int_distribution draws on mt19937_64(seed)",
          "[data][sampler]") {
    const Ids data = iota_ids(1000);
    const int B = 12, T = 64;
    WindowSampler sampler(data, WindowSamplerOptions(B, T).seed(1337));
    std::mt19937_64 rng(1337);
    std::uniform_int_distribution<std::size_t> pick(0, 1000 - 64 - 1);  // o ∈ [0, N − T − 1] = [0, 935]
    for (int step = 0; step < 3; ++step) {
        std::vector<std::size_t> want(B);
        for (auto& o : want) o = pick(rng);
        const std::vector<Batch> got = sampler.next();
        REQUIRE(got.size() == 1);
        REQUIRE(got[0].x.shape() == xgrad::Shape{12, 64});
        CHECK(first_column(got[0]) == want);
        for (std::size_t i = 0; i < std::size_t(B * T); ++i)  // y one token ahead
            REQUIRE(got[0].y.data().data()[i] == got[0].x.data().data()[i] + 1);
    }
    CHECK(sampler.batches_drawn() == 3);
    // The free function on a caller's rng makes the same draws (the GPT example's loop).
    std::mt19937_64 a(7), b(7);
    CHECK(first_column(sample_windows(data, 5, 10, a)) == sample_offsets(1000, 5, 10, b));
}

TEST_CASE("W = 2 ranks' parts, concatenated, are the W = 1 batch, and A micro-steps take rows k·B/A + r·b",
          "[data][sampler]") {
    const Ids data = iota_ids(500);
    const int B = 8, T = 4;
    WindowSampler one(data, WindowSamplerOptions(B, T).seed(5));
    const std::vector<std::size_t> all = first_column(one.next()[0]);
    SECTION("W 2, A 1: rank 0 rows 0..3, rank 1 rows 4..7") {
        WindowSampler r0(data, WindowSamplerOptions(B, T).seed(5).world_size(2).rank(0));
        WindowSampler r1(data, WindowSamplerOptions(B, T).seed(5).world_size(2).rank(1));
        std::vector<std::size_t> joined = first_column(r0.next()[0]);
        for (std::size_t o : first_column(r1.next()[0])) joined.push_back(o);
        CHECK(joined == all);
    }
    SECTION("W 2, A 2, b 2: micro-step k of rank r holds rows [4k + 2r, 4k + 2r + 2)") {
        for (int r = 0; r < 2; ++r) {
            WindowSampler s(data, WindowSamplerOptions(B, T).seed(5).world_size(2).rank(r).grad_accum(2));
            CHECK(s.options().per_rank() == 2);
            const std::vector<Batch> micro = s.next();
            REQUIRE(micro.size() == 2);
            for (std::size_t k = 0; k < 2; ++k) {
                const std::size_t first = 4 * k + 2 * std::size_t(r);
                CHECK(first_column(micro[k]) == std::vector<std::size_t>{all[first], all[first + 1]});
            }
        }
    }
}

TEST_CASE("WindowSampler::next_batch is next()'s one batch for one rank without accumulation", "[data][sampler]") {
    const Ids data = iota_ids(300);
    WindowSampler a(data, WindowSamplerOptions(4, 5).seed(3)), b(data, WindowSamplerOptions(4, 5).seed(3));
    const Batch one = a.next_batch();
    const std::vector<Batch> all = b.next();
    REQUIRE(all.size() == 1);
    CHECK(one.x.shape() == xgrad::Shape{4, 5});
    CHECK(first_column(one) == first_column(all[0]));
    WindowSampler accum(data, WindowSamplerOptions(4, 5).grad_accum(2));
    CHECK_THROWS_WITH(accum.next_batch(), Catch::Matchers::Contains(
                                              "WindowSampler::next_batch: world_size 1 × grad_accum 2 gives 2 micro-batches a step: call next()"));
}

TEST_CASE("WindowSampler: state_dict then load_state_dict continues with the same batches", "[data][sampler]") {
    const Ids data = iota_ids(300);
    const WindowSamplerOptions opts = WindowSamplerOptions(6, 5).seed(11);
    WindowSampler a(data, opts);
    for (int i = 0; i < 3; ++i) a.next();
    const std::map<std::string, std::string> state = a.state_dict();
    CHECK(state.at("batches") == "3");
    WindowSampler b(data, opts);
    const std::vector<std::size_t> fresh = first_column(WindowSampler(data, opts).next()[0]);
    b.load_state_dict(state);
    CHECK(b.batches_drawn() == 3);
    for (int i = 0; i < 2; ++i) {
        const std::vector<std::size_t> next_a = first_column(a.next()[0]), next_b = first_column(b.next()[0]);
        CHECK(next_a == next_b);
        CHECK(next_a != fresh);  // not the first batch again
    }
}

TEST_CASE("WindowSampler::load_state_dict refuses a malformed state by name and stays as it was",
          "[data][sampler]") {
    const Ids data = iota_ids(300);
    WindowSampler s(data, WindowSamplerOptions(4, 5).seed(2));
    const std::map<std::string, std::string> good = s.state_dict();
    auto refusal = [&](std::map<std::string, std::string> state) {
        return message_of<xgrad::ValueError>([&] { s.load_state_dict(state); });
    };
    auto with = [&](const std::string& key, const std::string& value) {
        std::map<std::string, std::string> m = good;
        m[key] = value;
        return m;
    };
    CHECK(refusal({{"rng", good.at("rng")}}) == "WindowSampler::load_state_dict: missing key 'batches'");
    CHECK(refusal(with("epoch", "1")) ==
          "WindowSampler::load_state_dict: unknown key 'epoch' (the keys are 'rng' and 'batches')");
    CHECK_THAT(refusal(with("rng", good.at("rng") + " 7")),
               Catch::Contains("'rng' = ") && Catch::Contains("is not a std::mt19937_64 state as operator<< writes it"));
    CHECK_THAT(refusal(with("rng", "+" + good.at("rng"))), Catch::Contains("is not a std::mt19937_64 state"));
    CHECK_THAT(refusal(with("rng", "1 2 3")), Catch::Contains("is not a std::mt19937_64 state"));
    CHECK(refusal(with("batches", "-1")) == "WindowSampler::load_state_dict: 'batches' = '-1' is outside [0, "
                                            "9223372036854775807]");
    CHECK_THAT(refusal(with("batches", "5abc")), Catch::Contains("'batches' = '5abc' is not a decimal integer"));
    CHECK(s.state_dict() == good);  // nothing loaded
}

TEST_CASE("WindowSampler refuses options that break the batch rule", "[data][sampler]") {
    const Ids data = iota_ids(50);
    CHECK(message_of<xgrad::ValueError>([&] { WindowSampler(data, WindowSamplerOptions(12, 4).world_size(5)); }) ==
          "WindowSampler: batch 12 is not a multiple of world_size 5 × grad_accum 1 = 5: every rank's micro-batch "
          "needs the same number of windows");
    CHECK(message_of<xgrad::ValueError>([&] { WindowSampler(data, WindowSamplerOptions(12, 4).world_size(2).rank(2)); }) ==
          "WindowSampler: rank 2 outside [0, 2)");
    CHECK(message_of<xgrad::ValueError>([&] { WindowSampler(data, WindowSamplerOptions(12, 50)); }) ==
          "WindowSampler: 50 tokens hold no window of block + 1 = 51 tokens");
}

TEST_CASE("hostile sizes: a wrapping offset, a block below 1, W·A overflowing int, W or A of 0", "[data][sampler]") {
    const Ids data = iota_ids(50);
    // SIZE_MAX + 4 + 1 wraps to 4 < N: the check passed and the copy read far outside the tokens.
    CHECK(message_of<xgrad::IndexError>([&] { windows(data, {SIZE_MAX}, 4); }) ==
          "windows: offset 18446744073709551615 + block 4 + 1 exceeds the 50 tokens (offsets lie in [0, N − T − 1])");
    for (int block : {0, -1}) {
        CHECK(message_of<xgrad::ValueError>([&] { windows(data, {0}, block); }) ==
              fmt::format("windows: block {} must be at least 1", block));
        CHECK(message_of<xgrad::ValueError>([&] { fixed_windows(data, 2, block); }) ==
              fmt::format("fixed_offsets: block {} must be at least 1", block));
    }
    CHECK(message_of<xgrad::ValueError>([&] { WindowSampler(data, WindowSamplerOptions(1, INT_MAX)); }) ==
          "WindowSampler: 50 tokens hold no window of block + 1 = 2147483648 tokens");
    // 65536 × 65536 is 2^32: 0 as an int, and batch % 0 was a SIGFPE.
    CHECK(message_of<xgrad::ValueError>([&] {
              WindowSampler(data, WindowSamplerOptions(12, 4).world_size(65536).grad_accum(65536));
          }) == "WindowSampler: batch 12 is not a multiple of world_size 65536 × grad_accum 65536 = 4294967296: every "
                "rank's micro-batch needs the same number of windows");
    CHECK(WindowSamplerOptions(12, 4).world_size(0).per_rank() == 0);  // not a division by zero
    CHECK(WindowSamplerOptions(12, 4).world_size(65536).grad_accum(65536).per_rank() == 0);
    CHECK(message_of<xgrad::ValueError>([&] { micro_batch_rows(12, 0, 1, 0, 0); }) ==
          "micro_batch_rows: batch 12, world_size 0, grad_accum 1, rank 0, micro-step 0: need W, A >= 1, rank in "
          "[0, W), micro-step in [0, A), W·A dividing the batch");
    CHECK_THROWS_AS(micro_batch_rows(12, 2, 2, 0, 2), xgrad::ValueError);  // micro-step k = A
    CHECK_THROWS_AS(micro_batch_rows(12, 5, 1, 0, 0), xgrad::ValueError);  // 5 does not divide 12
    CHECK(micro_batch_rows(12, 2, 2, 1, 1) == std::pair<std::int64_t, std::int64_t>{9, 12});
}

TEST_CASE("WindowSampler over a memory-mapped shard gives the windows of the same ids in memory",
          "[data][sampler]") {
    TempDir dir;
    Ids ids(400);
    for (std::size_t i = 0; i < ids.size(); ++i) ids[i] = std::int64_t((i * 7 + 3) % 97);
    write_shard(dir.file("t.bin"), ids, 97);
    const TokenShard shard(dir.file("t.bin"), 97);
    WindowSampler on_disk(shard.view(), WindowSamplerOptions(4, 16).seed(9));
    WindowSampler in_memory(ids, WindowSamplerOptions(4, 16).seed(9));
    for (int i = 0; i < 3; ++i) {
        const Batch a = on_disk.next()[0], b = in_memory.next()[0];
        CHECK(a.x.data() == b.x.data());
        CHECK(a.y.data() == b.y.data());
    }
}

}  // namespace test_data_sampler
