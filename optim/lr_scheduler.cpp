// optim/lr_scheduler.cpp — CosineWithWarmup; the formula is in optim/lr_scheduler.hpp.
#include <xgrad/optim/lr_scheduler.hpp>

#include <cmath>

namespace xgrad::optim {

CosineWithWarmup::CosineWithWarmup(Optimizer& optimizer, std::int64_t warmup_steps,
                                   std::int64_t total_steps, double min_lr)
    : optimizer_(optimizer), warmup_steps_(warmup_steps), total_steps_(total_steps), min_lr_(min_lr) {
    const char* op = "CosineWithWarmup";
    check(warmup_steps >= 0, op, "warmup_steps must be >= 0; got {}", warmup_steps);
    check(total_steps > 0 && total_steps >= warmup_steps, op,
          "need total_steps > 0 and total_steps >= warmup_steps; got total_steps {}, warmup_steps {}",
          total_steps, warmup_steps);
    for (std::size_t g = 0; g < optimizer.param_groups().size(); ++g) {
        const double base = *optimizer.param_groups()[g].lr;
        check(min_lr >= 0 && min_lr <= base, op,
              "min_lr {} outside [0, {}], the lr of param group {}", min_lr, base, g);
        base_lrs_.push_back(base);
    }
    set_step(0);
}

double CosineWithWarmup::lr_at(std::int64_t step, std::size_t group) const {
    check(group < base_lrs_.size(), "CosineWithWarmup::lr_at", "param group {} out of range [0, {})",
          group, base_lrs_.size());
    const double base = base_lrs_[group];
    if (step < warmup_steps_) {                                       // γ0 · t / W
        return base * static_cast<double>(step) / static_cast<double>(warmup_steps_);
    }
    if (step > total_steps_) return min_lr_;
    const double span = static_cast<double>(std::max<std::int64_t>(1, total_steps_ - warmup_steps_));
    const double progress = static_cast<double>(step - warmup_steps_) / span;  // (t − W) / (T − W)
    const double pi = std::acos(-1.0);
    return min_lr_ + (base - min_lr_) * 0.5 * (1 + std::cos(pi * progress));
}

void CosineWithWarmup::step() { set_step(step_ + 1); }

void CosineWithWarmup::set_step(std::int64_t step) {
    check(step >= 0, "CosineWithWarmup::set_step", "step must be >= 0; got {}", step);
    step_ = step;
    auto& groups = optimizer_.param_groups();
    check(groups.size() == base_lrs_.size(), "CosineWithWarmup",
          "the optimizer has {} param groups, the schedule was built for {}", groups.size(),
          base_lrs_.size());
    for (std::size_t g = 0; g < groups.size(); ++g) groups[g].lr = lr_at(step_, g);
}

}  // namespace xgrad::optim
