// tests/test_helpers.hpp — comparison helpers shared by the test files.
//
//   require_values(t, {{1, 2}, {3, 4}})   t has exactly that shape, and each value agrees
//                                         within tol (absolute or relative, whichever is larger)
//   REQUIRE_GRADCHECK(f, x, y, ...)       gradcheck(f, {x, y, ...}) checked something and passed;
//                                         on failure Catch prints the first mismatch
//   message_of<E>(fn)                     fn throws exactly E; returns its message
//   TempDir dir; dir.file("a")            a fresh directory, removed with everything in it
//   read_bytes / write_bytes              a whole file as a string of bytes, and back
//   kInf, kNaN, bits_equal(a, b)          ±inf and NaN of `real`; two tensors equal bit for bit
//   weighted_sum(y, G), counting(shape)   a loss whose dL/dy is G; values 1, 2, 3, ... of a shape
//   snapshot(m) / require_unchanged(m, s) every parameter of a module, and "none of them changed"
//   TinyNet                               Embedding (5, 3) → Linear (3 → 2), 23 parameters
#pragma once

#include <catch2/catch.hpp>

#include <unistd.h>

#include <algorithm>
#include <cstddef>
#include <cstring>
#include <limits>
#include <memory>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iterator>
#include <string>
#include <system_error>
#include <vector>

#include "core/gradcheck.hpp"
#include "core/ops.hpp"
#include "nn/embedding.hpp"
#include "nn/linear.hpp"
#include "nn/module.hpp"

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

// ---- shared by the nn test files ---------------------------------------------------------------
constexpr real kInf = std::numeric_limits<real>::infinity();
constexpr real kNaN = std::numeric_limits<real>::quiet_NaN();

inline bool bits_equal(const Tensor& a, const Tensor& b) {
    return a.shape() == b.shape() && std::memcmp(a.data().data(), b.data().data(), a.numel() * sizeof(real)) == 0;
}

// Σ y ⊙ G: a scalar loss whose gradient with respect to y is exactly G.
inline Tensor weighted_sum(const Tensor& y, const Tensor& G) { return sum(mul(y, G)); }

// A (..., d) tensor with distinct values 1, 2, 3, ...: an upstream gradient whose rows are
// easy to add up by hand.
inline Tensor counting(const Shape& shape) {
    Array a(shape);
    for (std::size_t i = 0; i < a.size(); ++i) a.data()[i] = static_cast<real>(i + 1);
    return from_array(std::move(a));
}

// ---- model snapshots: "the model is unchanged" compares every bit of every parameter ---------
using Snapshot = std::vector<std::pair<std::string, Array>>;

inline Snapshot snapshot(const nn::Module& m) {
    Snapshot s;
    for (const auto& [name, t] : m.named_parameters()) s.emplace_back(name, t.data());
    return s;
}

inline void require_unchanged(const nn::Module& m, const Snapshot& before) {
    const NamedTensors now = m.named_parameters();
    REQUIRE(now.size() == before.size());
    for (std::size_t i = 0; i < now.size(); ++i) {
        INFO("parameter " << now[i].first);
        REQUIRE(now[i].first == before[i].first);
        REQUIRE(now[i].second.shape() == Shape(before[i].second.shape().begin(), before[i].second.shape().end()));
        REQUIRE(std::memcmp(now[i].second.data().data(), before[i].second.data(),
                            before[i].second.size() * sizeof(real)) == 0);
    }
}

// ---- small models ------------------------------------------------------------------------------
// emb.weight (5, 3), fc.weight (2, 3), fc.bias (2): 15 + 6 + 2 = 23 parameters.
struct TinyNet : nn::Module {
    std::shared_ptr<nn::Embedding> emb;
    std::shared_ptr<nn::Linear> fc;
    TinyNet() {
        emb = register_module("emb", std::make_shared<nn::Embedding>(5, 3));
        fc = register_module("fc", std::make_shared<nn::Linear>(3, 2));
    }
    Tensor forward(const IndexTensor& ids) const { return fc->forward(emb->forward(ids)); }
};

}  // namespace xgrad::testing

// Variadic, so that commas inside lambdas ([d, keep], {a, b}) are harmless.
#define REQUIRE_GRADCHECK(...)                                                \
    do {                                                                      \
        const ::xgrad::GradcheckResult r_ = ::xgrad::testing::run_gradcheck(__VA_ARGS__); \
        INFO(r_.message);                                                     \
        REQUIRE(r_.checked > 0);                                              \
        REQUIRE(r_.ok);                                                       \
    } while (0)
