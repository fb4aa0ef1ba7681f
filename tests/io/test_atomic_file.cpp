// tests/io/test_atomic_file.cpp — io/: the one file writer (atomic_file.hpp) and the checksums
// (checksum.hpp). save_safetensors' tests (tests/nn/test_serialize.cpp) drive the same writer
// through concurrent, crashed and hostile saves; here are its rules on their own.
#include <catch2/catch.hpp>

#include <signal.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>

#include <xgrad/io/atomic_file.hpp>
#include <xgrad/io/checksum.hpp>

#include "test_helpers.hpp"

using namespace xgrad;
using namespace xgrad::testing;  // TempDir: not left to a file before it in a unity batch
using Catch::Matchers::Contains;

namespace {
std::string slurp(const std::filesystem::path& p) {
    std::ifstream in(p, std::ios::binary);
    return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}
std::size_t entries(const std::filesystem::path& dir) {
    return std::size_t(std::distance(std::filesystem::directory_iterator(dir), std::filesystem::directory_iterator()));
}
}  // namespace

TEST_CASE("crc32 and fnv1a64 give the reference values of their test suites", "[io]") {
    CHECK(io::crc32("123456789") == 0xcbf43926u);  // the CRC-32 check value (zlib.crc32(b"123456789"))
    CHECK(io::crc32("") == 0u);
    CHECK(io::crc32(io::crc32(0, "1234", 4), "56789", 5) == 0xcbf43926u);  // continued in pieces
    CHECK(io::fnv1a64("") == 0xcbf29ce484222325ull);  // the offset basis
    CHECK(io::fnv1a64("a") == 0xaf63dc4c8601ec8cull);
    CHECK(io::fnv1a64("foobar") == 0x85944171f73967e8ull);
}

TEST_CASE("AtomicFile: the target changes only at commit, streamed in pieces", "[io]") {
    TempDir dir;
    const std::string path = dir.file("loss.csv");
    io::write_file_atomically(path, "old\n");
    {
        io::AtomicFile f(path);
        f.write("step,");
        f.write("loss\n");
        CHECK(slurp(path) == "old\n");  // a reader still sees the old file
        CHECK(entries(dir.path) == 2);  // and the temporary beside it
        f.commit();
        CHECK(f.bytes_written() == 10);
    }
    CHECK(slurp(path) == "step,loss\n");
    CHECK(entries(dir.path) == 1);
    {
        io::AtomicFile f(path);
        f.write("half a fi");
    }  // never committed: discarded
    CHECK(slurp(path) == "step,loss\n");
    CHECK(entries(dir.path) == 1);
}

TEST_CASE("AtomicFile: a replaced file keeps its mode, and a symlink is written through and stays", "[io]") {
    TempDir dir;
    const std::string real = dir.file("real.txt"), link = dir.file("link.txt");
    io::write_file_atomically(real, "a");
    REQUIRE(::chmod(real.c_str(), 0640) == 0);
    std::filesystem::create_symlink("real.txt", link);
    io::write_file_atomically(link, "b");
    CHECK(std::filesystem::is_symlink(link));
    CHECK(slurp(real) == "b");
    struct stat st {};
    REQUIRE(::stat(real.c_str(), &st) == 0);
    CHECK((st.st_mode & 0777) == 0640);
    CHECK(io::resolve_target(link) == dir.file("real.txt"));
}

TEST_CASE("AtomicFile: errors name the path and what is wrong with it", "[io]") {
    TempDir dir;
    const std::string missing = dir.file("no_such_dir") + "/x.bin";
    CHECK_THROWS_WITH(io::write_file_atomically(missing, "x", "save_thing"),
                      Contains("save_thing: cannot write '" + missing + "'") && Contains("does not exist"));
    std::filesystem::create_directory(dir.file("sub"));
    CHECK_THROWS_WITH(io::write_file_atomically(dir.file("sub"), "x"), Contains("is a directory"));
    const std::string loop = dir.file("loop");
    std::filesystem::create_symlink("loop", loop);
    CHECK_THROWS_WITH(io::write_file_atomically(loop, "x"), Contains("too many levels of symbolic links"));
    CHECK(io::non_regular_kind(dir.file("sub")) == "a directory");
    CHECK(io::non_regular_kind(dir.file("absent")).empty());
}

TEST_CASE("AtomicFile: an empty path is refused before a temporary is made", "[io]") {
    // It created "./.tmp-<pid>-<n>" in the working directory (and swept "./.tmp-*" of dead
    // processes as its stale temporaries), then failed in rename(2).
    TempDir dir;
    const auto before = std::filesystem::current_path();
    std::filesystem::current_path(dir.path);
    CHECK(message_of<std::runtime_error>([] { io::write_file_atomically("", "x", "save_thing"); }) ==
          "save_thing: cannot write '': an empty path");
    CHECK(std::filesystem::is_empty(dir.path));
    std::filesystem::current_path(before);
}

TEST_CASE("AtomicFile: a temporary left by a dead process is removed by the next save", "[io]") {
    TempDir dir;
    const std::string path = dir.file("model.safetensors");
    const std::string stale = path + ".tmp-2147483646-0";  // a pid no process has here
    io::write_file_atomically(stale, "left behind");
    io::write_file_atomically(path, "new");
    CHECK_FALSE(std::filesystem::exists(stale));
    CHECK(slurp(path) == "new");
}

// Under a file-size limit (ulimit -f) a write past it raises SIGXFSZ, whose default action kills
// the process; AtomicFile holds the signal off around its write(2), which then fails with EFBIG.
// In a forked child with the default disposition: the message names the path and the limit, the
// temporary is gone, the old file is intact, and the child lives on with its disposition and signal
// mask as they were.
TEST_CASE("AtomicFile: a write past the file-size limit fails with a message and no SIGXFSZ", "[io][regression]") {
    TempDir dir;
    const std::string path = dir.file("model.safetensors");
    io::write_file_atomically(path, "old model");
    int pipe_fds[2];
    REQUIRE(::pipe(pipe_fds) == 0);
    const pid_t child = ::fork();
    REQUIRE(child >= 0);
    if (child == 0) {  // nothing here may throw into Catch2: the outcome goes to the pipe
        ::close(pipe_fds[0]);
        ::signal(SIGXFSZ, SIG_DFL);
        struct rlimit limit {};
        ::getrlimit(RLIMIT_FSIZE, &limit);
        limit.rlim_cur = 4096;  // bytes
        ::setrlimit(RLIMIT_FSIZE, &limit);
        std::string report;
        try {
            io::write_file_atomically(path, std::string(10000, 'x'), "save_model");
            report = "no exception";
        } catch (const std::exception& e) {
            report = e.what();
        }
        struct sigaction now {};
        ::sigaction(SIGXFSZ, nullptr, &now);
        sigset_t mask;
        ::sigprocmask(SIG_BLOCK, nullptr, &mask);
        report += now.sa_handler == SIG_DFL ? "|default" : "|changed";
        report += sigismember(&mask, SIGXFSZ) ? "|blocked" : "|unblocked";
        (void)!::write(pipe_fds[1], report.data(), report.size());
        ::_exit(0);
    }
    ::close(pipe_fds[1]);
    std::string report;
    char buf[512];
    for (ssize_t n; (n = ::read(pipe_fds[0], buf, sizeof buf)) > 0;) report.append(buf, std::size_t(n));
    ::close(pipe_fds[0]);
    int status = 0;
    REQUIRE(::waitpid(child, &status, 0) == child);
    INFO("child report: " << report);
    REQUIRE(WIFEXITED(status));  // not killed by SIGXFSZ
    CHECK(WEXITSTATUS(status) == 0);
    CHECK(report == "save_model: writing '" + path + "' failed (the file size limit (ulimit -f / RLIMIT_FSIZE) of "
                    "4096 bytes was reached); the file is left as it was|default|unblocked");
    CHECK(dir.listing() == std::vector<std::string>{"model.safetensors"});  // no temporary left
    CHECK(slurp(path) == "old model");
}
