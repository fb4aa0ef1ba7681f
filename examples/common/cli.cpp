// examples/common/cli.cpp — strict numeric flags, the up-front checks, main's error handling
// (see cli.hpp).
#include "common/cli.hpp"

#include <sys/sysinfo.h>

#include <algorithm>
#include <charconv>
#include <cerrno>
#include <cmath>
#include <csignal>
#include <cstdio>
#include <optional>
#include <stdexcept>
#include <string_view>
#include <cstring>
#include <utility>

#include <fmt/format.h>

#include <xgrad/core/parse.hpp>
#include <xgrad/distributed/distributed.hpp>

namespace examples {

namespace {

// Adds `name` as a one-value option: `valid` checks the text before anything is assigned (CLI11
// runs an option's validators before its callback), then `assign` stores the value. Each
// refusal is CLI11's ValidationError, "<name>: <what valid returned>".
CLI::Option* add_checked(CLI::App& app, const std::string& name, const std::string& help,
                         std::function<std::string(const std::string&)> valid,
                         std::function<void(const std::string&)> assign, const std::string& type,
                         const std::string& range, const std::string& current) {
    CLI::Validator check([valid](std::string& text) { return valid(text); }, range);
    return app.add_option_function<std::string>(name, assign, help)->type_name(type)->default_str(current)->check(check);
}

template <class Int>
CLI::Option* add_int(CLI::App& app, const std::string& name, Int& value, std::int64_t lo, std::int64_t hi,
                     const std::string& help) {
    const std::string range = fmt::format("[{}, {}]", lo, hi);
    auto parse = [lo, hi](const std::string& text) -> std::optional<std::int64_t> {
        const std::optional<std::int64_t> v = xgrad::try_parse_int64(text);
        if (!v || *v < lo || *v > hi) return std::nullopt;
        return v;
    };
    return add_checked(
        app, name, help,
        [parse, range](const std::string& text) {
            if (parse(text)) return std::string();
            // A number the flag's range leaves out, or text that is not one number at all.
            return fmt::format(xgrad::try_parse_int64(text) ? "{} is outside {}" : "{} is not a decimal integer in {}",
                               xgrad::quoted_text(text), range);
        },
        [parse, &value](const std::string& text) { value = static_cast<Int>(*parse(text)); }, "INT", range,
        std::to_string(value));
}

// Strictly one decimal integer in [0, 2^64 − 1]. std::from_chars into an unsigned type is as
// strict as core/parse.hpp's try_parse_int64 (it takes no sign at all), and reaches 2^64 − 1.
std::optional<std::uint64_t> parse_uint64(std::string_view text) {
    std::uint64_t v = 0;
    const char* end = text.data() + text.size();
    const auto [ptr, ec] = std::from_chars(text.data(), end, v, 10);
    if (text.empty() || ec != std::errc() || ptr != end) return std::nullopt;
    return v;
}

bool inside(double v, const Interval& r) {
    const bool above = r.lo_open ? v > r.lo : v >= r.lo;
    const bool below = r.hi_open ? v < r.hi : v <= r.hi;
    return std::isfinite(v) && above && below;  // a NaN fails every comparison, but say so anyway
}

}  // namespace

CLI::Option* int_flag(CLI::App& app, const std::string& name, int& value, std::int64_t lo, std::int64_t hi,
                      const std::string& help) {
    return add_int(app, name, value, lo, hi, help);
}

CLI::Option* int_flag(CLI::App& app, const std::string& name, std::int64_t& value, std::int64_t lo,
                      std::int64_t hi, const std::string& help) {
    return add_int(app, name, value, lo, hi, help);
}

CLI::Option* seed_flag(CLI::App& app, const std::string& name, std::uint64_t& value, const std::string& help) {
    const std::string range = fmt::format("[0, {}]", UINT64_MAX);
    return add_checked(
        app, name, help,
        [range](const std::string& text) {
            if (parse_uint64(text)) return std::string();
            const bool digits =
                !text.empty() && std::all_of(text.begin(), text.end(), [](char c) { return c >= '0' && c <= '9'; });
            return fmt::format(digits ? "{} is outside {}" : "{} is not a decimal integer in {}", xgrad::quoted_text(text),
                               range);
        },
        [&value](const std::string& text) { value = *parse_uint64(text); }, "UINT", range, std::to_string(value));
}

CLI::Option* path_flag(CLI::App& app, const std::string& name, std::string& value, const std::string& help) {
    return add_checked(
        app, name, help,
        [](const std::string& text) {
            const bool control = std::any_of(text.begin(), text.end(), [](char c) {
                return static_cast<unsigned char>(c) < 0x20 || c == 0x7f;
            });
            return control ? fmt::format("{} holds a control character (newline, tab, ...): not allowed in a path",
                                         xgrad::quoted_text(text))
                           : std::string();
        },
        [&value](const std::string& text) { value = text; }, "PATH", "a path without control characters", value);
}

CLI::Option* checkpoint_flag(CLI::App& app, const std::string& name, std::string& value, const std::string& help) {
    CLI::Option* option = path_flag(app, name, value, help);
    option->check([](const std::string& text) {
        return text.empty() ? std::string("an empty path: give the checkpoint.safetensors to read") : std::string();
    });
    return option;
}

std::string describe(const Interval& r) {
    if (std::isinf(r.hi)) return fmt::format("{} {}", r.lo_open ? ">" : ">=", r.lo);
    return fmt::format("in {}{}, {}{}", r.lo_open ? "(" : "[", r.lo, r.hi, r.hi_open ? ")" : "]");
}

CLI::Option* real_flag(CLI::App& app, const std::string& name, double& value, Interval range, const std::string& help) {
    const std::string want = "a finite number " + describe(range);
    return add_checked(
        app, name, help,
        [range, want](const std::string& text) {
            const std::optional<double> v = xgrad::try_parse_double(text);
            return v && inside(*v, range) ? std::string() : fmt::format("{} is not {}", xgrad::quoted_text(text), want);
        },
        [&value](const std::string& text) { value = *xgrad::try_parse_double(text); }, "REAL", describe(range),
        fmt::format("{}", value));
}

void require(bool ok, const std::string& message) {
    if (!ok) throw std::invalid_argument(message);
}

std::string human_size(double bytes) {
    const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};
    int u = 0;
    while (bytes >= 1024 && u < 6) bytes /= 1024, ++u;
    if (u == 0) return fmt::format("{:.0f} B", bytes);
    return bytes < 1e4 ? fmt::format("{:.1f} {}", bytes, units[u]) : fmt::format("{:.1e} {}", bytes, units[u]);
}

void check_memory(const std::vector<MemoryNeed>& needs, const std::string& flags) {
    struct sysinfo info {};
    if (sysinfo(&info) != 0) return;  // no figure to compare with: leave it to the allocator
    const double machine = (double(info.totalram) + double(info.totalswap)) * double(info.mem_unit);
    double total = 0;
    for (const MemoryNeed& n : needs) total += n.bytes;
    if (total <= machine) return;
    std::string lines;
    for (const MemoryNeed& n : needs) lines += fmt::format("\n  {:>10}  {}", human_size(n.bytes), n.what);
    throw std::invalid_argument(fmt::format("this run needs at least {} at once, more than this machine's {} of memory "
                                            "(RAM and swap):{}\nlower {}",
                                            human_size(total), human_size(machine), lines, flags));
}

// Errors go to stderr through fputs, which reports a failed write by its return value: fmt::print
// throws, and a second exception while one is handled (stderr on a full disk) would end the
// process in std::terminate.
namespace {
template <class... Args>
void eprint(fmt::format_string<Args...> format, Args&&... args) {
    std::fputs(fmt::format(format, std::forward<Args>(args)...).c_str(), stderr);
}
}  // namespace

int parse_and_run(CLI::App& app, const char* program, int argc, char** argv, const std::function<int()>& run) {
    namespace dist = xgrad::distributed;
    std::string parse_error;  // empty: parsed
    int parse_status = 0;
    try {
        app.parse(argc, argv);
    } catch (const CLI::ParseError& e) {
        parse_status = e.get_exit_code() == 0 ? 0 : 1;
        parse_error = e.get_exit_code() == 0 ? "--help" : e.what();
        if (dist::world_size() == 1) {
            if (e.get_exit_code() == 0) return app.exit(e);
            eprint("{}: error: {}\n(--help lists every flag with its unit and range)\n", program, e.what());
            return 1;
        }
        if (dist::rank() == 0 && e.get_exit_code() == 0) app.exit(e);
    }
    if (dist::world_size() > 1) {
        // mpirun usually gives every rank the same command line, so every rank returns the same
        // status and rank 0 alone says why. Ranks whose command lines parse differently (mpirun's
        // "-np 1 A : -np 1 B") would leave some waiting in the first collective: they all stop.
        try {
            dist::check_same_on_all_ranks(std::string(program) + ": command line",
                                          parse_error.empty() ? "parsed" : "error: " + parse_error);
        } catch (const std::exception& e) {
            eprint("{}: error on rank {} of {}: {}{}\n", program, dist::rank(), dist::world_size(),
                       parse_error.empty() ? "" : parse_error + "; ", e.what());
            dist::abort(1);
        }
        if (!parse_error.empty()) {
            if (dist::rank() == 0 && parse_status != 0)
                eprint("{}: error: {}\n(--help lists every flag with its unit and range)\n", program,
                           parse_error);
            return parse_status;
        }
    }
    // A file-size limit (ulimit -f) as a full disk: the write fails with EFBIG, and the run names
    // what it could not write, where SIGXFSZ's default action would end it with no word (gnuplot,
    // which draws the pictures, inherits SIG_IGN).
    std::signal(SIGXFSZ, SIG_IGN);
    // A standard output that could not be written (a full disk) fails the run.
    try {
        const int status = run();
        if (std::fflush(stdout) == 0 && !std::ferror(stdout)) return status;
        eprint("{}: error: the standard output could not be written ({})\n", program, std::strerror(errno));
        return 1;
    } catch (const std::exception& e) {
        std::fflush(stdout);  // what was printed so far comes before the error
        if (dist::world_size() == 1) {
            eprint("{}: error: {}\n", program, e.what());
            return 1;
        }
        // The other ranks may be waiting for this one in a collective, and would wait forever:
        // MPI_Abort ends every rank of the run, and mpirun exits non-zero.
        eprint("{}: error on rank {} of {}: {}\n", program, dist::rank(), dist::world_size(), e.what());
        dist::abort(1);
    }
}

}  // namespace examples
