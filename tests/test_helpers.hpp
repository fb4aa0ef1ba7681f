// tests/test_helpers.hpp — comparison helpers shared by the test files.
//
//   require_values(t, {{1, 2}, {3, 4}})   t has exactly that shape, and each value agrees
//                                         within tol (absolute or relative, whichever is larger)
//   REQUIRE_GRADCHECK(f, x, y, ...)       gradcheck(f, {x, y, ...}) checked something and passed;
//                                         on failure Catch prints the first mismatch
//   message_of<E>(fn)                     fn throws exactly E; returns its message
//   TempDir dir; dir.file("a")            a fresh directory, removed with everything in it
//   read_bytes / write_bytes              a whole file as a string of bytes, and back
#pragma once

#include <catch2/catch.hpp>

#include <unistd.h>

#include <algorithm>
#include <cstddef>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iterator>
#include <string>
#include <system_error>
#include <vector>

#include "core/gradcheck.hpp"
#include "core/ops.hpp"

namespace xgrad::testing {

inline void require_values(const Tensor& t, const Tensor& expected, double tol = 1e-5) {
    REQUIRE(t.defined());
    REQUIRE(t.shape() == expected.shape());
    for (std::size_t i = 0; i < t.numel(); ++i) {
        INFO("flat element " << i << " of shape " << shape_str(t.shape()));
        REQUIRE(t.data().data()[i] == Approx(expected.data().data()[i]).epsilon(tol).margin(tol));
    }
}

using Fn = std::function<Tensor(const std::vector<Tensor>&)>;

// A leaf of `shape` with N(0, 1) values that requires grad.
inline Tensor leaf(const Shape& shape) { return randn(shape, true); }

template <class... Ts>
GradcheckResult run_gradcheck(const Fn& f, const Ts&... inputs) {
    return gradcheck(f, std::vector<Tensor>{inputs...});
}

// Runs fn, requires that it throws exactly E, and returns the message.
template <class E, class Fn>
std::string message_of(Fn&& fn) {
    try {
        fn();
    } catch (const E& e) {
        return e.what();
    }
    FAIL("expected an exception, none was thrown");
    return {};
}

// A fresh, empty directory under the system's temp directory, unique per process and per
// TempDir; removed with its contents when the TempDir goes out of scope.
struct TempDir {
    std::filesystem::path path;
    TempDir() {
        static int counter = 0;
        path = std::filesystem::temp_directory_path() /
               ("xgrad_test_" + std::to_string(::getpid()) + "_" + std::to_string(counter++));
        std::filesystem::remove_all(path);
        std::filesystem::create_directories(path);
    }
    ~TempDir() {
        std::error_code ec;
        std::filesystem::remove_all(path, ec);
    }
    TempDir(const TempDir&) = delete;
    TempDir& operator=(const TempDir&) = delete;
    std::string file(const std::string& name) const { return (path / name).string(); }
    // The names of the files in the directory, sorted.
    std::vector<std::string> listing() const {
        std::vector<std::string> names;
        for (const auto& e : std::filesystem::directory_iterator(path)) names.push_back(e.path().filename().string());
        std::sort(names.begin(), names.end());
        return names;
    }
};

inline std::string read_bytes(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    REQUIRE(in);
    return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

inline void write_bytes(const std::string& path, const std::string& bytes) {
    std::ofstream out(path, std::ios::binary | std::ios::trunc);
    out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
    REQUIRE(out.good());
}

}  // namespace xgrad::testing

// Variadic, so that commas inside lambdas ([d, keep], {a, b}) are harmless.
#define REQUIRE_GRADCHECK(...)                                                \
    do {                                                                      \
        const ::xgrad::GradcheckResult r_ = ::xgrad::testing::run_gradcheck(__VA_ARGS__); \
        INFO(r_.message);                                                     \
        REQUIRE(r_.checked > 0);                                              \
        REQUIRE(r_.ok);                                                       \
    } while (0)
