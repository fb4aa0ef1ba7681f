// tests/examples/test_common.cpp — examples/common: read_text (a file's bytes, and its errors),
// LossLog (the loss CSV: header, row format, append on resume), ema_smooth and the smoothed column
// plot_losses writes, and the checkpoint's refusal of bad metadata (a char_mlp model and its
// AdamW). The loader's fuzzing is in tests/fuzz_checkpoint.cpp.
#include <catch2/catch.hpp>

#include <cmath>
#include <limits>
#include <random>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "char_mlp/model.hpp"
#include "common/checkpoint.hpp"
#include "common/run_log.hpp"
#include "common/text.hpp"
#include <xgrad/nn/nn.hpp>
#include <xgrad/optim/optim.hpp>
#include "test_helpers.hpp"

using namespace xgrad;
using namespace xgrad::testing;
using Catch::Matchers::Contains;
namespace fs = std::filesystem;

TEST_CASE("read_text returns a file's bytes unchanged", "[examples_common][text]") {
    TempDir dir;
    const std::string bytes = std::string("Ge1:1 In the beginning\r\nno newline at the end\0x", 47);
    write_bytes(dir.file("t.txt"), bytes);
    REQUIRE(examples::read_text(dir.file("t.txt")) == bytes);
}

TEST_CASE("read_text throws for a missing or an empty file, naming it", "[examples_common][text]") {
    TempDir dir;
    REQUIRE_THROWS_WITH(examples::read_text(dir.file("missing.txt")),
                        Catch::Contains("cannot open text file") && Catch::Contains("missing.txt"));
    write_bytes(dir.file("empty.txt"), "");
    REQUIRE_THROWS_WITH(examples::read_text(dir.file("empty.txt")),
                        Catch::Contains("empty file") && Catch::Contains("empty.txt"));
}

TEST_CASE("LossLog writes the header, one row per step, and appends on resume", "[examples_common][run_log]") {
    TempDir dir;
    const std::string path = dir.file("loss.csv");
    const double none = std::numeric_limits<double>::quiet_NaN();
    {
        examples::LossLog log(path, /*append=*/false);
        log.write(10, 3.2958368, none, 0.003);
        log.write(20, 2.5, 2.75, 1e-4);
    }
    REQUIRE(read_bytes(path) == "step,train_loss,val_loss,lr\n10,3.295837,,0.003\n20,2.500000,2.750000,0.0001\n");
    {
        examples::LossLog log(path, /*append=*/true);  // a resumed run continues the file
        log.write(30, 2.25, none, 5e-5);
    }
    REQUIRE(read_bytes(path) ==
            "step,train_loss,val_loss,lr\n10,3.295837,,0.003\n20,2.500000,2.750000,0.0001\n30,2.250000,,5e-05\n");
    examples::LossLog fresh(path, /*append=*/false);  // a new run starts over
    fresh.write(1, 1.0, none, 1.0);
    REQUIRE(read_bytes(path) == "step,train_loss,val_loss,lr\n1,1.000000,,1\n");
}

TEST_CASE("LossLog throws when the file cannot be opened", "[examples_common][run_log]") {
    TempDir dir;
    REQUIRE_THROWS_WITH(examples::LossLog(dir.file("no/such/dir/loss.csv"), false),
                        Catch::Contains("cannot open for writing"));
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
        examples::LossLog log(dir.file("loss.csv"), /*append=*/false);
        log.write(10, 1.0, std::nan(""), 1e-3);
        log.write(20, 2.0, 1.5, 1e-3);  // the validation column is not smoothed
        log.write(30, 3.0, std::nan(""), 1e-3);
    }
    examples::plot_losses(dir.path.string(), "t", "[0:4]", 0.5);  // draws loss.png only if gnuplot is installed
    REQUIRE(read_bytes(dir.file("loss_ema.csv")) == "step,train_loss_ema\n10,1.000000\n20,1.666667\n30,2.428571\n");
    REQUIRE_THROWS_WITH(examples::plot_losses(dir.file("missing")),
                        Catch::Contains("loss.csv: cannot open for reading"));
}

TEST_CASE("ckpt bug 9: the char_mlp checkpoint refuses train.step 5abc and 1e3 and a bad rng state",
          "[ckpt][char_mlp][parse][regression]") {
    TempDir dir;
    const std::string path = dir.file("ckpt.safetensors");
    manual_seed(3);
    char_mlp::CharMLP model(27, 3, 4, 8);
    optim::AdamW opt(model.named_parameters(), optim::AdamWOptions(3e-3));
    std::mt19937_64 rng(42);
    const examples::RunFlags flags{{"--steps", "10"}};
    examples::save_checkpoint(path, model, opt, 5, rng, flags);
    std::mt19937_64 rng2;
    REQUIRE(examples::load_checkpoint(path, model, opt, rng2, flags) == 5);
    REQUIRE(rng2 == rng);

    // The file with one metadata value replaced (the header is rewritten; data unchanged).
    auto with_meta = [&](const std::string& key, const std::string& value) {
        nn::SafetensorsFile f = nn::load_safetensors(path);
        f.metadata[key] = value;
        const std::string other = dir.file("edited.safetensors");
        nn::save_safetensors(other, f.tensors, f.metadata);
        return other;
    };
    for (const char* step : {"5abc", "1e3", "+5", " 5", "-1", "2147483648", ""}) {
        INFO("train.step = '" << step << "'");
        const std::string bad = with_meta("train.step", step);
        const std::string msg = message_of<std::runtime_error>(
            [&] { examples::load_checkpoint(bad, model, opt, rng2, flags); });
        CHECK_THAT(msg, Contains("train.step"));
    }
    std::ostringstream text;
    text << rng;
    for (const std::string& state : {text.str() + " 1", "+" + text.str(), text.str() + "x"}) {
        const std::string bad = with_meta("train.rng", state);
        const std::string msg = message_of<std::runtime_error>(
            [&] { examples::load_checkpoint(bad, model, opt, rng2, flags); });
        CHECK_THAT(msg, Contains("train.rng"));
    }
}
