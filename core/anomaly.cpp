// core/anomaly.cpp — anomaly mode, as torch.autograd.detect_anomaly: while it is on, make_result
// checks every forward output and backward_pass every gradient (core/autograd.cpp) for NaN and ±inf.
#include <xgrad/core/autograd.hpp>
#include <xgrad/core/detail/anomaly.hpp>

#include <algorithm>
#include <cmath>

namespace xgrad {

namespace {
thread_local bool g_anomaly = false;
}
bool anomaly_enabled() { return g_anomaly; }
void set_detect_anomaly(bool on) { g_anomaly = on; }
DetectAnomalyGuard::DetectAnomalyGuard(bool on) : prev_(g_anomaly) { g_anomaly = on; }
DetectAnomalyGuard::~DetectAnomalyGuard() { g_anomaly = prev_; }

namespace {
// Throws if an input already held a NaN when op received it: the NaN came from outside what the
// guard watched (the data, a leaf, a tensor made before the guard), so the op is not to blame.
void blame_nan_input(const std::string& op, const Tensor* inputs, std::size_t n) {
    for (std::size_t k = 0; k < n; ++k) {
        if (!inputs[k].defined()) continue;
        const Array& in = inputs[k].data();
        const auto it = std::find_if(in.begin(), in.end(), [](real v) { return std::isnan(v); });
        if (it == in.end()) continue;
        throw ValueError(fmt::format("anomaly: op '{}' received NaN in its input {} of shape {} at flat index {}: "
                                     "that {} held it before the op ran (check the data or how it was made; "
                                     "detect_anomaly is on)",
                                     op, k, shape_str(in.shape()), it - in.begin(),
                                     inputs[k].is_leaf() ? "leaf (input data or a parameter)" : "tensor"));
    }
}
}  // namespace

void check_finite(const Array& a, const std::string& op, const char* what, const Tensor* inputs, std::size_t n) {
    const real* p = a.data();
    int input_inf = -1;  // unknown until the first ±inf in `a`
    for (std::size_t i = 0; i < a.size(); ++i) {
        if (std::isfinite(p[i])) continue;
        if (!std::isnan(p[i]) && inputs) {
            if (input_inf < 0) {
                input_inf = 0;
                for (std::size_t k = 0; k < n && !input_inf; ++k) {
                    const Array& in = inputs[k].data();
                    input_inf = std::any_of(in.begin(), in.end(), [](real v) { return std::isinf(v); });
                }
            }
            if (input_inf) continue;
        }
        if (std::isnan(p[i])) blame_nan_input(op, inputs, n);
        throw ValueError(fmt::format("anomaly: op '{}' produced {} in {} of shape {} at flat index {} "
                                     "(detect_anomaly is on)",
                                     op, std::isnan(p[i]) ? "NaN" : p[i] > 0 ? "inf" : "-inf", what,
                                     shape_str(a.shape()), i));
    }
}

}  // namespace xgrad
