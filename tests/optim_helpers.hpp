// tests/optim_helpers.hpp — what the optim/ tests share: deterministic gradients and
// parameters, hand-made row-sparse gradients, and the update rules recomputed in double from
// the PyTorch docs (RefSGD, RefAdam), against which every optimizer step is checked.
//
// Legend: V rows of an "embedding" table, d its width, k rows in a row-sparse gradient,
//         t the step count (1, 2, ...).
#pragma once

#include <catch2/catch.hpp>

#include <cmath>
#include <functional>
#include <limits>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include <xtensor/xbuilder.hpp>

#include "core/autograd.hpp"
#include "core/ops.hpp"
#include "optim/optim.hpp"

static_assert(sizeof(xgrad::real) == 4, "the byte counts of the optim tests are for the float32 build");

namespace xgrad::testing {

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
