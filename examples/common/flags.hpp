// examples/common/flags.hpp — an example's flags as one table: each row is a flag's name, the
// variable it sets (whose value before parsing is the default), its range or choices, its help,
// and which runs must agree on it. The command line and the checkpoint's checks are built from the
// same rows, so a new flag is one row.
//
//   roles (bits; a row may have several)
//     kRanks    every rank of an mpirun must have the same value (data_parallel.hpp: check_same_run)
//     kResume   --resume must repeat the saved value: it shapes the trajectory (kResume ⊃ kRanks)
//     kModel    --init-from must match the saved value: it shapes the model (kModel ⊃ kResume)
// A flag with none of them (--threads, --out, --sample, ...) may change between runs.
// The values are recorded as text: integers and reals as fmt's "{}" writes them ("0.001"), a
// switch as "true" or "false", a choice or a path as given.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "common/checkpoint.hpp"  // RunFlags
#include "common/cli.hpp"         // Interval, the strict numeric parsers

namespace examples {

enum FlagRole : unsigned { kFree = 0, kRanks = 1, kResume = 2 | kRanks, kModel = 4 | kResume };

class FlagTable {
public:
    explicit FlagTable(CLI::App& app) : app_(app) {}

    // An integer in [lo, hi], a real in `range`, a seed in [0, 2^64 − 1] (cli.hpp's strict parsers).
    CLI::Option* integer(const std::string& name, int& value, std::int64_t lo, std::int64_t hi,
                         const std::string& help, unsigned role = kFree);
    CLI::Option* integer(const std::string& name, std::int64_t& value, std::int64_t lo, std::int64_t hi,
                         const std::string& help, unsigned role = kFree);
    CLI::Option* real(const std::string& name, double& value, Interval range, const std::string& help,
                      unsigned role = kFree);
    CLI::Option* seed(const std::string& name, std::uint64_t& value, const std::string& help, unsigned role = kFree);
    // One of `choices`; any text; a path (no control characters); a checkpoint to read (a
    // non-empty path); a switch (present: true).
    CLI::Option* choice(const std::string& name, std::string& value, const std::vector<std::string>& choices,
                        const std::string& help, unsigned role = kFree);
    CLI::Option* text(const std::string& name, std::string& value, const std::string& help, unsigned role = kFree);
    CLI::Option* path(const std::string& name, std::string& value, const std::string& help, unsigned role = kFree);
    CLI::Option* checkpoint(const std::string& name, std::string& value, const std::string& help);
    CLI::Option* flag(const std::string& name, bool& value, const std::string& help, unsigned role = kFree);

    // The row `name` is recorded only while `when` holds (e.g. --vocab-size with --tokenizer bpe).
    // Throws std::logic_error for a name not in the table.
    void only_when(const std::string& name, std::function<bool()> when);
    // Whether the flag was given on the command line. Throws std::logic_error for an unknown name.
    bool given(const std::string& name) const;

    // Every flag whose role includes all of `role`'s bits, with its value now: e.g. values(kResume)
    // for the checkpoint, values(kModel) for --init-from's check.
    RunFlags values(unsigned role) const;
    // The command line that sets each flag of `values` (as values() records them) as recorded: a
    // switch's name when "true", else the name and the value; names not in the table are skipped.
    // Parsed with CLI::App::parse, it rebuilds a saved run's settings (gpt_sample's model).
    std::vector<std::string> args_of(const RunFlags& values) const;

    // The names of the flags whose role has (lacks) all of `role`'s bits, in table order,
    // comma-separated: for the help of --resume (what it may change) and --init-from (what must match).
    std::string names_with(unsigned role) const;
    std::string names_without(unsigned role) const;

private:
    struct Row {
        std::string name;
        unsigned role;
        std::function<std::string()> value;
        CLI::Option* option;
        std::function<bool()> when;
        bool is_switch;
    };
    CLI::Option* add(CLI::Option* option, const std::string& name, unsigned role, std::function<std::string()> value,
                     bool is_switch = false);
    std::size_t index_of(const std::string& name) const;

    CLI::App& app_;
    std::vector<Row> rows_;
};

}  // namespace examples
