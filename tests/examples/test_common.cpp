// tests/examples/test_common.cpp — examples/common: LossLog (the loss CSV: header, row format, an
// extra column, the whole file rewritten after a row or held back for a second, append on resume,
// rows after the checkpoint's step dropped, a failed rewrite remembered), ema_smooth and the
// smoothed column plot_losses writes, the checkpoint's flags ("flag.<name>": refused when missing
// or other, --steps bounding the step; a char_mlp model and its AdamW), load_model_weights (gpt's
// --init-from), the strict numeric flags and the memory check of cli, the output paths checked
// up front and the final saves one by one (outputs), and gnuplot under a path full of quotes.
// The loader's fuzzing is in tests/fuzz_checkpoint.cpp; the programs' whole command lines are
// tested by tests/examples/cli.sh.
#include <catch2/catch.hpp>

#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <thread>
#include <limits>
#include <random>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "char_mlp/model.hpp"
#include "common/checkpoint.hpp"
#include "common/cli.hpp"
#include "common/data_parallel.hpp"
#include "common/gnuplot.hpp"
#include "common/outputs.hpp"
#include "common/run_log.hpp"
#include <xgrad/nn/nn.hpp>
#include <xgrad/optim/optim.hpp>
#include "test_helpers.hpp"

using namespace xgrad;
using namespace xgrad::testing;
using Catch::Matchers::Contains;
namespace fs = std::filesystem;

namespace {

// What the checkpoint tests save and load: a small char_mlp (seed 3) with its AdamW, the batch
// generator and one flag, and a file path in a fresh directory.
struct Seed {
    explicit Seed(std::uint64_t s) { manual_seed(s); }
};
struct SmallRun {
    TempDir dir;
    std::string path = dir.file("ckpt.safetensors");
    Seed seed{3};
    char_mlp::CharMLP model{27, 3, 4, 8};
    optim::AdamW opt{model.named_parameters(), optim::AdamWOptions(3e-3)};
    std::mt19937_64 rng{42};
    examples::RunFlags flags{{"--steps", "10"}};
};

}  // namespace

TEST_CASE("LossLog writes the header, one row per step, and appends on resume", "[examples_common][run_log]") {
    TempDir dir;
    const std::string path = dir.file("loss.csv");
    const double none = std::numeric_limits<double>::quiet_NaN();
    {
        examples::LossLog log(path, /*resumed_at=*/0);
        log.write(10, 3.2958368, none, 0.003);
        log.write(20, 2.5, 2.75, 1e-4);
    }
    REQUIRE(read_bytes(path) == "step,train_loss,val_loss,lr\n10,3.295837,,0.003\n20,2.500000,2.750000,0.0001\n");
    {
        examples::LossLog log(path, /*resumed_at=*/20);  // a run resumed at step 20 continues the file
        log.write(30, 2.25, none, 5e-5);
    }
    REQUIRE(read_bytes(path) ==
            "step,train_loss,val_loss,lr\n10,3.295837,,0.003\n20,2.500000,2.750000,0.0001\n30,2.250000,,5e-05\n");
    {
        examples::LossLog fresh(path, /*resumed_at=*/0);  // a new run starts over
        CHECK(read_bytes(path) == "step,train_loss,val_loss,lr\n");
        fresh.write(1, 1.0, none, 1.0);
    }
    REQUIRE(read_bytes(path) == "step,train_loss,val_loss,lr\n1,1.000000,,1\n");
}

TEST_CASE("LossLog rewrites the whole file after each row: the header and every row so far, no temporary left",
          "[examples_common][run_log]") {
    TempDir dir;
    const std::string path = dir.file("loss.csv");
    const std::string header = "step,train_loss,val_loss,lr\n";
    const double none = std::numeric_limits<double>::quiet_NaN();
    examples::LossLog log(path, /*resumed_at=*/0, "", /*seconds_between_writes=*/0);
    CHECK(read_bytes(path) == header);  // at once, before any step
    log.write(10, 3.2958368, none, 0.003);
    CHECK(read_bytes(path) == header + "10,3.295837,,0.003\n");
    log.write(20, 2.5, 2.75, 1e-4);
    CHECK(read_bytes(path) == header + "10,3.295837,,0.003\n20,2.500000,2.750000,0.0001\n");
    log.write(30, 2.25, none, 5e-5);
    CHECK(read_bytes(path) == header + "10,3.295837,,0.003\n20,2.500000,2.750000,0.0001\n30,2.250000,,5e-05\n");
    CHECK(dir.listing() == std::vector<std::string>{"loss.csv"});
    CHECK(log.failure().empty());
}

TEST_CASE("LossLog holds rows back until a validation loss or the interval, and its destructor writes the rest",
          "[examples_common][run_log]") {
    TempDir dir;
    const std::string path = dir.file("loss.csv");
    const std::string header = "step,train_loss,val_loss,lr\n";
    const double none = std::numeric_limits<double>::quiet_NaN();
    const std::string rows_10_30 = "10,3.000000,,0.001\n20,2.900000,,0.001\n30,2.800000,2.850000,0.001\n";
    {
        examples::LossLog log(path, /*resumed_at=*/0, "", /*seconds_between_writes=*/3600);
        log.write(10, 3.0, none, 1e-3);
        log.write(20, 2.9, none, 1e-3);
        CHECK(read_bytes(path) == header);               // rows 10 and 20 wait in memory
        log.write(30, 2.8, 2.85, 1e-3);                  // a validation loss: written at once, with those before it
        CHECK(read_bytes(path) == header + rows_10_30);
        log.write(40, 2.7, none, 1e-3);
        CHECK(read_bytes(path) == header + rows_10_30);  // waits
        log.flush();
        CHECK(read_bytes(path) == header + rows_10_30 + "40,2.700000,,0.001\n");  // flush() wrote it
        log.write(50, 2.6, none, 1e-3);
    }
    CHECK(read_bytes(path) == header + rows_10_30 + "40,2.700000,,0.001\n50,2.600000,,0.001\n");  // the destructor
    examples::LossLog log(path, /*resumed_at=*/0, "", /*seconds_between_writes=*/0.05);
    log.write(10, 3.0, none, 1e-3);
    std::this_thread::sleep_for(std::chrono::milliseconds(60));  // past the interval: the next row writes both
    log.write(20, 2.9, none, 1e-3);
    CHECK(read_bytes(path) == header + "10,3.000000,,0.001\n20,2.900000,,0.001\n");
}

TEST_CASE("LossLog on resume drops the rows logged after the checkpoint's step, so none is doubled",
          "[examples_common][run_log][regression]") {
    // A run logged steps 10-40, was killed before saving at step 40, and resumes from its
    // checkpoint of step 20: rows 30 and 40 are dropped, then the resumed run logs them again.
    TempDir dir;
    const std::string path = dir.file("loss.csv");
    const std::string header = "step,train_loss,val_loss,lr\n";
    const std::string rows_10_20 = "10,3.000000,,0.001\n20,2.500000,2.600000,0.001\n";
    write_bytes(path, header + rows_10_20 + "30,2.400000,,0.001\n40,2.300000,2.350000,0.001\n41,2.2");  // 41: cut short
    {
        examples::LossLog log(path, /*resumed_at=*/20);
        CHECK(read_bytes(path) == header + rows_10_20);  // at once, before any step is taken
        log.write(30, 2.25, 2.5, 5e-4);
        CHECK(read_bytes(path) == header + rows_10_20 + "30,2.250000,2.500000,0.0005\n");
    }
    CHECK(read_bytes(path) == header + rows_10_20 + "30,2.250000,2.500000,0.0005\n");
    CHECK(dir.listing() == std::vector<std::string>{"loss.csv"});  // no temporary file left
    // Nothing beyond the step: the file is kept as it is; a missing file starts with the header.
    examples::LossLog(path, 30);
    CHECK(read_bytes(path) == header + rows_10_20 + "30,2.250000,2.500000,0.0005\n");
    examples::LossLog(dir.file("new.csv"), 30).write(40, 1.0, std::nan(""), 1e-3);
    CHECK(read_bytes(dir.file("new.csv")) == header + "40,1.000000,,0.001\n");
}

TEST_CASE("LossLog with an extra column: the header, the rows, and a resume that keeps only whole rows",
          "[examples_common][run_log]") {
    TempDir dir;
    const std::string path = dir.file("loss.csv");
    const double none = std::numeric_limits<double>::quiet_NaN();
    const std::string header = "step,train_loss,val_loss,lr,val_nats_per_char\n";
    {
        examples::LossLog log(path, /*resumed_at=*/0, "val_nats_per_char");
        log.write(10, 3.0, none, 1e-3, none);
        log.write(20, 2.5, 2.6, 1e-3, 0.875);
        log.write(30, 2.4, none, 1e-3);
    }
    const std::string rows_10_20 = "10,3.000000,,0.001,\n20,2.500000,2.600000,0.001,0.875000\n";
    REQUIRE(read_bytes(path) == header + rows_10_20 + "30,2.400000,,0.001,\n");
    // Resumed at step 20: row 30 is dropped, and so is a row of four fields (not this log's).
    write_bytes(path, header + rows_10_20 + "15,2.700000,,0.001\n30,2.400000,,0.001,\n");
    examples::LossLog(path, 20, "val_nats_per_char");
    CHECK(read_bytes(path) == header + rows_10_20);
}

TEST_CASE("LossLog on resume rewrites the target of a symlinked loss.csv and keeps the link",
          "[examples_common][run_log][regression]") {
    TempDir dir;
    fs::create_directories(dir.file("logs"));
    const std::string header = "step,train_loss,val_loss,lr\n", row_10 = "10,3.000000,,0.001\n";
    write_bytes(dir.file("logs/run.csv"), header + row_10 + "20,2.500000,,0.001\n");
    fs::create_symlink("logs/run.csv", dir.file("loss.csv"));
    examples::LossLog(dir.file("loss.csv"), 10).write(20, 2.25, std::nan(""), 1e-3);
    CHECK(fs::is_symlink(dir.file("loss.csv")));
    CHECK(read_bytes(dir.file("logs/run.csv")) == header + row_10 + "20,2.250000,,0.001\n");
    CHECK(dir.listing() == std::vector<std::string>{"logs", "loss.csv"});
}

TEST_CASE("LossLog remembers the first rewrite that failed, names the path, and goes on",
          "[examples_common][run_log][regression]") {
    // The run's directory vanishes mid-run: the rewrite cannot create its temporary there.
    TempDir dir;
    const std::string run = dir.file("run"), path = run + "/loss.csv";
    const double none = std::numeric_limits<double>::quiet_NaN();
    fs::create_directories(run);
    examples::LossLog log(path, /*resumed_at=*/0, "", /*seconds_between_writes=*/0);
    log.write(10, 3.0, none, 1e-3);
    CHECK(read_bytes(path) == "step,train_loss,val_loss,lr\n10,3.000000,,0.001\n");
    fs::remove_all(run);
    CHECK(log.failure().empty());
    CHECK_NOTHROW(log.write(20, 2.5, none, 1e-3));
    CHECK_NOTHROW(log.write(30, 2.4, 2.45, 1e-3));
    CHECK(log.failure() == "rows from step 20 on not written (LossLog: cannot write '" + path + "': its directory '" +
                               run + "' does not exist)");
    fs::create_directories(run);  // back again: no later row is written, the failure stays
    log.write(40, 2.3, none, 1e-3);
    CHECK_FALSE(fs::exists(path));
    CHECK_THAT(log.failure(), Contains("rows from step 20 on"));

    // Rows held back: the failure names the first row the file lacks.
    examples::LossLog held(path, /*resumed_at=*/0, "", /*seconds_between_writes=*/3600);
    held.write(10, 3.0, none, 1e-3);
    held.write(20, 2.5, none, 1e-3);
    fs::remove_all(run);
    held.write(30, 2.4, 2.45, 1e-3);
    CHECK_THAT(held.failure(), Contains("rows from step 10 on not written (LossLog: cannot write '" + path + "'"));
}

TEST_CASE("LossLog throws, naming the path, when the file cannot be written at the start",
          "[examples_common][run_log]") {
    TempDir dir;
    const std::string missing = dir.file("no/such/dir/loss.csv");
    CHECK(message_of<std::runtime_error>([&] { examples::LossLog(missing, 0); }) ==
          "LossLog: cannot write '" + missing + "': its directory '" + dir.file("no/such/dir") + "' does not exist");
    // A device is not replaced: the log is a regular file.
    CHECK_THAT(message_of<std::runtime_error>([&] { examples::LossLog("/dev/full", 0); }),
               Contains("LossLog: cannot write '/dev/full'") && Contains("a character device"));
    // On resume too, where rows after the step are to be dropped from a file in a read-only place.
    if (::geteuid() != 0) {  // root writes anywhere
        fs::create_directories(dir.file("ro"));
        write_bytes(dir.file("ro/loss.csv"), "step,train_loss,val_loss,lr\n10,3.000000,,0.001\n20,2.5");
        fs::permissions(dir.file("ro"), fs::perms::owner_read | fs::perms::owner_exec);
        CHECK_THAT(message_of<std::runtime_error>([&] { examples::LossLog(dir.file("ro/loss.csv"), 10); }),
                   Contains("cannot drop the rows after step 10: LossLog: cannot write '" + dir.file("ro/loss.csv") + "'") &&
                       Contains("no permission"));
        fs::permissions(dir.file("ro"), fs::perms::owner_all);
    }
}

TEST_CASE("ema_smooth is TensorBoard's debiased EMA, worked by hand", "[examples_common][run_log]") {
    // w = 0.5 on 1, 2, 3:  m = 0.5, 1.25, 2.125;  1 - w^i = 0.5, 0.75, 0.875;  s = 1, 5/3, 17/7.
    const std::vector<double> s = examples::ema_smooth({1, 2, 3}, 0.5);
    REQUIRE(s.size() == 3);
    REQUIRE(s[0] == Approx(1.0).epsilon(1e-12));
    REQUIRE(s[1] == Approx(5.0 / 3.0).epsilon(1e-12));
    REQUIRE(s[2] == Approx(17.0 / 7.0).epsilon(1e-12));
    // Debiased, a constant curve stays constant from the first point (no pull towards 0).
    for (double v : examples::ema_smooth({3, 3, 3, 3}, 0.9)) REQUIRE(v == Approx(3.0).epsilon(1e-12));
    // A NaN is copied through and skipped: after 2, NaN, 4 with w = 0.5, m = 0.5·1 + 0.5·4 = 2.5
    // over 1 - 0.25, i.e. 10/3.
    const std::vector<double> gap = examples::ema_smooth({2, std::nan(""), 4}, 0.5);
    REQUIRE(gap[0] == Approx(2.0).epsilon(1e-12));
    REQUIRE(std::isnan(gap[1]));
    REQUIRE(gap[2] == Approx(10.0 / 3.0).epsilon(1e-12));
    REQUIRE(examples::ema_smooth({4, 1}, 0.0) == std::vector<double>{4, 1});  // w = 0: no smoothing
    REQUIRE(examples::ema_smooth({}, 0.6).empty());
    REQUIRE_THROWS_WITH(examples::ema_smooth({1}, 1.0), Catch::Contains("weight 1 is outside [0, 1)"));
    REQUIRE_THROWS_WITH(examples::ema_smooth({1}, -0.1), Catch::Contains("outside [0, 1)"));
}

TEST_CASE("plot_losses writes the EMA of the train losses as loss_ema.csv", "[examples_common][run_log]") {
    TempDir dir;
    {
        examples::LossLog log(dir.file("loss.csv"), /*resumed_at=*/0);
        log.write(10, 1.0, std::nan(""), 1e-3);
        log.write(20, 2.0, 1.5, 1e-3);  // the validation column is not smoothed
        log.write(30, 3.0, std::nan(""), 1e-3);
    }
    examples::plot_losses(dir.path.string(), "t", "[0:4]", 0.5);  // draws loss.png only if gnuplot is installed
    REQUIRE(read_bytes(dir.file("loss_ema.csv")) == "step,train_loss_ema\n10,1.000000\n20,1.666667\n30,2.428571\n");
    REQUIRE_THROWS_WITH(examples::plot_losses(dir.file("missing")),
                        Catch::Contains("loss.csv: cannot open for reading"));
    fs::remove(dir.file("loss_ema.csv"));
    fs::create_directories(dir.file("loss_ema.csv"));  // in the way: refused, naming it
    CHECK_THAT(message_of<std::runtime_error>([&] { examples::plot_losses(dir.path.string()); }),
               Contains("plot_losses: cannot write '" + dir.file("loss_ema.csv") + "'") && Contains("a directory"));
}

// ==== cli: strict numeric flags ==============================================================================

namespace {
// Parses `args` (the program name first) with `app`; returns the refusal's message, "" if accepted.
std::string parse_flags(CLI::App& app, std::vector<std::string> args) {
    std::vector<const char*> argv;
    for (const std::string& a : args) argv.push_back(a.c_str());
    try {
        app.parse(int(argv.size()), argv.data());
    } catch (const CLI::ParseError& e) {
        return e.what();
    }
    return "";
}
}  // namespace

TEST_CASE("cli bug F12: numeric flags refuse NaN, inf, 0x, '+', trailing text and out-of-range values",
          "[examples_common][cli][regression]") {
    const double inf = std::numeric_limits<double>::infinity();
    int steps = 7;
    std::uint64_t seed = 5;
    double lr = 0.5, clip = 1.0, beta = 0.9;
    CLI::App app;
    examples::int_flag(app, "--steps", steps, 1, 100, "");
    examples::seed_flag(app, "--seed", seed, "");
    examples::real_flag(app, "--lr", lr, {0, inf, true}, "");
    examples::real_flag(app, "--grad-clip", clip, {0, inf}, "");
    examples::real_flag(app, "--beta", beta, {0, 1, false, true}, "");

    // Each refusal names the flag, the text as typed and the range; nothing is assigned.
    const std::vector<std::pair<std::vector<std::string>, std::string>> refused = {
        {{"--steps", "0x10"}, "--steps: '0x10' is not a decimal integer in [1, 100]"},
        {{"--steps", "+5"}, "--steps: '+5' is not a decimal integer in [1, 100]"},
        {{"--steps", "1e1"}, "--steps: '1e1' is not a decimal integer in [1, 100]"},
        {{"--steps", "5abc"}, "--steps: '5abc' is not a decimal integer in [1, 100]"},
        {{"--steps", " 5"}, "--steps: ' 5' is not a decimal integer in [1, 100]"},
        {{"--steps", "0"}, "--steps: '0' is outside [1, 100]"},
        {{"--steps", "101"}, "--steps: '101' is outside [1, 100]"},
        {{"--seed", "-1"}, "--seed: '-1' is not a decimal integer in [0, 18446744073709551615]"},
        {{"--seed", "18446744073709551616"}, "--seed: '18446744073709551616' is outside [0, 18446744073709551615]"},
        {{"--lr", "nan"}, "--lr: 'nan' is not a finite number > 0"},
        {{"--lr", "inf"}, "--lr: 'inf' is not a finite number > 0"},
        {{"--lr", "0"}, "--lr: '0' is not a finite number > 0"},
        {{"--lr", "1e400"}, "--lr: '1e400' is not a finite number > 0"},
        {{"--lr", "0x1p-3"}, "--lr: '0x1p-3' is not a finite number > 0"},
        {{"--grad-clip", "nan"}, "--grad-clip: 'nan' is not a finite number >= 0"},
        {{"--grad-clip", "-0.5"}, "--grad-clip: '-0.5' is not a finite number >= 0"},
        {{"--beta", "1"}, "--beta: '1' is not a finite number in [0, 1)"},
        {{"--beta", "-nan"}, "--beta: '-nan' is not a finite number in [0, 1)"},
    };
    for (const auto& [args, message] : refused) {
        INFO(args[0] << " " << args[1]);
        std::vector<std::string> argv{"prog"};
        argv.insert(argv.end(), args.begin(), args.end());
        CHECK(parse_flags(app, argv) == message);
        app.clear();
    }
    CHECK(steps == 7);
    CHECK(seed == 5);
    CHECK(lr == 0.5);
    CHECK(clip == 1.0);
    CHECK(beta == 0.9);

    // Accepted: the value as std::from_chars reads it, the ends of each range included or not.
    REQUIRE(parse_flags(app, {"prog", "--steps", "100", "--seed", "18446744073709551615", "--lr", "1e-3", "--grad-clip",
                              "0", "--beta", "0"}) == "");
    CHECK(steps == 100);
    CHECK(seed == UINT64_MAX);
    CHECK(lr == 0.001);
    CHECK(clip == 0.0);
    CHECK(beta == 0.0);
}

TEST_CASE("cli: check_memory refuses needs beyond RAM and swap, listing each with its size",
          "[examples_common][cli][regression]") {
    CHECK(examples::human_size(512) == "512 B");
    CHECK(examples::human_size(1536) == "1.5 KiB");
    CHECK(examples::human_size(3.0 * (1 << 30)) == "3.0 GiB");
    CHECK(examples::human_size(std::pow(1024.0, 6) * 2) == "2.0 EiB");
    examples::check_memory({{"small", 1024.0}}, "--x");  // 1 KiB fits anywhere
    const std::string msg = message_of<std::invalid_argument>([] {
        examples::check_memory({{"the activations", std::pow(1024.0, 6) * 4}, {"the parameters", 2048.0}},
                               "--batch-size 9 or --d 8");
    });
    CHECK_THAT(msg, Contains("this run needs at least 4.0 EiB at once"));
    CHECK_THAT(msg, Contains("4.0 EiB  the activations"));
    CHECK_THAT(msg, Contains("2.0 KiB  the parameters"));
    CHECK_THAT(msg, Contains("lower --batch-size 9 or --d 8"));
}

// ==== checkpoint: the examples' flags around train::save / train::load (tests/train/test_state.cpp) ==============

TEST_CASE("ckpt: a checkpoint written before a flag existed names the flag", "[examples_common][ckpt]") {
    SmallRun run;
    auto& path = run.path;
    auto& model = run.model;
    auto& opt = run.opt;
    auto& rng = run.rng;
    auto& flags = run.flags;
    examples::save_checkpoint(path, model, opt, 5, rng, flags);
    examples::RunFlags newer = flags;
    newer["--arch"] = "gpt2";
    const std::string msg =
        message_of<std::runtime_error>([&] { examples::load_checkpoint(path, model, opt, rng, newer); });
    CHECK_THAT(msg, Contains("records no --arch (a file written before the key existed)"));
}

TEST_CASE("ckpt: load_model_weights loads the weights alone and refuses another shape or vocabulary",
          "[examples_common][ckpt]") {
    SmallRun run;
    auto& dir = run.dir;
    auto& path = run.path;
    auto& model = run.model;
    auto& opt = run.opt;
    auto& rng = run.rng;
    const std::string vocab = "abc";
    const examples::RunFlags shape{{"--embed-dim", "4"}, {"--hidden", "8"}};
    examples::RunFlags saved_flags = shape;
    saved_flags["--steps"] = "10";
    examples::save_checkpoint(path, model, opt, 7, rng, saved_flags, train::fingerprint(vocab, "abcabc"));

    // A fresh model and optimizer: the weights become the saved ones, the optimizer and rng stay.
    manual_seed(4);
    char_mlp::CharMLP fresh{27, 3, 4, 8};
    optim::AdamW fresh_opt{fresh.named_parameters(), optim::AdamWOptions(3e-3)};
    auto same_weights = [](const nn::Module& a, const nn::Module& b) {
        const NamedTensors sa = a.state_dict(), sb = b.state_dict();
        bool same = sa.size() == sb.size();
        for (std::size_t i = 0; same && i < sa.size(); ++i)
            same = sa[i].first == sb[i].first && sa[i].second.data() == sb[i].second.data();
        return same;
    };
    REQUIRE_FALSE(same_weights(model, fresh));
    REQUIRE(examples::load_model_weights(path, fresh, shape, vocab) == 7);
    CHECK(same_weights(model, fresh));
    CHECK(fresh_opt.state_dict().tensors.empty());  // no moments loaded: AdamW starts afresh

    // Another width is refused, naming the flag and both values; the model is left as it was.
    std::string msg = message_of<std::runtime_error>(
        [&] { examples::load_model_weights(path, fresh, {{"--embed-dim", "5"}, {"--hidden", "8"}}, vocab); });
    CHECK_THAT(msg, Contains("saved with --embed-dim 4, but this run has --embed-dim 5; the weights fit only a model "
                             "of the same shape: pass --embed-dim 4"));
    CHECK(same_weights(model, fresh));
    // Another vocabulary is refused, naming the first id whose byte differs.
    msg = message_of<std::runtime_error>([&] { examples::load_model_weights(path, fresh, shape, "abd"); });
    CHECK_THAT(msg, Contains("vocabulary mismatch") && Contains("token id 2 meant 'c' and would now mean 'd'"));
    // A flag the checkpoint does not record, and a file that is not a checkpoint.
    msg = message_of<std::runtime_error>(
        [&] { examples::load_model_weights(path, fresh, {{"--block-size", "3"}}, vocab); });
    CHECK_THAT(msg, Contains("records no --block-size"));
    const std::string weights_only = dir.file("model.safetensors");
    nn::save_safetensors(weights_only, model.state_dict());
    msg = message_of<std::runtime_error>([&] { examples::load_model_weights(weights_only, fresh, shape, vocab); });
    CHECK_THAT(msg, Contains("not a training checkpoint"));
}

TEST_CASE("ckpt: the examples' --steps bounds 'train.step', and the file keeps the flags as flag.<name>",
          "[examples_common][ckpt][regression]") {
    SmallRun run;
    auto& dir = run.dir;
    auto& path = run.path;
    auto& model = run.model;
    auto& opt = run.opt;
    auto& rng = run.rng;
    auto& flags = run.flags;
    examples::save_checkpoint(path, model, opt, 5, rng, flags);  // --steps 10
    nn::SafetensorsFile f = nn::load_safetensors(path);
    CHECK(f.metadata.at("flag.--steps") == "10");
    CHECK(f.metadata.at("train.step") == "5");
    f.metadata["train.step"] = "11";  // a step this run cannot have saved, with a right checksum
    const std::string other = dir.file("tampered.safetensors");
    nn::save_safetensors(other, f.tensors, f.metadata);
    std::mt19937_64 rng2;
    CHECK_THAT(message_of<std::runtime_error>([&] { examples::load_checkpoint(other, model, opt, rng2, flags); }),
               Contains("'train.step' = 11 is beyond this run's last step 10"));
    CHECK(examples::load_checkpoint(path, model, opt, rng2, flags) == 5);
    CHECK(rng2 == rng);
}

TEST_CASE("check_finite_loss stops a diverged run, naming the step", "[examples_common][run_log][regression]") {
    examples::check_finite_loss(1, 3.5);
    CHECK_THAT(message_of<std::runtime_error>([] { examples::check_finite_loss(7, std::nan("")); }),
               Contains("step 7: the training loss is NaN (the run diverged)"));
    CHECK_THAT(message_of<std::runtime_error>([] { examples::check_finite_loss(2, -HUGE_VAL); }),
               Contains("step 2: the training loss is -inf"));
    CHECK_THAT(message_of<std::runtime_error>([] { examples::check_finite_loss(4, std::nan(""), "validation"); }),
               Contains("step 4: the validation loss is NaN"));
}

// ==== outputs: checked before the run, saved one by one at its end ==============================================

TEST_CASE("check_output_files refuses an output that is a directory or a symlink loop, before any step",
          "[examples_common][outputs][regression]") {
    TempDir dir;
    const std::string out = dir.path.string();
    const std::vector<std::string> names{"checkpoint.safetensors", "model.safetensors"};
    examples::check_output_files(out, names);  // missing files are created at the end: fine
    fs::create_directories(dir.file("checkpoint.safetensors"));
    CHECK(message_of<std::runtime_error>([&] { examples::check_output_files(out, names); }) ==
          "--out " + out + ": '" + dir.file("checkpoint.safetensors") +
              "' is a directory, where the run writes a file at its end: remove it or choose another --out");
    fs::remove(dir.file("checkpoint.safetensors"));
    fs::create_symlink("model.safetensors", dir.file("model.safetensors"));  // a link to itself
    CHECK_THAT(message_of<std::runtime_error>([&] { examples::check_output_files(out, names); }),
               Contains("'" + dir.file("model.safetensors") + "'") && Contains("Too many levels of symbolic links"));
}

TEST_CASE("check_output_files refuses a dangling symlink whose target cannot be created, before any step",
          "[examples_common][outputs][regression]") {
    // A link into a missing directory: the run would train every step, then fail to save.
    TempDir dir;
    const std::string out = dir.path.string();
    fs::create_symlink("/nonexistent-dir-of-this-test/checkpoint.safetensors",
                       dir.file("checkpoint.safetensors"));
    CHECK_THAT(message_of<std::runtime_error>([&] { examples::check_output_files(out, {"checkpoint.safetensors"}); }),
               Contains("'" + dir.file("checkpoint.safetensors") + "'") && Contains("/nonexistent-dir-of-this-test"));
    // A dangling link into an existing writable directory is fine: the save follows it.
    fs::create_directories(dir.file("elsewhere"));
    fs::create_symlink("elsewhere/model.safetensors", dir.file("model.safetensors"));
    CHECK_NOTHROW(examples::check_output_files(out, {"model.safetensors"}));
}

TEST_CASE("FinalSaves tries every save past a failure and then names what was and was not written",
          "[examples_common][outputs][regression]") {
    examples::FinalSaves saves;
    std::vector<std::string> ran;
    saves.attempt("out/a", [&] { ran.push_back("a"); });
    saves.attempt("out/b", [&] { throw std::runtime_error("disk full"); });
    saves.attempt("out/c", [&] { ran.push_back("c"); });
    CHECK(ran == std::vector<std::string>{"a", "c"});
    CHECK(message_of<std::runtime_error>([&] { saves.check(); }) ==
          "not written: out/b (disk full); written: out/a, out/c");
    examples::FinalSaves fine;
    fine.attempt("out/a", [] {});
    fine.check();  // nothing failed: no exception
}

// ==== gnuplot: no shell, every path quoted ======================================================================

TEST_CASE("run_gnuplot writes its script whole, and names a script path it cannot write",
          "[examples_common][gnuplot]") {
    if (!examples::gnuplot_available()) {
        WARN("skipped: gnuplot is not installed, so run_gnuplot writes no script");
        return;
    }
    TempDir dir;
    const std::string png = dir.file("p.png");
    const std::string script = "set terminal pngcairo size 80,60\nset output " + examples::gnuplot_quote(png) + "\nplot x\n";
    CHECK(examples::run_gnuplot(dir.file("p.gp"), script, png, "p") == "p: " + png);
    CHECK(read_bytes(dir.file("p.gp")) == script);
    CHECK(message_of<std::runtime_error>([&] { examples::run_gnuplot(dir.file("gone/p.gp"), script, png, "p"); }) ==
          "run_gnuplot: cannot write '" + dir.file("gone/p.gp") + "': its directory '" + dir.file("gone") +
              "' does not exist");
}

TEST_CASE("gnuplot bug: an --out holding ' \" $ ` and spaces still gets its picture",
          "[examples_common][gnuplot][regression]") {
    CHECK(examples::gnuplot_quote("it's") == "'it''s'");
    CHECK(examples::gnuplot_quote("a \"b\" $c `d` \\e") == "'a \"b\" $c `d` \\e'");
    if (!examples::gnuplot_available()) {
        WARN("skipped: gnuplot is not installed, so no picture can be drawn");
        return;
    }
    TempDir dir;
    const std::string odd = dir.file("it's a \"test\" $HOME `x` \\");
    fs::create_directories(odd);
    {
        examples::LossLog log(odd + "/loss.csv", /*resumed_at=*/0);
        log.write(10, 3.0, 2.9, 1e-3);
        log.write(20, 2.0, std::nan(""), 1e-3);
    }
    CHECK(examples::plot_losses(odd, "it's \"quoted\"") == "loss curve: " + odd + "/loss.png");
    CHECK(fs::file_size(odd + "/loss.png") > 1000);
}

TEST_CASE("data_parallel: rank r's rows of micro-step k, worked by hand", "[examples_common][data_parallel]") {
    // B 12, W 2, N 2: b = 3; k 0 → rank 0 rows 0..2, rank 1 rows 3..5; k 1 → rank 0 rows 6..8, rank 1 rows 9..11.
    using Rows = std::pair<std::int64_t, std::int64_t>;
    const examples::BatchSplit r0{12, 2, 2, 0}, r1{12, 2, 2, 1};
    REQUIRE(r0.per_rank() == 3);
    REQUIRE(r0.rows(0) == Rows{0, 3});
    REQUIRE(r1.rows(0) == Rows{3, 6});
    REQUIRE(r0.rows(1) == Rows{6, 9});
    REQUIRE(r1.rows(1) == Rows{9, 12});
    const examples::BatchSplit alone{12, 1, 1, 0};  // one process, no accumulation: the whole batch
    REQUIRE(alone.rows(0) == Rows{0, 12});

    const xgrad::IndexTensor x{{0, 1}, {2, 3}, {4, 5}, {6, 7}};  // (4, 2)
    const xgrad::IndexTensor mid = examples::take_rows(x, 1, 3);
    REQUIRE(mid.shape() == xgrad::Shape{2, 2});
    REQUIRE(mid.data()(0, 0) == 2);
    REQUIRE(mid.data()(1, 1) == 5);
    REQUIRE_THROWS_WITH(examples::take_rows(x, 3, 5), Catch::Contains("rows [3, 5) are outside [0, 4]"));
}

TEST_CASE("data_parallel: a batch that ranks × grad-accum does not divide is refused", "[examples_common][data_parallel]") {
    // One process (this test binary runs without mpirun): W = 1, so only --grad-accum divides.
    REQUIRE(examples::split_batch(12, 4).per_rank() == 3);
    REQUIRE_THROWS_WITH(examples::split_batch(12, 5),
                        Catch::Contains("--batch-size 12 is not divisible by 1 rank × --grad-accum 5 = 5"));
}
