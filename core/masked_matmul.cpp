// core/masked_matmul.cpp — masked_matmul and sampled_matmul, then the helpers under them
// (formulas: core/masked_matmul.hpp).
// Legend: a (..., M, K), b (..., K, N), y (..., M, N); g = dL/dy; N_b = Π of the leading dims.
// keep is broadcast once to its full shape and read as one 0/1 byte per pair.
#include <algorithm>
#include <cstdint>
#include <vector>

#include <xtensor/xbroadcast.hpp>

#include <xgrad/core/masked_matmul.hpp>
#include <xgrad/core/profiler.hpp>

namespace xgrad {

namespace {

struct Sizes {
    ArrayShape lead;
    std::size_t nb = 1, M = 0, K = 0, N = 0;
};

// keep as one 0/1 byte per pair: a single (rows, cols) pattern serves every matrix when keep has
// no leading dim above 1 (as the causal mask), else one pattern per matrix.
struct KeepBytes {
    std::vector<std::uint8_t> bytes;
    std::size_t stride = 0;  // bytes from one matrix's pattern to the next: 0 (shared) or rows·cols
    const std::uint8_t* matrix(std::size_t n) const { return bytes.data() + n * stride; }
};

Sizes check_operands(const Tensor& a, const Tensor& b, const Tensor& keep, bool keep_on_output, const char* op);
KeepBytes keep_bytes(const Tensor& keep, const Sizes& s, std::size_t rows, std::size_t cols);
// C (N_b, M, N) = Σ_{k : keep[m, k]} A[m, k] · B[k, n] per matrix, A (N_b, M, K) zero where hidden,
// B (N_b, K, N); or, with keep_transposed, visible(m, k) = keep[k, m] and A read as op(A) per trans_a.
void batched_visible(const Sizes& s, std::size_t M, std::size_t N, std::size_t K, bool trans_a, bool trans_b,
                     const real* A, const real* B, real* C, const KeepBytes& keep, bool keep_transposed);
// a (N_b, rows, cols) with its hidden entries set to 0, so a hidden NaN or inf cannot reach a sum.
void hide(Array& a, const KeepBytes& keep);
Array zero_hidden(const Array& a, const KeepBytes& keep);
ArrayShape result_shape(const Sizes& s, std::size_t rows, std::size_t cols);

}  // namespace

// ---- masked_matmul ----------------------------------------------------------------------------
// forward : y[m, n] = Σ_{k : keep[m, k]} a[m, k] · b[k, n]
// backward: da[m, k] = keep[m, k] ? Σ_n g[m, n] · b[k, n] : 0      (g · bᵀ, sampled on keep)
//           db[k, n] = Σ_{m : keep[m, k]} a[m, k] · g[m, n]        (aᵀ · g, masked on keepᵀ)
Tensor masked_matmul(const Tensor& a, const Tensor& b, const Tensor& keep) {
    const profiler::OpScope scope("masked_matmul", a, b, keep);
    const Sizes s = check_operands(a, b, keep, /*keep_on_output=*/false, "masked_matmul");
    auto kb = std::make_shared<KeepBytes>(keep_bytes(keep, s, s.M, s.K));
    Array a0 = zero_hidden(a.data(), *kb);  // (N_b, M, K)
    Array y(result_shape(s, s.M, s.N));
    batched_visible(s, s.M, s.N, s.K, false, false, a0.data(), b.data().data(), y.data(), *kb, false);
    return make_result(std::move(y), "masked_matmul", {a, b, keep},
                       [b, s, kb, a0 = std::move(a0)](const Array& g, const Array&) {
                           Array da(a0.shape()), db(b.data().shape());
                           for (std::size_t n = 0; n < s.nb; ++n)
                               gemm(false, true, s.M, s.K, s.N, 1, g.data() + n * s.M * s.N, s.N,
                                    b.data().data() + n * s.K * s.N, s.N, 0, da.data() + n * s.M * s.K, s.K);
                           hide(da, *kb);
                           // db (K, N) = op(A) (K, M) · g (M, N) with op(A) = a0ᵀ, visible(k, m) = keep[m, k]
                           batched_visible(s, s.K, s.N, s.M, true, false, a0.data(), g.data(), db.data(), *kb,
                                           true);
                           return make_grads(std::move(da), std::move(db), std::nullopt);
                       });
}

// ---- sampled_matmul ---------------------------------------------------------------------------
// forward : y[m, n] = keep[m, n] ? Σ_k a[m, k] · b[k, n] : 0
// backward: with g0 = g where kept, else 0:
//           da[m, k] = Σ_{n : keep[m, n]} g0[m, n] · b[k, n]        (g0 · bᵀ, masked on keep)
//           db[k, n] = Σ_{m : keep[m, n]} a[m, k] · g0[m, n]        (dbᵀ = g0ᵀ · a, masked on keepᵀ)
Tensor sampled_matmul(const Tensor& a, const Tensor& b, const Tensor& keep) {
    const profiler::OpScope scope("sampled_matmul", a, b, keep);
    const Sizes s = check_operands(a, b, keep, /*keep_on_output=*/true, "sampled_matmul");
    auto kb = std::make_shared<KeepBytes>(keep_bytes(keep, s, s.M, s.N));
    Array y(result_shape(s, s.M, s.N));
    // Every kept entry is one whole dot product, so a plain gemm is exact; hidden ones become 0.
    for (std::size_t n = 0; n < s.nb; ++n)
        gemm(false, false, s.M, s.N, s.K, 1, a.data().data() + n * s.M * s.K, s.K, b.data().data() + n * s.K * s.N,
             s.N, 0, y.data() + n * s.M * s.N, s.N);
    hide(y, *kb);
    return make_result(std::move(y), "sampled_matmul", {a, b, keep}, [a, b, s, kb](const Array& g, const Array&) {
        const Array g0 = zero_hidden(g, *kb);  // (N_b, M, N)
        Array da(a.data().shape()), db(b.data().shape());
        // da (M, K) = g0 (M, N) · op(B) (N, K) with op(B) = bᵀ, visible(m, n) = keep[m, n]
        batched_visible(s, s.M, s.K, s.N, false, true, g0.data(), b.data().data(), da.data(), *kb, false);
        // dbᵀ (N, K) = g0ᵀ (N, M) · a (M, K), visible(n, m) = keep[m, n]; then transposed into db
        Array dbt(ArrayShape{s.nb, s.N, s.K});
        batched_visible(s, s.N, s.K, s.M, true, false, g0.data(), a.data().data(), dbt.data(), *kb, true);
        for (std::size_t n = 0; n < s.nb; ++n)
            for (std::size_t k = 0; k < s.K; ++k)
                for (std::size_t j = 0; j < s.N; ++j)
                    db.data()[(n * s.K + k) * s.N + j] = dbt.data()[(n * s.N + j) * s.K + k];
        return make_grads(std::move(da), std::move(db), std::nullopt);
    });
}

// ---- the helpers -------------------------------------------------------------------------------
namespace {

Sizes check_operands(const Tensor& a, const Tensor& b, const Tensor& keep, bool keep_on_output, const char* op) {
    check(a.defined() && b.defined() && keep.defined(), op, "a, b and keep must be defined tensors");
    const ArrayShape sa = array_shape(a.data()), sb = array_shape(b.data()), sk = array_shape(keep.data());
    check(sa.size() >= 2 && sa.size() == sb.size(), op,
          "a (..., M, K) and b (..., K, N) need the same rank, at least 2; got {} and {}", shape_str(sa),
          shape_str(sb));
    Sizes s;
    s.lead.assign(sa.begin(), sa.end() - 2);
    s.M = sa[sa.size() - 2], s.K = sa.back(), s.N = sb.back();
    check(ArrayShape(sb.begin(), sb.end() - 2) == s.lead && sb[sb.size() - 2] == s.K, op,
          "a {} and b {} must share their leading dims and the inner size K", shape_str(sa), shape_str(sb));
    for (std::size_t d : s.lead) s.nb *= d;
    ArrayShape target = s.lead;
    target.push_back(s.M);
    target.push_back(keep_on_output ? s.N : s.K);
    bool fits = sk.size() <= target.size();
    for (std::size_t i = 0; fits && i < sk.size(); ++i)
        fits = sk[sk.size() - 1 - i] == 1 || sk[sk.size() - 1 - i] == target[target.size() - 1 - i];
    check(fits, op, "keep of shape {} does not broadcast to {}", shape_str(sk), shape_str(target));
    return s;
}

KeepBytes keep_bytes(const Tensor& keep, const Sizes& s, std::size_t rows, std::size_t cols) {
    const ArrayShape sk = array_shape(keep.data());
    bool shared = true;
    for (std::size_t i = 0; i + 2 < sk.size(); ++i) shared = shared && sk[i] == 1;
    Array k = keep.data();
    ArrayShape full{rows, cols};
    if (shared) {
        k.reshape(ArrayShape(sk.end() - std::min<std::size_t>(2, sk.size()), sk.end()));
    } else {
        full.insert(full.begin(), s.lead.begin(), s.lead.end());
    }
    const Array kb = xt::broadcast(k, full);
    KeepBytes out;
    out.bytes.resize(kb.size());
    for (std::size_t i = 0; i < kb.size(); ++i) out.bytes[i] = kb.data()[i] != 0;
    out.stride = shared ? 0 : rows * cols;
    return out;
}

void batched_visible(const Sizes& s, std::size_t M, std::size_t N, std::size_t K, bool trans_a, bool trans_b,
                     const real* A, const real* B, real* C, const KeepBytes& keep, bool keep_transposed) {
    for (std::size_t n = 0; n < s.nb; ++n) {
        const std::uint8_t* kn = keep.matrix(n);
        auto visible = [&](std::size_t m, std::size_t k) { return keep_transposed ? kn[k * M + m] : kn[m * K + k]; };
        gemm_visible(trans_a, trans_b, M, N, K, 1, A + n * M * K, trans_a ? M : K, B + n * K * N, trans_b ? K : N,
                     C + n * M * N, N, visible);
    }
}

void hide(Array& a, const KeepBytes& keep) {
    const std::size_t per = keep.stride == 0 ? keep.bytes.size() : keep.stride;  // rows·cols
    for (std::size_t n = 0; per > 0 && n < a.size() / per; ++n) {
        const std::uint8_t* kn = keep.matrix(n);
        real* an = a.data() + n * per;
        for (std::size_t i = 0; i < per; ++i) an[i] = kn[i] ? an[i] : real(0);
    }
}
Array zero_hidden(const Array& a, const KeepBytes& keep) {
    Array z = a;
    hide(z, keep);
    return z;
}

ArrayShape result_shape(const Sizes& s, std::size_t rows, std::size_t cols) {
    ArrayShape out = s.lead;
    out.push_back(rows);
    out.push_back(cols);
    return out;
}

}  // namespace

}  // namespace xgrad
