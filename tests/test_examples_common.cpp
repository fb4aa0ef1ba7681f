// tests/test_examples_common.cpp — examples/common: read_text (a file's bytes, and its errors)
// and LossLog (the loss CSV: header, row format, append on resume). The checkpoint's round trip
// and its refusals are in test_reliability_ckpt.cpp and fuzz_checkpoint.cpp.
#include <catch2/catch.hpp>

#include <cmath>
#include <limits>
#include <stdexcept>
#include <string>

#include "common/run_log.hpp"
#include "common/text.hpp"
#include "test_helpers.hpp"

using xgrad::testing::TempDir;
using xgrad::testing::read_bytes;
using xgrad::testing::write_bytes;

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
