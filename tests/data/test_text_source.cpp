// tests/data/test_text_source.cpp — data/text_source: a file's bytes and the refusals of what is no
// regular file (a directory, a FIFO, a device), and the KJV through `bible`: Psalm 1, and the
// ranges refused before any shell runs.
#include <catch2/catch.hpp>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <stdexcept>
#include <string>
#include <thread>

#include <xgrad/data/text_source.hpp>
#include "test_helpers.hpp"

namespace test_data_text_source {
using namespace xgrad::testing;
using xgrad::data::read_bible;
using xgrad::data::read_text_file;
namespace fs = std::filesystem;

bool bible_installed() { return std::system("command -v bible > /dev/null 2>&1") == 0; }

TEST_CASE("read_text_file returns a file's bytes unchanged", "[data][text_source]") {
    TempDir dir;
    const std::string bytes = std::string("Ge1:1 In the beginning\r\nno newline at the end\0x", 47);
    write_bytes(dir.file("t.txt"), bytes);
    REQUIRE(read_text_file(dir.file("t.txt")) == bytes);
}

TEST_CASE("read_text_file throws for a missing or an empty file, naming it", "[data][text_source]") {
    TempDir dir;
    CHECK(message_of<std::runtime_error>([&] { read_text_file(dir.file("missing.txt")); }) ==
          "read_text_file: cannot open text file '" + dir.file("missing.txt") + "' (No such file or directory)");
    write_bytes(dir.file("empty.txt"), "");
    CHECK(message_of<std::runtime_error>([&] { read_text_file(dir.file("empty.txt")); }) ==
          "read_text_file: no text read from '" + dir.file("empty.txt") + "' (empty file)");
}

TEST_CASE("read_text_file names a directory instead of failing inside the stream", "[data][text_source]") {
    TempDir dir;
    CHECK(message_of<std::runtime_error>([&] { read_text_file(dir.path.string()); }) ==
          "read_text_file: '" + dir.path.string() + "' is a directory, not a text file");
}

TEST_CASE("read_text_file refuses a FIFO and a device, naming the file, without reading from it",
          "[data][text_source]") {
    TempDir dir;
    const std::string fifo = dir.file("pipe");
    REQUIRE(::mkfifo(fifo.c_str(), 0600) == 0);
    fs::create_symlink(fifo, dir.file("link"));  // followed, as open() would
    // A writer opens the FIFO once a reader has and closes it at once (end of file): a reader
    // that opened the FIFO gets no text instead of blocking for ever.
    auto refusal = [&](const std::string& path) {
        std::atomic<bool> done{false};
        std::thread writer([&] {
            for (int i = 0; i < 200 && !done; ++i) {
                const int fd = ::open(fifo.c_str(), O_WRONLY | O_NONBLOCK);
                if (fd >= 0) return (void)::close(fd);
                std::this_thread::sleep_for(std::chrono::milliseconds(10));
            }
        });
        const std::string msg = message_of<std::runtime_error>([&] { read_text_file(path); });
        done = true;
        writer.join();
        return msg;
    };
    CHECK(refusal(fifo) == "read_text_file: '" + fifo + "' is a FIFO (named pipe), not a regular text file");
    CHECK(refusal(dir.file("link")) ==
          "read_text_file: '" + dir.file("link") + "' is a FIFO (named pipe), not a regular text file");
    CHECK(message_of<std::runtime_error>([&] { read_text_file("/dev/null"); }) ==
          "read_text_file: '/dev/null' is a character device, not a regular text file");
}

TEST_CASE("read_bible: Psalm 1, one verse a line, each led by its reference", "[data][text_source]") {
    if (!bible_installed()) {
        WARN("the bible program is not installed (.ci/install-deps): read_bible is not run");
        return;
    }
    const std::string psalm = read_bible("psa1:1-psa1:6");
    const std::string first = "Psa1:1 Blessed is the man that walketh not in the counsel of the ungodly, nor standeth in "
                              "the way of sinners, nor sitteth in the seat of the scornful.\n";
    REQUIRE(psalm.substr(0, first.size()) == first);
    CHECK(std::count(psalm.begin(), psalm.end(), '\n') == 6);  // six verses
    CHECK(psalm.find("\nPsa1:6 For the LORD knoweth the way of the righteous") != std::string::npos);
    CHECK(psalm.size() == 721);  // bytes, as `bible -f "psa1:1-psa1:6" | wc -c` counts them
    CHECK(read_bible("gen1:1,gen1:3") ==
          "Ge1:1 In the beginning God created the heaven and the earth.\n"
          "Ge1:3 And God said, Let there be light: and there was light.\n");
}

TEST_CASE("read_bible refuses a range that prints no verse, naming it", "[data][text_source]") {
    if (!bible_installed()) return;
    CHECK_THAT(message_of<std::runtime_error>([] { read_bible("zzz1:1"); }),
               Catch::StartsWith("read_bible: `bible -f \"zzz1:1\"` printed no verse for the range \"zzz1:1\""));
}

TEST_CASE("read_bible refuses a hostile range before any shell runs", "[data][text_source]") {
    TempDir dir;
    const std::string marker = dir.file("ran");
    // Each would run `touch <marker>` if it reached /bin/sh inside bible -f "...".
    for (const std::string& range : {"psa1:1\"; touch " + marker + "; echo \"", "psa1:1 $(touch " + marker + ")",
                                     "psa1:1 `touch " + marker + "`", "psa1:1; touch " + marker}) {
        INFO(range);
        CHECK_THAT(message_of<std::invalid_argument>([&] { read_bible(range); }),
                   Catch::StartsWith("read_bible: range ") && Catch::Contains("is refused; a range holds only letters, "
                                                                             "digits, ':', '-', ',' and spaces"));
    }
    CHECK(!fs::exists(marker));
    CHECK(message_of<std::invalid_argument>([] { read_bible("psa1:1\";"); }) ==
          "read_bible: range \"psa1:1\\\";\": character \"\\\"\" (byte 34) at position 6 is refused; a range holds "
          "only letters, digits, ':', '-', ',' and spaces (it is passed to a shell)");
    CHECK_THAT(message_of<std::invalid_argument>([] { read_bible("  "); }), Catch::Contains("the range is empty"));
    // A leading '-' reached bible as an option: "-h" printed its usage, "-d<file>" read another data file.
    for (const std::string range : {"-h", " -d/etc/passwd", "-p/tmp gen1:1"}) {
        INFO(range);
        CHECK_THAT(message_of<std::invalid_argument>([&] { read_bible(range); }),
                   Catch::Contains("starts with '-', which bible would take for an option"));
    }
}

}  // namespace test_data_text_source
