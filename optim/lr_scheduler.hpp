// optim/lr_scheduler.hpp — learning-rate schedules that write each param group's lr.
//
//     optim::AdamW opt(model.named_parameters(), optim::AdamWOptions(3e-4));
//     optim::CosineWithWarmup sched(opt, /*warmup_steps=*/100, /*total_steps=*/5000, /*min_lr=*/3e-5);
//     for (int step = 0; step < 5000; ++step) {
//         ...; opt.step();
//         sched.step();              // after opt.step(), as in PyTorch
//     }
#pragma once

#include <cstdint>
#include <vector>

#include <xgrad/optim/optimizer.hpp>

namespace xgrad::optim {

// Linear warmup, then cosine decay (as HuggingFace's get_cosine_schedule_with_warmup, with a
// floor min_lr as in nanoGPT). For a group whose lr was γ0 when the schedule was built, with
// W = warmup_steps and T = total_steps:
//     lr(t) = γ0 · t / W                                              0 ≤ t < W
//     lr(t) = min_lr + (γ0 − min_lr) · ½ · (1 + cos(π · (t − W) / max(1, T − W)))
//                                                                     W ≤ t ≤ T
//     lr(t) = min_lr                                                  t > T
// The constructor sets every group's lr to lr(0). The optimizer must outlive the scheduler. To
// resume: build the scheduler, load the optimizer's state, then set_step(steps taken).
class CosineWithWarmup {
public:
    // Throws ValueError for warmup_steps < 0, total_steps < warmup_steps or ≤ 0, or min_lr
    // outside [0, γ0].
    CosineWithWarmup(Optimizer& optimizer, std::int64_t warmup_steps, std::int64_t total_steps,
                     double min_lr = 0.0);

    // lr(step) for `group` (its base lr γ0); pure, changes nothing.
    double lr_at(std::int64_t step, std::size_t group = 0) const;
    // t ← t + 1, then every group's lr ← lr_at(t, group).
    void step();
    // t ← step, then every group's lr ← lr_at(t, group).
    void set_step(std::int64_t step);
    std::int64_t current_step() const { return step_; }
    const std::vector<double>& base_lrs() const { return base_lrs_; }

private:
    Optimizer& optimizer_;
    std::int64_t warmup_steps_;
    std::int64_t total_steps_;
    double min_lr_;
    std::vector<double> base_lrs_;  // γ0 per group
    std::int64_t step_ = 0;          // t
};

}  // namespace xgrad::optim
