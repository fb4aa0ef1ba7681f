// examples/common/run_log.hpp — what a training run writes as it goes: the loss CSV, one
// progress line per report (steps/s and ETA), the loss curve drawn from the CSV, a clock.
// char_mlp and gpt use all four; their own reports (samples, heatmaps) stay in each example.
#pragma once

#include <fstream>
#include <string>

namespace examples {

// loss.csv: "step,train_loss,val_loss,lr" (losses in nats; val_loss empty between evaluations).
class LossLog {
public:
    // append: continue an existing file (a resumed run); otherwise start a fresh one with the header.
    // Throws std::runtime_error if the file cannot be opened for writing.
    LossLog(const std::string& path, bool append);
    void write(int step, double train_loss, double val_loss /* NaN = none */, double lr);

private:
    std::ofstream out_;
};

// Draws out_dir/loss.csv into out_dir/loss.png with gnuplot when it is installed (common/gnuplot.hpp);
// returns the note to print. `title` and the y range (gnuplot syntax, in nats) default to char_mlp's.
std::string plot_losses(const std::string& out_dir, const std::string& title = "char_mlp: cross-entropy loss (nats)",
                        const std::string& yrange = "[1.5:3.5]");

// One status line per update: "step s/total  loss (nats)  lr  steps/s  ETA (s)  [val (nats)]",
// rewritten in place ('\r') on a terminal, plain lines otherwise.
class Progress {
public:
    Progress(int first_step, int total_steps);
    void update(int step, double loss, double lr, double val_loss /* NaN = none */);
    void finish();

private:
    int first_, total_;
    bool tty_;
    double start_, last_val_ = -1;
};

// Seconds on a monotonic clock (std::chrono::steady_clock); only differences mean anything.
double now_seconds();

}  // namespace examples
