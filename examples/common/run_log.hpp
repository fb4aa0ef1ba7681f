// examples/common/run_log.hpp — what a training run writes as it goes: the loss CSV, one
// progress line per report (steps/s and ETA), the loss curve drawn from the CSV, a clock, and
// the stop of a diverged run. char_mlp and gpt use all five; their own reports (samples,
// heatmaps) stay in each example.
#pragma once

#include <limits>
#include <string>
#include <vector>

namespace examples {

// loss.csv: "step,train_loss,val_loss,lr" (losses in nats; val_loss empty between evaluations),
// and, when the log is made with an extra column, its name and value last, e.g.
// "step,train_loss,val_loss,lr,val_nats_per_char" (gpt's byte-pair runs). The log keeps the header
// and every row in memory (a run logs a few thousand rows at most) and rewrites the whole file with
// io::write_file_atomically, so the file on disk is always whole: the old one or the new, never half
// a row. A rewrite waits for two fsyncs, which can outlast several training steps, so
// the file is rewritten when a row carries a validation loss (an evaluation, and the last step of
// char_mlp's and gpt's runs, before they plot the file) or `seconds_between_writes` after the last
// rewrite; the rows in between wait in memory, and the destructor writes those still waiting. A
// killed run keeps every row logged up to about a second before it died. A symlinked path stays a
// link: its target is rewritten.
class LossLog {
public:
    // resumed_at 0: a fresh file holding the header, written at once. A run resumed at step s > 0
    // continues the file: the rows of steps after s, logged by a run that died before its
    // checkpoint of them, are dropped (the resumed run logs them again), as is a row cut short or
    // with another number of fields; the header and the rows up to s are kept and written at once.
    // Throws std::runtime_error naming the path if the file cannot be read or written (its
    // directory is missing, no permission, the path is a directory or a device), so a bad path
    // stops the run before its first step.
    LossLog(const std::string& path, int resumed_at, const std::string& extra_column = "",
            double seconds_between_writes = 1.0);
    LossLog(const std::string& path, bool) = delete;  // a step, not a flag: 1 would drop rows
    ~LossLog();  // writes the rows still waiting; a failure is reported on stderr
    LossLog(const LossLog&) = delete;
    LossLog& operator=(const LossLog&) = delete;

    // Adds one row, and rewrites the file under the rule above. A rewrite that fails (a full disk,
    // a vanished directory) does not stop the run, whose checkpoint matters more: it is reported
    // on stderr once and in failure(); the file keeps the rows it had, and no later row is written.
    // `extra` fills the extra column (NaN: empty; a log without one ignores it).
    void write(int step, double train_loss, double val_loss /* NaN = none */, double lr,
               double extra = std::numeric_limits<double>::quiet_NaN());
    // Writes the rows still waiting now (a run calls it before it reads failure() or plots the
    // file); a failure is kept in failure() as write()'s is.
    void flush();
    // "" while every rewrite succeeded; else "rows from step <s> on not written (<why>)", <s> the
    // first row the failed rewrite held that the file lacks, <why> naming the path and the reason.
    const std::string& failure() const { return failure_; }

private:
    void save();  // rewrites the file with every row; a failure sets failure_

    std::string path_, failure_;
    bool extra_ = false;
    double seconds_between_writes_;
    std::string text_;        // the header and every row so far
    int first_waiting_ = -1;  // the step of the first row not yet on disk; -1: none
    double written_at_ = 0;   // now_seconds() at the last rewrite
};

// TensorBoard's smoothing of a scalar curve: a debiased exponential moving average, weight w.
//     m_0 = 0,   m_i = w·m_(i-1) + (1 - w)·x_i,   s_i = m_i / (1 - w^i)        i = 1, 2, ...
// Dividing by 1 - w^i removes the pull of the zero start: s_1 = x_1, and each s_i is a weighted
// mean of x_1..x_i with weights ∝ w^(i-j), about the last 1/(1 - w) points. It trails a falling
// curve a little, but a last noisy minibatch moves it by only (1 - w) of its noise. A non-finite
// x_i is copied through and left out of the average. values: any length; returns the same length.
// Throws std::invalid_argument if w is outside [0, 1).
// ref: TensorBoard, tensorboard/components/vz_line_chart2/line-chart.ts (resmoothDataset)
std::vector<double> ema_smooth(const std::vector<double>& values, double weight);

// Draws out_dir/loss.csv into out_dir/loss.png with gnuplot when it is installed (common/gnuplot.hpp):
// the minibatch losses, their ema_smooth with weight `ema_weight` (written to out_dir/loss_ema.csv,
// "step,train_loss_ema", so gnuplot only draws) and the validation losses. Returns the note to print.
// `title` and the y range (gnuplot syntax, in nats) default to char_mlp's; a weight of 0.99 averages
// about the last 100 rows (1,000 steps at one row per 10 steps). loss_ema.csv and the script loss.gp
// are written with io::write_file_atomically. Throws std::runtime_error if loss.csv cannot be read
// or a file cannot be written (naming it), std::invalid_argument for a weight outside [0, 1).
std::string plot_losses(const std::string& out_dir, const std::string& title = "char_mlp: cross-entropy loss (nats)",
                        const std::string& yrange = "[1.5:3.5]", double ema_weight = 0.99);

// One status line per update: "step s/total  loss (nats)  lr  steps/s  ETA (s)  [val (nats)]",
// rewritten in place ('\r') on a terminal, plain lines otherwise. A validation loss per character
// given too is shown after the validation loss: "val 4.1234 (1.2345 nats/char)".
class Progress {
public:
    Progress(int first_step, int total_steps);
    void update(int step, double loss, double lr, double val_loss /* NaN = none */,
                double val_per_char = std::numeric_limits<double>::quiet_NaN());
    void finish();

private:
    int first_, total_;
    bool tty_;
    double start_, last_val_ = -1, last_val_per_char_ = -1;
};

// Throws std::runtime_error unless the loss of `step` is finite. Once a loss is NaN or infinite
// (a learning rate too large, an overflow), every later step is too and the weights are lost;
// the run stops with the step and the loss instead of training on and saving them. `which` is
// "training" (the batch's loss, before the step's update) or "validation" (after it, so a
// last step that diverges is caught before the checkpoint is written).
void check_finite_loss(int step, double loss, const char* which = "training");

// Seconds on a monotonic clock (std::chrono::steady_clock); only differences mean anything.
double now_seconds();

}  // namespace examples
