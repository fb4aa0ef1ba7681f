// examples/common/run_log.cpp — the loss CSV, the progress line, the loss curve, the clock.
#include "common/run_log.hpp"

#include <xgrad/distributed/distributed.hpp>

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <optional>
#include <sstream>
#include <stdexcept>
#include <string_view>

#include <fmt/format.h>

#include <xgrad/core/parse.hpp>  // try_parse_int64
#include <xgrad/io/atomic_file.hpp>

#include "common/gnuplot.hpp"

namespace examples {

double now_seconds() {
    using clock = std::chrono::steady_clock;
    return std::chrono::duration<double>(clock::now().time_since_epoch()).count();
}

void check_finite_loss(int step, double loss, const char* which) {
    if (!std::isfinite(loss))
        throw std::runtime_error(fmt::format("step {}: the {} loss is {} (the run diverged); stopped without "
                                             "saving, so an earlier checkpoint is left as it was. A smaller --lr "
                                             "or --weight-decay (or gradient clipping) may help",
                                             step, which, std::isnan(loss) ? "NaN" : loss > 0 ? "inf" : "-inf"));
}

namespace {

const std::string kLossHeader = "step,train_loss,val_loss,lr\n";

// The text of loss.csv holding only `header` and the complete rows (as many fields as the header
// names, a newline) of steps <= `step`.
std::string rows_up_to(const std::string& text, int step, const std::string& header) {
    const auto commas = std::count(header.begin(), header.end(), ',');
    std::string kept = header;
    std::size_t begin = text.compare(0, header.size(), header) == 0 ? header.size() : 0;
    for (std::size_t end; (end = text.find('\n', begin)) != std::string::npos; begin = end + 1) {
        const std::string_view row(text.data() + begin, end - begin);
        const std::optional<std::int64_t> s = xgrad::try_parse_int64(row.substr(0, row.find(',')));
        if (s && *s <= step && std::count(row.begin(), row.end(), ',') == commas)
            kept.append(row).push_back('\n');
    }
    return kept;
}

// The bytes of loss.csv as they are on disk. Throws std::runtime_error naming `path` if it cannot be read.
std::string read_loss_log(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    if (!in.eof() && in.fail()) throw std::runtime_error(fmt::format("{}: cannot read the loss log", path));
    return text;
}

}  // namespace

LossLog::LossLog(const std::string& path, int resumed_at, const std::string& extra_column,
                 double seconds_between_writes)
    : path_(path), extra_(!extra_column.empty()), seconds_between_writes_(seconds_between_writes) {
    const std::string header =
        extra_ ? kLossHeader.substr(0, kLossHeader.size() - 1) + "," + extra_column + "\n" : kLossHeader;
    std::error_code ec;
    const bool continuing = resumed_at > 0 && std::filesystem::exists(path, ec);  // else start a fresh file
    const std::string old = continuing ? read_loss_log(path) : "";
    text_ = continuing ? rows_up_to(old, resumed_at, header) : header;
    try {  // at once, even unchanged: a path that cannot be written stops the run before its first step
        xgrad::io::write_file_atomically(path_, text_, "LossLog");
    } catch (const std::runtime_error& e) {
        if (!continuing || text_ == old) throw;
        throw std::runtime_error(fmt::format("cannot drop the rows after step {}: {}", resumed_at, e.what()));
    }
    written_at_ = now_seconds();
}

LossLog::~LossLog() {
    try {
        flush();
    } catch (...) {  // stderr itself cannot be written: nothing is left to tell
    }
}

void LossLog::flush() {
    if (first_waiting_ >= 0 && failure_.empty()) save();  // the rows still waiting
}

void LossLog::write(int step, double train_loss, double val_loss, double lr, double extra) {
    if (!failure_.empty()) return;  // the file keeps the rows before the first that failed
    auto field = [](double v) { return std::isnan(v) ? std::string() : fmt::format("{:.6f}", v); };
    fmt::format_to(std::back_inserter(text_), "{},{:.6f},{},{:.6g}{}\n", step, train_loss, field(val_loss), lr,
                   extra_ ? "," + field(extra) : std::string());
    if (first_waiting_ < 0) first_waiting_ = step;
    if (!std::isnan(val_loss) || now_seconds() - written_at_ >= seconds_between_writes_) save();
}

void LossLog::save() {
    try {
        xgrad::io::write_file_atomically(path_, text_, "LossLog");  // the whole file: the old one or the new
        first_waiting_ = -1;
        written_at_ = now_seconds();
    } catch (const std::runtime_error& e) {
        failure_ = fmt::format("rows from step {} on not written ({})", first_waiting_, e.what());
        std::fflush(stdout);  // this line after what was printed so far
        fmt::print(stderr, "\n{}: {}; training goes on\n", path_, failure_);
    }
}

std::vector<double> ema_smooth(const std::vector<double>& values, double weight) {
    if (!(weight >= 0 && weight < 1))
        throw std::invalid_argument(fmt::format("ema_smooth: weight {} is outside [0, 1)", weight));
    std::vector<double> smoothed(values.size());
    double m = 0, debias = 1;  // m_i and w^i
    for (std::size_t i = 0; i < values.size(); ++i) {
        const double x = values[i];
        if (!std::isfinite(x)) {
            smoothed[i] = x;
            continue;
        }
        m = weight * m + (1 - weight) * x;
        debias *= weight;
        smoothed[i] = m / (1 - debias);
    }
    return smoothed;
}

std::string plot_losses(const std::string& dir, const std::string& title, const std::string& yrange,
                        double ema_weight) {
    // Rows of loss.csv: "step,train_loss,val_loss,lr", after a header line.
    std::ifstream csv(dir + "/loss.csv");
    if (!csv) throw std::runtime_error(fmt::format("{}/loss.csv: cannot open for reading", dir));
    std::vector<std::string> steps;
    std::vector<double> train;
    std::string line;
    std::getline(csv, line);
    while (std::getline(csv, line)) {
        const std::size_t a = line.find(','), b = line.find(',', a + 1);
        if (a == std::string::npos || b == std::string::npos) continue;
        steps.push_back(line.substr(0, a));
        train.push_back(std::strtod(line.substr(a + 1, b - a - 1).c_str(), nullptr));
    }
    const std::vector<double> ema = ema_smooth(train, ema_weight);
    std::string ema_csv = "step,train_loss_ema\n";
    for (std::size_t i = 0; i < ema.size(); ++i)
        fmt::format_to(std::back_inserter(ema_csv), "{},{:.6f}\n", steps[i], ema[i]);
    xgrad::io::write_file_atomically(dir + "/loss_ema.csv", ema_csv, "plot_losses");

    // Every path and title as a gnuplot string literal (gnuplot_quote): any byte of --out but a
    // newline reaches gnuplot as it is.
    const std::string csv_path = gnuplot_quote(dir + "/loss.csv");
    std::ostringstream gp;
    gp << "set terminal pngcairo size 900,540 noenhanced\n"
       << "set output " << gnuplot_quote(dir + "/loss.png") << "\n"
       << "set datafile separator ','\n"
       << "set title " << gnuplot_quote(title) << "\n"
       << "set xlabel 'step'\nset ylabel 'loss (nats)'\nset grid\nset key top right\n"
       << "set yrange " << yrange << "\n"
       << "plot " << csv_path << " using 1:2 every ::1 with lines lc rgb '#c8d6ea' title 'train (minibatch)', \\\n"
       << "     " << gnuplot_quote(dir + "/loss_ema.csv") << " using 1:2 every ::1 with lines lw 2 lc rgb '#2c5d9f' title "
       << fmt::format("'train (EMA {:g})'", ema_weight) << ", \\\n"
       << "     " << csv_path << " using 1:($3 > 0 ? $3 : 1/0) every ::1 with linespoints lw 2 lc rgb '#c0392b' "
       << "title 'validation'\n";
    return run_gnuplot(dir + "/loss.gp", gp.str(), dir + "/loss.png", "loss curve");
}

// Under mpirun rank 0's stdout is a pseudo-terminal even when mpirun's own output goes to a file,
// so there one line per update is written, as in a log.
Progress::Progress(int first, int total)
    : first_(first), total_(total), tty_(::isatty(STDOUT_FILENO) && xgrad::distributed::world_size() == 1),
      start_(now_seconds()) {}

void Progress::update(int step, double loss, double lr, double val_loss, double val_per_char) {
    if (!std::isnan(val_loss)) {
        last_val_ = val_loss;
        last_val_per_char_ = std::isnan(val_per_char) ? -1 : val_per_char;
    }
    const double elapsed = now_seconds() - start_;
    const double rate = (step - first_) / std::max(elapsed, 1e-9);
    const double eta = (total_ - step) / std::max(rate, 1e-9);
    // On a terminal the line stays and shows the latest validation loss; in a log, only the
    // lines of an evaluation show one.
    const bool show_val = tty_ ? last_val_ >= 0 : !std::isnan(val_loss);
    std::string val = show_val ? fmt::format("  val {:.4f}", last_val_) : "";
    if (show_val && last_val_per_char_ >= 0) val += fmt::format(" ({:.4f} nats/char)", last_val_per_char_);
    const std::string line = fmt::format("step {:>6}/{}  loss {:.4f} nats  lr {:.2e}  {:>6.{}f} steps/s  ETA {:>4.0f} s{}",
                                         step, total_, loss, lr, rate, rate < 100 ? 2 : 0, eta, val);  // slow runs: 2 decimals
    if (tty_) fmt::print("\r{:<100}", line);
    else fmt::print("{}\n", line);
    std::fflush(stdout);  // a log file (nohup, > log, | tee) is block-buffered: each line now
}

void Progress::finish() {
    if (tty_) fmt::print("\n");
}

}  // namespace examples
