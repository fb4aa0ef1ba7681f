// tests/test_helpers.hpp — every helper that two or more test files use (one definition each).
//
//   require_values(t, {{1, 2}, {3, 4}})   t has exactly that shape, and each value agrees
//                                         within tol (absolute or relative, whichever is larger)
//   REQUIRE_GRADCHECK(f, x, y, ...)       gradcheck(f, {x, y, ...}) checked something and passed;
//                                         on failure Catch prints the first mismatch
//   message_of<E>(fn)                     fn throws exactly E; returns its message
//   TempDir dir; dir.file("a")            a fresh directory, removed with everything in it
//   read_bytes / write_bytes              a whole file as a string of bytes, and back
//   kInf, kNaN, bits_equal(a, b)          ±inf and NaN of `real`; two tensors (or arrays) equal bit for bit
//   all_finite(t), from_values(v, shape)  no NaN or inf in t; a tensor from values written in double
//   torch_ref(name)                       a PyTorch value of tests/reference/core_ops_reference.hpp
//   positive_leaf(shape), ce(reduction)   a leaf with values in [0.5, 1.5); cross_entropy's options
//   weighted_sum(y, G), counting(shape)   a loss whose dL/dy is G; values 1, 2, 3, ... of a shape
//   snapshot(m) / require_unchanged(m, s) every state_dict() entry of a module, and "none changed"
//   names_of(named), ThreadsGuard         the names in order; set_pool_threads(1) at scope exit
//   graph_has(y, op)                      an op of that name was recorded in the graph that made y
//   TinyNet                               Embedding (5, 3) → Linear (3 → 2), 23 parameters
//   SparseTableNet                        Embedding (40, 4, sparse) → Linear (4 → 5), 185 parameters
//   grad_at, make_param, RefSGD, RefAdam, TinyModel ...   the optim/ tests' inputs and reference rules
#pragma once

#include <catch2/catch.hpp>

#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iterator>
#include <limits>
#include <memory>
#include <sstream>
#include <string>
#include <system_error>
#include <vector>

#include <xtensor/xbuilder.hpp>

#include <xgrad/core/autograd.hpp>
#include <xgrad/core/gradcheck.hpp>
#include <xgrad/core/parallel.hpp>
#include <xgrad/core/ops.hpp>
#include <xgrad/nn/embedding.hpp>
#include <xgrad/nn/linear.hpp>
#include <xgrad/nn/loss.hpp>
#include <xgrad/nn/module.hpp>
#include <xgrad/optim/optim.hpp>
#include "reference/core_ops_reference.hpp"

namespace xgrad::testing {

inline void require_values(const Tensor& t, const Tensor& expected, double tol = 1e-5) {
    REQUIRE(t.defined());
    REQUIRE(t.shape() == expected.shape());
    for (std::int64_t i = 0; i < t.numel(); ++i) {
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

// ---- values and comparisons ----------------------------------------------------------------------
constexpr real kInf = std::numeric_limits<real>::infinity();
constexpr real kNaN = std::numeric_limits<real>::quiet_NaN();

inline bool bits_equal(const Tensor& a, const Tensor& b) {
    return a.shape() == b.shape() &&
           (a.numel() == 0 || std::memcmp(a.data().data(), b.data().data(), a.numel() * sizeof(real)) == 0);
}
inline bool bits_equal(const Array& a, const Array& b) {
    return a.shape() == b.shape() && (a.size() == 0 || std::memcmp(a.data(), b.data(), a.size() * sizeof(real)) == 0);
}

// Every element finite (no NaN, no ±inf).
inline bool all_finite(const Tensor& t) {
    for (real v : t.data())
        if (!std::isfinite(v)) return false;
    return true;
}

// A tensor of `shape` from values written in double (reference numbers pasted from a script).
inline Tensor from_values(const std::vector<double>& v, const Shape& shape, bool requires_grad = false) {
    Array a(to_array_shape(shape, "from_values"));
    REQUIRE(a.size() == v.size());
    for (std::size_t i = 0; i < v.size(); ++i) a.data()[i] = real(v[i]);
    return from_array(std::move(a), requires_grad);
}

// The reference tensor `name` of tests/reference/core_ops_reference.hpp (PyTorch, float64), in `real`.
inline Tensor torch_ref(const std::string& name, bool requires_grad = false) {
    for (const auto& e : core_ops_reference::entries()) {
        if (name != e.name) continue;
        Array a(e.shape);
        for (std::size_t i = 0; i < e.values.size(); ++i) a.data()[i] = static_cast<real>(e.values[i]);
        return from_array(std::move(a), requires_grad);
    }
    FAIL("no reference tensor named " << name);
    return Tensor();
}

// A leaf with U[lo, lo + 1) values, for ops that need positive inputs (log, div, pow, sqrt, rsqrt:
// their derivatives blow up at 0).
inline Tensor positive_leaf(const Shape& shape, real lo = 0.5) { return (rand(shape) + lo).detach().requires_grad_(); }

// cross_entropy's options in one call.
inline nn::functional::CrossEntropyOptions ce(nn::Reduction r, std::int64_t ignore_index = -100, double smoothing = 0) {
    return nn::functional::CrossEntropyOptions().reduction(r).ignore_index(ignore_index).label_smoothing(
        smoothing);
}

// Whether an op named `op` was recorded anywhere in the graph that made y.
inline bool graph_has(const Tensor& y, const std::string& op) {
    std::vector<std::shared_ptr<Node>> todo{y.grad_fn()};
    while (!todo.empty()) {
        const std::shared_ptr<Node> n = todo.back();
        todo.pop_back();
        if (!n) continue;
        if (n->name == op) return true;
        for (const NodeInput& in : n->inputs) todo.push_back(in.tensor->grad_fn);
    }
    return false;
}

// Restores one pool thread when a test ends, however it ends.
struct ThreadsGuard {
    ~ThreadsGuard() { set_pool_threads(1); }
};

// Σ y ⊙ G: a scalar loss whose gradient with respect to y is exactly G.
inline Tensor weighted_sum(const Tensor& y, const Tensor& G) { return sum(mul(y, G)); }

// A (..., d) tensor with distinct values 1, 2, 3, ...: an upstream gradient whose rows are
// easy to add up by hand.
inline Tensor counting(const Shape& shape) {
    Array a(to_array_shape(shape, "counting"));
    for (std::size_t i = 0; i < a.size(); ++i) a.data()[i] = static_cast<real>(i + 1);
    return from_array(std::move(a));
}

// ---- model snapshots: "the model is unchanged" compares every bit of every state_dict() entry
// (parameters and buffers) ---------------------------------------------------------------------------
using Snapshot = std::vector<std::pair<std::string, Array>>;

inline Snapshot snapshot(const nn::Module& m) {
    Snapshot s;
    for (const auto& [name, t] : m.state_dict()) s.emplace_back(name, t.data());
    return s;
}

inline void require_unchanged(const nn::Module& m, const Snapshot& before) {
    const NamedTensors now = m.state_dict();
    REQUIRE(now.size() == before.size());
    for (std::size_t i = 0; i < now.size(); ++i) {
        INFO("entry " << now[i].first);
        REQUIRE(now[i].first == before[i].first);
        REQUIRE(now[i].second.shape() == Shape(before[i].second.shape().begin(), before[i].second.shape().end()));
        REQUIRE(std::memcmp(now[i].second.data().data(), before[i].second.data(),
                            before[i].second.size() * sizeof(real)) == 0);
    }
}

// The names of named tensors, in order.
inline std::vector<std::string> names_of(const NamedTensors& ts) {
    std::vector<std::string> out;
    for (const auto& [n, _] : ts) out.push_back(n);
    return out;
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

// A row-sparse table and a head: Embedding (40, 4, sparse) → Linear (4 → 5), 185 parameters.
struct SparseTableNet : nn::Module {
    std::shared_ptr<nn::Embedding> emb;
    std::shared_ptr<nn::Linear> fc;
    SparseTableNet() {
        emb = register_module("emb", std::make_shared<nn::Embedding>(40, 4, nn::EmbeddingOptions().sparse(true)));
        fc = register_module("fc", std::make_shared<nn::Linear>(4, 5));
    }
};

// ==== optim/: deterministic gradients and parameters, hand-made row-sparse gradients, and the
// update rules recomputed in double from the PyTorch docs (RefSGD, RefAdam).
// Legend: V rows of an "embedding" table, d its width, k rows in a row-sparse gradient,
//         t the step count (1, 2, ...).

// ---- inputs -----------------------------------------------------------------------------------
// A gradient value for flat element i at step t: mixed signs and magnitudes, different each step.
inline real grad_value(int t, std::size_t i) {
    return static_cast<real>(std::sin(0.9 * static_cast<double>(i) + 1.7 * t) + 0.05 * (i % 3));
}

inline Array make_array(const Shape& shape, const std::function<real(std::size_t)>& f) {
    Array a = xt::zeros<real>(shape);
    for (std::size_t i = 0; i < a.size(); ++i) a.data()[i] = f(i);
    return a;
}

inline Array grad_at(int t, const Shape& shape) {
    return make_array(shape, [t](std::size_t i) { return grad_value(t, i); });
}

// A leaf parameter with deterministic values in about [-1, 1].
inline Tensor make_param(const Shape& shape, double phase = 0.0) {
    return from_array(make_array(shape, [phase](std::size_t i) {
                          return static_cast<real>(std::cos(0.37 * static_cast<double>(i) + phase));
                      }),
                      true);
}

inline Tensor clone_param(const Tensor& p) { return from_array(p.data(), true); }  // copies

// Same shape and exactly equal values, element by element (Catch2 cannot decompose xtensor's ==).
inline bool exactly_equal(const Array& a, const Array& b) { return a == b; }

inline std::vector<double> to_double(const Array& a) { return std::vector<double>(a.begin(), a.end()); }

// The row-sparse gradient of rows `rows` (n, d) at `ids` (n,), coalesced, replacing any gradient.
inline void set_sparse_grad(Tensor& p, const std::vector<std::int64_t>& ids, const Array& rows) {
    set_leaf_grad(*p.impl(), RowSparseGrad{ids, rows, /*keep_sparse=*/true});
}

// Rows `ids` of grad_at(t, (V, d)), as the (n, d) values of a sparse gradient.
inline Array rows_of(const Array& dense, const std::vector<std::int64_t>& ids) {
    const std::size_t d = dense.shape()[1];
    Array out = xt::zeros<real>({ids.size(), d});
    for (std::size_t j = 0; j < ids.size(); ++j) {
        for (std::size_t c = 0; c < d; ++c) out(j, c) = dense(static_cast<std::size_t>(ids[j]), c);
    }
    return out;
}

inline void require_close(const Array& got, const std::vector<double>& want, double tol = 1e-5) {
    REQUIRE(got.size() == want.size());
    for (std::size_t i = 0; i < want.size(); ++i) {
        INFO("flat element " << i);
        REQUIRE(static_cast<double>(got.data()[i]) == Approx(want[i]).epsilon(tol).margin(1e-6));
    }
}

template <class F>
void require_value_error(F&& f, const std::string& fragment) {
    try {
        f();
    } catch (const ValueError& e) {
        INFO("message: " << e.what());
        REQUIRE(std::string(e.what()).find(fragment) != std::string::npos);
        return;
    }
    FAIL("expected a ValueError containing '" << fragment << "'");
}

inline const Tensor& state_tensor(const optim::OptimizerState& s, const std::string& name) {
    for (const auto& [n, t] : s.tensors) {
        if (n == name) return t;
    }
    FAIL("no state tensor " << name);
    throw;  // unreachable
}

// ---- the reference algorithms, in double, straight from the PyTorch docs ----------------------
// torch.optim.SGD: g ← g + λθ; b ← g (first step) or μb + (1 − τ)g; g ← g + μb (nesterov) or b;
// θ ← θ − γg.
struct RefSGD {
    double lr, momentum, dampening, weight_decay;
    bool nesterov;
    std::vector<double> p, buf;

    void step(const std::vector<double>& g) {
        const bool first = buf.empty();
        if (first) buf.assign(p.size(), 0.0);
        for (std::size_t i = 0; i < p.size(); ++i) {
            double d = g[i] + weight_decay * p[i];
            if (momentum != 0) {
                buf[i] = first ? d : momentum * buf[i] + (1 - dampening) * d;
                d = nesterov ? d + momentum * buf[i] : buf[i];
            }
            p[i] -= lr * d;
        }
    }
};

// torch.optim.Adam / AdamW (Kingma & Ba 2015, Algorithm 1; Loshchilov & Hutter 2019):
// θ ← θ − γλθ (AdamW) | g ← g + λθ (Adam); m ← β1m + (1 − β1)g; v ← β2v + (1 − β2)g²;
// m̂ = m/(1 − β1^t); v̂ = v/(1 − β2^t) (v_max = max(v_max, v) in place of v with amsgrad);
// θ ← θ − γ m̂/(√v̂ + ε).
struct RefAdam {
    double lr, beta1, beta2, eps, weight_decay;
    bool amsgrad, decoupled;
    std::vector<double> p, m, v, v_max;

    void step(const std::vector<double>& g, int t) {
        if (m.empty()) m = v = v_max = std::vector<double>(p.size(), 0.0);
        for (std::size_t i = 0; i < p.size(); ++i) {
            if (decoupled) p[i] -= lr * weight_decay * p[i];
            const double gi = decoupled ? g[i] : g[i] + weight_decay * p[i];
            m[i] = beta1 * m[i] + (1 - beta1) * gi;
            v[i] = beta2 * v[i] + (1 - beta2) * gi * gi;
            double v_used = v[i];
            if (amsgrad) v_used = v_max[i] = std::max(v_max[i], v[i]);
            const double m_hat = m[i] / (1 - std::pow(beta1, t));
            const double v_hat = v_used / (1 - std::pow(beta2, t));
            p[i] -= lr * m_hat / (std::sqrt(v_hat) + eps);
        }
    }
};


// ---- a small model: an "embedding" table and a Linear layer ----------------------------------
// An "embedding" table (V, d) = (50, 8) and a Linear-like layer: weight (4, 8), bias (4,).
struct TinyModel {
    Tensor emb = make_param({50, 8});
    Tensor weight = make_param({4, 8}, 1.0);
    Tensor bias = make_param({4}, 2.0);
    NamedTensors params() const { return {{"emb.weight", emb}, {"fc.weight", weight}, {"fc.bias", bias}}; }

    // emb: sparse gradient of 3 rows (IDs 2, 7, 7, 30), or dense; fc: dense.
    void set_grads(int t, bool sparse_emb) {
        const Array ge = grad_at(t, {50, 8});
        if (sparse_emb) {
            set_sparse_grad(emb, {2, 7, 7, 30}, rows_of(ge, {2, 7, 7, 30}));
        } else {
            emb.set_grad(from_array(ge));
        }
        weight.set_grad(from_array(grad_at(t, {4, 8})));
        bias.set_grad(from_array(grad_at(t, {4})));
    }
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
