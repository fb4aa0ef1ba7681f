// nn/init.cpp — the initialisers of nn/init.hpp: a fill, or draws from the process generator.
#include <xgrad/nn/init.hpp>

#include <cmath>
#include <mutex>
#include <random>

#include <xgrad/core/autograd.hpp>

namespace xgrad::nn::init {

namespace {

// w's values, for writing (bumps the version). No op records a graph while a NoGradGuard lives.
Array& values_of(Tensor& w, const char* op) {
    check_defined(w, op, "the tensor");
    return w.mutable_data();
}

// Fills w with draws of `dist` mapped by `f`, holding the generator for the whole tensor so that
// one call's draws are consecutive (reproducible under manual_seed).
template <class Dist, class F>
Tensor draw(Tensor w, const char* op, Dist dist, F f) {
    NoGradGuard no_grad;
    Array& a = values_of(w, op);
    std::lock_guard<std::mutex> lock(generator_mutex());
    for (real& v : a) v = f(dist(generator()));
    return w;
}

// (fan_in, fan_out) of w (out, in, k...) = (in·Πk, out·Πk); op names the caller in errors.
std::pair<std::int64_t, std::int64_t> fans(const Tensor& w, const char* op) {
    check_defined(w, op, "the tensor");
    const Shape s = w.shape();
    check(s.size() >= 2, op, "fan in and fan out need at least 2 dims (out, in, ...); got shape {}", shape_str(s));
    std::int64_t receptive_field = 1;  // Πk over the kernel dims of a conv weight (out, in, k...)
    for (std::size_t i = 2; i < s.size(); ++i) receptive_field *= std::int64_t(s[i]);
    return {std::int64_t(s[1]) * receptive_field, std::int64_t(s[0]) * receptive_field};
}

// The fan that mode names: "fan_in" keeps the forward's variance, "fan_out" the backward's.
std::int64_t correct_fan(const Tensor& w, const std::string& mode, const char* op) {
    check(mode == "fan_in" || mode == "fan_out", op, "mode '{}' is not supported; use 'fan_in' or 'fan_out'",
          mode);
    const auto [fan_in, fan_out] = fans(w, op);
    return mode == "fan_in" ? fan_in : fan_out;
}

// std of xavier: gain·√(2 / (fan_in + fan_out)). The fans are 0 only when w has no values.
double xavier_std(const Tensor& w, double gain, const char* op) {
    const auto [fan_in, fan_out] = fans(w, op);
    return fan_in + fan_out > 0 ? gain * std::sqrt(2.0 / double(fan_in + fan_out)) : 0.0;
}

// std of kaiming: gain / √fan, gain = calculate_gain(nonlinearity, a). Checked before the empty case.
double kaiming_std(const Tensor& w, double a, const std::string& mode, const std::string& nonlinearity,
                   const char* op) {
    const std::int64_t fan = correct_fan(w, mode, op);
    double gain = 0;
    try {
        gain = calculate_gain(nonlinearity, a);
    } catch (const ValueError& e) {
        throw ValueError(std::string(op) + ": " + e.what());  // name the function the user called
    }
    return fan > 0 ? gain / std::sqrt(double(fan)) : 0.0;
}

}  // namespace

// ---- fills and plain draws ------------------------------------------------------------------------
// ref: PyTorch docs, torch.nn.init.normal_, uniform_, constant_, zeros_, ones_

Tensor normal_(Tensor w, double mean, double std) {
    check(std >= 0, "normal_", "std must be >= 0; got {}", std);
    // z ~ N(0, 1), then mean + std·z: the same draws and values as randn(shape) * std (+ mean).
    const real m = static_cast<real>(mean), s = static_cast<real>(std);
    return draw(std::move(w), "normal_", std::normal_distribution<real>(0, 1), [m, s](real z) { return s * z + m; });
}

Tensor uniform_(Tensor w, double a, double b) {
    check(std::isfinite(a) && std::isfinite(b) && a <= b, "uniform_", "need finite a <= b; got [{}, {})", a, b);
    // u ~ U[0, 1), then a + (b - a)·u
    const real lo = static_cast<real>(a), width = static_cast<real>(b - a);
    return draw(std::move(w), "uniform_", std::uniform_real_distribution<real>(0, 1),
                [lo, width](real u) { return lo + width * u; });
}

Tensor constant_(Tensor w, double val) {
    NoGradGuard no_grad;
    values_of(w, "constant_").fill(static_cast<real>(val));
    return w;
}

Tensor zeros_(Tensor w) {
    check_defined(w, "zeros_", "the tensor");
    return constant_(std::move(w), 0.0);
}

Tensor ones_(Tensor w) {
    check_defined(w, "ones_", "the tensor");
    return constant_(std::move(w), 1.0);
}

// ---- fans and gains -------------------------------------------------------------------------------
// ref: PyTorch source, torch/nn/init.py (_calculate_fan_in_and_fan_out, calculate_gain)

std::pair<std::int64_t, std::int64_t> _calculate_fan_in_and_fan_out(const Tensor& w) {
    return fans(w, "_calculate_fan_in_and_fan_out");
}

double calculate_gain(const std::string& nonlinearity, std::optional<double> param) {
    for (const char* name : {"linear", "conv1d", "conv2d", "conv3d", "conv_transpose1d", "conv_transpose2d",
                             "conv_transpose3d", "sigmoid"})
        if (nonlinearity == name) return 1.0;
    if (nonlinearity == "tanh") return 5.0 / 3.0;
    if (nonlinearity == "relu") return std::sqrt(2.0);
    if (nonlinearity == "leaky_relu") {
        const double slope = param.value_or(0.01);
        return std::sqrt(2.0 / (1.0 + slope * slope));
    }
    if (nonlinearity == "selu") return 3.0 / 4.0;  // PyTorch's choice for self-normalising networks
    throw ValueError(fmt::format("calculate_gain: unsupported nonlinearity '{}'; use linear, conv1d/2d/3d, "
                                 "conv_transpose1d/2d/3d, sigmoid, tanh, relu, leaky_relu or selu",
                                 nonlinearity));
}

// ---- Xavier (Glorot) and Kaiming (He) -------------------------------------------------------------
// Uniform forms draw U(±√3·std), whose variance is std² (a U(±b) has variance b²/3).
// ref: Glorot & Bengio 2010, "Understanding the difficulty of training deep feedforward neural
//      networks"; He et al. 2015, "Delving Deep into Rectifiers"; PyTorch docs, torch.nn.init

Tensor xavier_uniform_(Tensor w, double gain) {
    const double bound = std::sqrt(3.0) * xavier_std(w, gain, "xavier_uniform_");
    return uniform_(std::move(w), -bound, bound);
}

Tensor xavier_normal_(Tensor w, double gain) {
    const double std = xavier_std(w, gain, "xavier_normal_");
    return normal_(std::move(w), 0.0, std);
}

Tensor kaiming_uniform_(Tensor w, double a, const std::string& mode, const std::string& nonlinearity) {
    const double bound = std::sqrt(3.0) * kaiming_std(w, a, mode, nonlinearity, "kaiming_uniform_");
    if (w.numel() == 0) return w;
    return uniform_(std::move(w), -bound, bound);
}

Tensor kaiming_normal_(Tensor w, double a, const std::string& mode, const std::string& nonlinearity) {
    const double std = kaiming_std(w, a, mode, nonlinearity, "kaiming_normal_");
    if (w.numel() == 0) return w;
    return normal_(std::move(w), 0.0, std);
}

}  // namespace xgrad::nn::init
