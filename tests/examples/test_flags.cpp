// tests/examples/test_flags.cpp — examples/common/flags: one table gives the command line, the
// flags a checkpoint records (--resume must repeat them) and those --init-from must match.
#include <catch2/catch.hpp>

#include <algorithm>
#include <string>
#include <vector>

#include "common/flags.hpp"

namespace test_flags {
using Catch::Matchers::Contains;

namespace {
// Parses `args` (after the program's name) with CLI11, as parse_and_run does.
void parse(CLI::App& app, std::vector<std::string> args) {
    std::reverse(args.begin(), args.end());  // CLI11 takes them last first
    app.parse(args);
}
}  // namespace

TEST_CASE("flag table: roles select the recorded flags, values as typed, defaults before parsing", "[examples_common][flags]") {
    CLI::App app;
    examples::FlagTable t(app);
    int layers = 4, steps = 2000, threads = 1;
    double lr = 1e-3;
    std::string tokenizer = "char";
    std::int64_t vocab = 4096;
    bool no_tie = false;
    t.integer("--n-layer", layers, 1, 256, "L", examples::kModel);
    t.choice("--tokenizer", tokenizer, {"char", "bpe"}, "tokens", examples::kModel);
    t.integer("--vocab-size", vocab, 256, 1 << 20, "V", examples::kModel);
    t.only_when("--vocab-size", [&] { return tokenizer == "bpe"; });
    t.flag("--no-tie", no_tie, "untied", examples::kModel);
    t.integer("--steps", steps, 1, 1 << 30, "steps", examples::kResume);
    t.real("--lr", lr, {0, 1e9, true}, "lr", examples::kResume);
    t.integer("--threads", threads, 1, 256, "threads");
    parse(app, {"--lr", "0.003", "--no-tie", "--threads", "2"});
    CHECK(t.values(examples::kModel) ==
          examples::RunFlags{{"--n-layer", "4"}, {"--tokenizer", "char"}, {"--no-tie", "true"}});
    CHECK(t.values(examples::kResume) == examples::RunFlags{{"--n-layer", "4"}, {"--tokenizer", "char"},
                                                              {"--no-tie", "true"}, {"--steps", "2000"}, {"--lr", "0.003"}});
    CHECK(t.names_without(examples::kResume) == "--threads");
    CHECK(t.names_with(examples::kModel) == "--n-layer, --tokenizer, --vocab-size, --no-tie");
    CHECK(t.given("--lr"));
    CHECK_FALSE(t.given("--steps"));
    tokenizer = "bpe";  // --vocab-size is recorded only with byte pairs
    CHECK(t.values(examples::kModel).at("--vocab-size") == "4096");
    CHECK_THROWS_WITH(t.given("--nope"), Contains("no flag --nope"));
}

TEST_CASE("flag table: a refused value names the flag, the text and the range", "[examples_common][flags]") {
    CLI::App app;
    examples::FlagTable t(app);
    int steps = 10;
    t.integer("--steps", steps, 1, 100, "steps", examples::kResume);
    CHECK_THROWS_WITH(parse(app, {"--steps", "0x10"}), Contains("--steps") && Contains("'0x10'") && Contains("[1, 100]"));
}

}  // namespace test_flags
