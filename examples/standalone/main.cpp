// examples/standalone/main.cpp — a program of your own that uses xgrad from outside its tree.
//
// It defines one op that xgrad does not have, checks its backward against finite differences,
// and trains a tiny model with it. The CMakeLists.txt beside it builds this file twice:
//   standalone      linked to xgrad::xgrad      real = float   (what you train with)
//   standalone_f64  linked to xgrad::xgrad_f64  real = double  (what you gradcheck with: central
//                   differences in float32 cannot tell a wrong formula from rounding)
// Both builds run the same code; the gradcheck's tolerances follow `real` (core/gradcheck.hpp).
// The program exits with status 1 if the gradcheck fails or training does not lower the loss,
// which is how ctest runs it (tests/consumer.sh).
//
// Build it against an installed xgrad, or with xgrad's sources inside your project: see the
// README section "Use xgrad in your own project".
//
// Legend: N samples, d hidden width.
#include <cmath>
#include <cstdio>

#include <fmt/format.h>

#include "core/autograd.hpp"
#include "core/gradcheck.hpp"
#include "core/ops.hpp"
#include "nn/nn.hpp"
#include "optim/optim.hpp"

using namespace xgrad;

// ---- softsign, a custom op ------------------------------------------------------------------
// forward : y = x / (1 + |x|)                      x: any shape, y: same shape
// backward: dL/dx = dL/dy / (1 + |x|)²             since d/dx [x / (1 + |x|)] = 1 / (1 + |x|)²
// ref: PyTorch docs, torch.nn.Softsign.
Tensor softsign(const Tensor& x) {
    Array y = x.data() / (1 + xt::abs(x.data()));
    return make_result(std::move(y), "softsign", {x},
        [x](const Array& grad_out, const Array& /*y*/) {
            return make_grads(Array(grad_out / xt::square(1 + xt::abs(x.data()))));
        });
}

// A two-layer network with softsign between the layers: (N, 1) → (N, d) → (N, 1).
class TinyNet : public nn::Module {
public:
    explicit TinyNet(std::int64_t d) {
        fc1 = register_module("fc1", std::make_shared<nn::Linear>(1, d));
        fc2 = register_module("fc2", std::make_shared<nn::Linear>(d, 1));
    }
    Tensor forward(const Tensor& x) const { return fc2->forward(softsign(fc1->forward(x))); }

    std::shared_ptr<nn::Linear> fc1, fc2;
};

int main() {
    manual_seed(0);
    fmt::print("xgrad consumer: real is {} ({} bytes)\n", sizeof(real) == 8 ? "double" : "float", sizeof(real));

    // 1. gradcheck softsign on a (3, 4) input. Its kink at 0 is harmless: |x| > 0 almost surely.
    Tensor x = randn({3, 4}, /*requires_grad=*/true);
    const GradcheckResult check = gradcheck([](const std::vector<Tensor>& in) { return softsign(in[0]); }, {x});
    fmt::print("gradcheck softsign: {} elements, max |analytic - numeric| = {:.2e}: {}\n", check.checked,
               check.max_abs_error, check.ok ? "ok" : "FAILED " + check.message);

    // 2. fit y = sin(3x) on N = 64 points of [-1, 1] with full-batch Adam.
    const std::int64_t N = 64;
    Tensor inputs = reshape(arange(-1, 1, real(2.0 / N)), {N, 1});                // (N, 1)
    Tensor targets = from_array(Array(xt::sin(3 * inputs.data())));                // (N, 1)
    TinyNet model(16);
    optim::Adam opt(model.named_parameters(), optim::AdamOptions(1e-2));
    double first = 0, last = 0;
    for (int step = 0; step < 500; ++step) {
        Tensor loss = nn::functional::mse_loss(model.forward(inputs), targets);   // () mean squared error
        opt.zero_grad();
        loss.backward();
        opt.step();
        if (step == 0) first = loss.item();
        last = loss.item();
    }
    fmt::print("training: mean squared error {:.4f} at step 1, {:.4f} at step 500\n", first, last);

    const bool ok = check.ok && last < 0.1 * first;
    fmt::print("{}\n", ok ? "ok" : "FAILED");
    return ok ? 0 : 1;
}
