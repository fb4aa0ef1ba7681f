// examples/lora_basics.cpp — LoRA, the lesson: a trained layer kept frozen, a small update trained beside it.
//
// A Linear computes y = x Wᵀ + b with W (out, in). Fine-tuning all of W trains out·in numbers and
// keeps, under AdamW, a gradient and two moments of that size. LoRA (Hu et al. 2021) freezes W and
// trains a low-rank change beside it:
//     W' = W + s·B·A        A (r, in), B (out, r), r ≪ min(in, out), s = α/r
//     y  = x W'ᵀ + b  =  x Wᵀ + b  +  s·(x Aᵀ) Bᵀ
// A starts random and B at zero, so s·B·A = 0 and the adapted model starts equal to the base.
//   1. the base: an MLP x (N, 32) → fc1 (32 → 128) → GELU → fc2 (128 → 32), 8,352 parameters
//   2. full fine-tuning's optimizer memory: AdamW over every parameter, after one step
//   3. the adapters (r = 2, α = 4 on fc1 and fc2): the output at step 0 equals the base's exactly
//   4. the memory after freezing: the same report, a gradient and AdamW state for A and B alone
//   5. a few steps of training the adapters toward a teacher that differs from the base by rank 1
//   6. the base alone (enabled(false)); merged (W += s·B·A, one product per layer) against unmerged
//   7. the adapter file, in PEFT's layout, beside the bytes of the base
//
// Every number is checked; the program exits with status 1 if a check fails, which is how the test
// suite runs it (ctest: example_lora_basics). It writes out/lora_basics/adapter/.
//
// Run: build/examples/lora_basics
#include <cmath>
#include <filesystem>
#include <iostream>
#include <memory>
#include <string>
#include <vector>

#include <fmt/format.h>

#include <xgrad/core/ops.hpp>
#include <xgrad/nn/nn.hpp>
#include <xgrad/optim/optim.hpp>

using namespace xgrad;
namespace F = xgrad::nn::functional;

static int failures = 0;

// Prints "label  value  ok" and counts a failed check.
static void expect(const std::string& label, const std::string& value, bool ok) {
    fmt::print("  {:<60} {:>12}  {}\n", label, value, ok ? "ok" : "FAILED");
    if (!ok) ++failures;
}

static double max_abs_diff(const Tensor& a, const Tensor& b) {
    return double(xt::amax(xt::abs(a.data() - b.data()))());
}

// ---- 1. the base model ------------------------------------------------------------------------------
// x (N, 32) → fc1 → (N, 128) → GELU → fc2 → (N, 32). The same weights for every MLP built: "the
// trained model" of this lesson.
struct MLP : nn::Module {
    std::shared_ptr<nn::Linear> fc1, fc2;
    MLP() {
        manual_seed(42);
        fc1 = register_module("fc1", std::make_shared<nn::Linear>(32, 128));  // W1 (128, 32), b1 (128)
        fc2 = register_module("fc2", std::make_shared<nn::Linear>(128, 32));  // W2 (32, 128), b2 (32)
    }
    Tensor forward(const Tensor& x) const { return fc2->forward(F::gelu(fc1->forward(x))); }
};

// One AdamW step on the mean square error over all of the model's parameters, trainable or not
// (a frozen one gets no gradient, hence no update and no state). Returns the loss before the step.
static double train_step(MLP& model, optim::Optimizer& opt, const Tensor& x, const Tensor& target) {
    opt.zero_grad();
    Tensor loss = F::mse_loss(model.forward(x), target);  // () mean of (y − target)²
    loss.backward();  // a frozen W gets no dW (nn/linear.cpp): backward computes dX, dA and dB
    opt.step();
    return loss.item();
}

// ---- 2. full fine-tuning: every parameter trained ----------------------------------------------------
static std::size_t full_fine_tuning(const Tensor& x, const Tensor& target) {
    MLP model;
    optim::AdamW opt(model.named_parameters(), optim::AdamWOptions(1e-2));
    train_step(model, opt, x, target);
    const optim::MemoryRow total = opt.memory_report().total();
    fmt::print("\n2. Full fine-tuning: AdamW over all 8352 parameters, after one step\n");
    // AdamW keeps m and v per element (2 · 4 B) and a step count t per tensor (8 B).
    expect("gradients, B: 4 per parameter", fmt::format("{}", total.grad_bytes), total.grad_bytes == 4 * 8352);
    expect("optimizer state, B: 8 per parameter + 8 per tensor", fmt::format("{}", total.state_bytes()),
           total.state_bytes() == 8 * 8352 + 4 * 8);
    return total.state_bytes();
}

// ---- 5. training the adapters -----------------------------------------------------------------------
// The teacher is the base with W1 + u vᵀ (rank 1): an update LoRA at r = 2 can represent exactly.
// Step 1 was section 4's; `first` is its loss, before any update.
static void train_adapters(MLP& model, optim::Optimizer& opt, const Tensor& x, const Tensor& target, double first) {
    fmt::print("\n5. Training A and B toward the teacher (W1 + u vᵀ), AdamW, lr 1e-2\n");
    const Tensor W1 = Tensor(model.fc1->weight.data()), W2 = Tensor(model.fc2->weight.data());  // copies
    fmt::print("  step  1  mse {:.4g}\n", first);
    double loss = first;
    for (int step = 2; step <= 60; ++step) {
        loss = train_step(model, opt, x, target);
        if (step % 20 == 0) fmt::print("  step {:>2}  mse {:.4g}\n", step, loss);
    }
    expect("mse at step 60 / mse at step 1 < 0.1", fmt::format("{:.2g}", loss / first), loss / first < 0.1);
    const double moved = std::max(max_abs_diff(model.fc1->weight, W1), max_abs_diff(model.fc2->weight, W2));
    expect("the frozen W1 and W2 did not move: max |ΔW|", fmt::format("{:g}", moved), moved == 0);
}

// ---- 6. the base alone, merged and unmerged ---------------------------------------------------------
// enabled(false) drops the adapter's term: the base, bit for bit. merge(): W += s·B·A, so one
// product x W'ᵀ computes what two paths computed; unmerge() takes it back to rounding (in floats,
// W + s·B·A − s·B·A need not be W again: switch an adapter off before merging, not after).
static void merge_and_disable(MLP& model, const Tensor& x, const Tensor& y_base) {
    const std::vector<nn::Linear*> layers{model.fc1.get(), model.fc2.get()};
    fmt::print("\n6. The base alone, then merged (W' = W + s·B·A, one product) against unmerged (x Wᵀ + s·(x Aᵀ) Bᵀ)\n");
    for (nn::Linear* layer : layers) layer->lora()->enabled(false);
    const double off = max_abs_diff(model.forward(x), y_base);
    expect("enabled(false): max |y − y_base|, bit for bit", fmt::format("{:g}", off), off == 0);
    for (nn::Linear* layer : layers) layer->lora()->enabled(true);

    const Tensor W1 = Tensor(model.fc1->weight.data());
    const Tensor unmerged = model.forward(x);
    model.eval();  // merging is for inference: a merged adapter refuses a training forward
    for (nn::Linear* layer : layers) layer->lora()->merge();
    const Tensor merged = model.forward(x);
    fmt::print("  {:>8} {:>12} {:>12} {:>12}\n", "y[0, j]", "unmerged", "merged", "difference");
    for (std::int64_t j = 0; j < 4; ++j)
        fmt::print("  {:>8} {:>12.6f} {:>12.6f} {:>12.1e}\n", j, unmerged.at({0, j}), merged.at({0, j}),
                   double(merged.at({0, j}) - unmerged.at({0, j})));
    const double d = max_abs_diff(merged, unmerged);
    expect("max |merged − unmerged| over (64, 32) ≤ 1e-5", d <= 1e-5 ? "yes" : fmt::format("{:.1e}", d), d <= 1e-5);
    for (nn::Linear* layer : layers) layer->lora()->unmerge();
    const double dw = max_abs_diff(model.fc1->weight, W1);
    expect("unmerge: max |W1 − W1 before merge| ≤ 1e-6", dw <= 1e-6 ? "yes" : fmt::format("{:.1e}", dw), dw <= 1e-6);
}

int main() {
    manual_seed(0);
    const Tensor x = randn({64, 32});  // a batch of N = 64 inputs
    MLP model;
    const Tensor y_base = model.forward(x);  // (64, 32)
    fmt::print("1. The base: x (64, 32) → fc1 (32 → 128) → GELU → fc2 (128 → 32)\n");
    expect("parameters: 32·128 + 128 + 128·32 + 32", fmt::format("{}", nn::count_parameters(model).trainable),
           nn::count_parameters(model).trainable == 8352);

    // The new task's targets: a teacher that is the base but for a rank-1 change of W1.
    MLP teacher;
    teacher.fc1->weight.mutable_data() += (0.5 * matmul(randn({128, 1}), randn({1, 32}))).data();  // u (128, 1) vᵀ (1, 32)
    const Tensor target = teacher.forward(x).detach();
    const std::size_t full_state = full_fine_tuning(x, target);

    // ---- 3. the adapters: W frozen, A (r, in) random, B (out, r) zero -----------------------------------
    const auto adapted = nn::apply_lora(model, {"fc1", "fc2"}, nn::LoRAOptions().rank(2).alpha(4));  // s = α/r = 2
    const nn::ParameterCounts counts = nn::count_parameters(model);
    fmt::print("\n3. LoRA r = 2, α = 4 (s = 2) on {}: W and b frozen, A and B trained\n", fmt::join(adapted, ", "));
    expect("trainable: A1 2·32 + B1 128·2 + A2 2·128 + B2 32·2", fmt::format("{}", counts.trainable),
           counts.trainable == 640);
    expect("frozen: the base", fmt::format("{}", counts.frozen), counts.frozen == 8352);
    const double fraction = 100.0 * double(counts.trainable) / double(counts.trainable + counts.frozen);
    expect("trainable fraction, %", fmt::format("{:.2f}", fraction), std::abs(fraction - 7.1174) < 1e-3);
    expect("step 0 (B = 0): max |y − y_base|, exactly", fmt::format("{:g}", max_abs_diff(model.forward(x), y_base)),
           max_abs_diff(model.forward(x), y_base) == 0);

    // ---- 4. the memory after freezing: the report of the same AdamW, after one step --------------------
    optim::AdamW opt(model.named_parameters(), optim::AdamWOptions(1e-2));  // frozen ones included: 0 B each
    const double first_loss = train_step(model, opt, x, target);
    optim::MemoryReport report = opt.memory_report();
    fmt::print("\n4. The optimizer's memory after freezing (AdamW, one step)\n");
    std::cout << report << "\n";
    const optim::MemoryRow trainable = report.total_trainable(), frozen = report.total_frozen();
    expect("optimizer state, B: 8 per trainable element + 8 per tensor", fmt::format("{}", trainable.state_bytes()),
           trainable.state_bytes() == 8 * 640 + 4 * 8 && report.total().state_bytes() == trainable.state_bytes());
    expect("frozen: gradient + optimizer state, B", fmt::format("{}", frozen.grad_bytes + frozen.state_bytes()),
           frozen.grad_bytes + frozen.state_bytes() == 0);
    expect("optimizer state, full fine-tuning / LoRA", fmt::format("{:.2f}x", double(full_state) / trainable.state_bytes()),
           full_state > 12 * trainable.state_bytes());

    train_adapters(model, opt, x, target, first_loss);
    merge_and_disable(model, x, y_base);

    // ---- 7. the adapter file: A and B alone, PEFT's names and config -----------------------------------
    const std::filesystem::path dir = "out/lora_basics/adapter";
    nn::save_adapter(model, dir.string());
    report.adapter_file_bytes = std::filesystem::file_size(dir / "adapter_model.safetensors");
    fmt::print("\n7. The adapter file, {}: A and B of both layers under PEFT's names\n", (dir / "adapter_model.safetensors").string());
    expect("adapter_model.safetensors, B (640 · 4 B of tensors + header)", fmt::format("{}", report.adapter_file_bytes),
           report.adapter_file_bytes > 640 * 4 && report.adapter_file_bytes < 2 * 640 * 4);
    expect("the base's parameters, B", fmt::format("{}", frozen.param_bytes), frozen.param_bytes == 8352 * 4);
    fmt::print("  the report's totals with the file's bytes (optim::memory_summary, no row shown):\n{}\n",
               optim::memory_summary(report, 0));

    fmt::print("\n{}\n", failures == 0 ? "All checks pass." : fmt::format("{} CHECKS FAILED", failures));
    return failures == 0 ? 0 : 1;
}
