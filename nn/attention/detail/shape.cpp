// nn/attention/detail/shape.cpp — the shared argument checks of attention (shape.hpp).
#include <xgrad/nn/attention/detail/shape.hpp>

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdio>

#include <xgrad/core/parallel.hpp>
#include <xgrad/nn/attention.hpp>  // CausalSelfAttention::kTiledFromT

namespace xgrad::nn::functional::detail {

AttentionSizes check_qkv(const Tensor& q, const Tensor& k, const Tensor* v, const char* op) {
    check(q.defined() && k.defined() && (!v || v->defined()), op, "q, k and v must be defined tensors");
    const ArrayShape sq = array_shape(q.data()), sk = array_shape(k.data());
    const ArrayShape sv = v ? array_shape(v->data()) : sk;
    check(sq.size() >= 2 && sq.size() == sk.size() && sq.size() == sv.size(), op,
          "q, k, v must have the same rank, at least 2 ((..., T, hd)); got q {}, k {}, v {}", shape_str(sq),
          shape_str(sk), shape_str(sv));
    const std::size_t n = sq.size();
    AttentionSizes s;
    s.lead.assign(sq.begin(), sq.end() - 2);
    s.Tq = sq[n - 2], s.hd = sq[n - 1], s.Tk = sk[n - 2], s.hv = sv[n - 1];
    check(ArrayShape(sk.begin(), sk.end() - 2) == s.lead && ArrayShape(sv.begin(), sv.end() - 2) == s.lead, op,
          "q, k, v must share their leading dims (...); got q {}, k {}, v {}", shape_str(sq), shape_str(sk),
          shape_str(sv));
    check(sk[n - 1] == s.hd, op, "q and k must have the same head width hd; got q {} and k {}", shape_str(sq),
          shape_str(sk));
    check(sv[n - 2] == s.Tk, op, "k and v must have the same number of keys Tk; got k {} and v {}",
          shape_str(sk), shape_str(sv));
    check(s.hd > 0, op, "the head width hd must be positive; got q {}", shape_str(sq));
    check(s.Tk > 0 || s.Tq == 0, op, "there must be at least one key for {} queries; got k {}", s.Tq, shape_str(sk));
    return s;
}

real attention_scale(std::optional<double> scale, std::size_t hd, const char* op) {
    const double s = scale.value_or(1.0 / std::sqrt(double(hd)));
    check(std::isfinite(s), op, "scale must be a finite number (default 1/sqrt(hd)); got {}", s);
    return static_cast<real>(s);
}

void check_weights_fit(std::size_t N, std::size_t Tq, std::size_t Tk, bool backward, const char* op) {
    const std::size_t scratch = backward ? std::min(N, std::size_t(get_pool_threads())) : 0;
    const double bytes = double(N + scratch) * double(Tq) * double(Tk) * sizeof(real);  // no overflow
    const double memory = double(::sysconf(_SC_PHYS_PAGES)) * double(::sysconf(_SC_PAGESIZE));
    if (memory <= 0 || bytes <= memory) return;
    throw OutOfMemoryError(fmt::format(
        "{}: the attention weights of N = {} heads, (Tq, Tk) = ({}, {}) each{}, need {:.0f} bytes ({:.1f} GiB), "
        "more than this machine's physical memory ({:.1f} GiB); tiled_causal_attention (nn/attention/tiled.hpp) "
        "computes the same without them, as CausalSelfAttention does from T = {}", op, N, Tq, Tk,
        scratch ? fmt::format(", and the backward's scratch of {} more (one per thread)", scratch) : "", bytes,
        bytes / double(1 << 30), memory / double(1 << 30), CausalSelfAttention::kTiledFromT));
}

namespace {

// Whether mask (..., T, T), T = Tq = Tk ≥ 2 and not broadcast over its last two dims, holds 0 on
// the diagonal of every (T, T) matrix: query i may not see its own key i, in every head.
bool hides_every_own_position(const Tensor& mask, const ArrayShape& target) {
    const ArrayShape sm = array_shape(mask.data());
    const std::size_t n = sm.size(), T = target.back();
    if (n < 2 || T < 2 || sm[n - 1] != T || sm[n - 2] != T || target[target.size() - 2] != T) return false;
    const real* p = mask.data().data();
    for (std::size_t base = 0; base < mask.data().size(); base += T * T)
        for (std::size_t i = 0; i < T; ++i)
            if (p[base + i * T + i] != 0) return false;
    return true;
}

std::atomic<bool> g_warned_other_convention{false};

}  // namespace

void check_mask(const Tensor& mask, const ArrayShape& target, const char* op) {
    const ArrayShape sm = array_shape(mask.data());
    bool fits = sm.size() <= target.size();
    for (std::size_t i = 0; fits && i < sm.size(); ++i) {
        const std::size_t m = sm[sm.size() - 1 - i], t = target[target.size() - 1 - i];
        fits = m == t || m == 1;
    }
    check(fits, op, "attn_mask of shape {} does not broadcast to (..., Tq, Tk) = {}", shape_str(sm),
          shape_str(target));
    const real* p = mask.data().data();
    for (std::size_t i = 0; i < mask.data().size(); ++i) {
        check(p[i] == 0 || p[i] == 1, op,
              "attn_mask must hold 0 (may not attend) or 1 (may attend); found {} at flat index {}. "
              "An additive mask (0 / -inf) means the opposite: convert it with eq(mask, 0)",
              double(p[i]), i);
    }
    // A keep mask hides a query's own position only to hide the query (padding); one hiding every
    // query's own is almost always a future mask in masked_fill's form. Warned once, as PyTorch's
    // TORCH_WARN_ONCE.
    if (hides_every_own_position(mask, target) && !g_warned_other_convention.exchange(true))
        fmt::print(stderr, "xgrad: warning: {}: attn_mask hides every query's own position (its diagonal is all 0): "
                           "a future mask in masked_fill's form (1 = hide)? attn_mask keeps where it is 1; for causal "
                           "attention pass causal_mask(Tq, Tk) or is_causal = true, or flip a mask with eq(mask, 0). "
                           "(Warned once per process.)\n", op);
}

}  // namespace xgrad::nn::functional::detail
