// examples/common/cli.hpp — the examples' command lines: strict numeric flags, the checks that
// run before any data is read or any step is taken, and main's error handling.
//
// CLI11 on its own reads "0x10" as 16, wraps "-1" into an unsigned seed as 2^64 − 1, and lets
// NaN through CLI::Range (every comparison with NaN is false, so NaN is never "out of range").
// The flags below read their text with xgrad's strict parsers (core/parse.hpp: decimal only, no
// '+', no spaces, no trailing characters) and require a finite value inside a stated range.
// A refusal names the flag, the text and the range, e.g.
//     gpt: error: --grad-clip: 'nan' is not a finite number >= 0
//     gpt: error: --steps: '0x10' is not a decimal integer in [1, 2147483647]
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

namespace examples {

// ---- numeric flags ------------------------------------------------------------------------------
// An integer flag in [lo, hi]. The help shows the range and the current value as the default.
CLI::Option* int_flag(CLI::App& app, const std::string& name, int& value, std::int64_t lo, std::int64_t hi,
                      const std::string& help);
CLI::Option* int_flag(CLI::App& app, const std::string& name, std::int64_t& value, std::int64_t lo,
                      std::int64_t hi, const std::string& help);

// A seed: a decimal integer in [0, 2^64 − 1] (std::mt19937_64 takes all 64 bits).
CLI::Option* seed_flag(CLI::App& app, const std::string& name, std::uint64_t& value, const std::string& help);

// An interval of the real line; an open end excludes its bound, hi = inf means no upper bound.
struct Interval {
    double lo, hi;
    bool lo_open = false, hi_open = false;
};
// A real flag: a finite number (decimal or scientific, as "0.001" or "1e-3") inside `range`.
CLI::Option* real_flag(CLI::App& app, const std::string& name, double& value, Interval range,
                       const std::string& help);

// A path flag (--out, whose paths go into gnuplot scripts): any byte but the control characters (newline, CR, tab,
// ..., 0x00-0x1f and 0x7f), which the gnuplot scripts could not quote: a newline there would end
// the script's line and start a command of the path's choosing.
CLI::Option* path_flag(CLI::App& app, const std::string& name, std::string& value, const std::string& help);

// A checkpoint to read (--resume, --init-from): a path_flag that is also refused when empty, so a
// script whose variable expands to nothing does not start a fresh run unnoticed.
CLI::Option* checkpoint_flag(CLI::App& app, const std::string& name, std::string& value, const std::string& help);

// The text of `range` as the messages print it: ">= 0", "> 0", "in [0, 1)".
std::string describe(const Interval& range);

// ---- checks before the run -------------------------------------------------------------------------
// Throws std::invalid_argument with `message` (which should name the flags involved) unless ok.
void require(bool ok, const std::string& message);

// One block of memory a run must hold at once, in bytes (a double: a product of flags such as
// B·T·4d·L·4 may not fit in 64 bits, and only its size matters here).
struct MemoryNeed {
    std::string what;  // e.g. "the MLP activations L·B·T·4d"
    double bytes;
};
// Throws std::invalid_argument listing every need when their sum exceeds the machine's memory
// (RAM plus swap, from sysinfo(2)); `flags` names the flags that set the sizes. The needs are
// lower bounds: a run they reject could never finish, and a run they admit can still exhaust
// memory, which the allocator then reports with the size it asked for.
void check_memory(const std::vector<MemoryNeed>& needs, const std::string& flags);

// `bytes` in binary units: "512 B", "1.5 KiB", "3.2 GiB", "2.0e+06 TiB".
std::string human_size(double bytes);

// ---- main -----------------------------------------------------------------------------------------------
// Parses the command line, then returns run()'s exit status. A parse error (an unknown flag, a
// refused value) or any std::exception thrown by run() is printed to stderr as
// "<program>: error: <what>" and gives exit status 1 (--help prints the help and returns 0).
// Under mpirun (distributed::world_size() > 1) rank 0 alone prints a parse error or the help, and
// every rank returns the same status; ranks whose command lines parse differently (one fails,
// another does not) print why and end every rank; an exception from run() on any rank is printed as
// "<program>: error on rank r of W: <what>", then distributed::abort(1) ends every rank of the run.
// Before run() it sets SIGXFSZ to SIG_IGN: a write past a file-size limit (ulimit -f) fails with
// EFBIG, as on a full disk, and is reported, instead of ending the process.
int parse_and_run(CLI::App& app, const char* program, int argc, char** argv, const std::function<int()>& run);

}  // namespace examples
