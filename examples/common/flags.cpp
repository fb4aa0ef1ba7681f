// examples/common/flags.cpp — the flag table: each row registers its CLI11 option and remembers
// how to read its value back (flags.hpp).
#include "common/flags.hpp"

#include <stdexcept>

#include <fmt/format.h>

namespace examples {

CLI::Option* FlagTable::add(CLI::Option* option, const std::string& name, unsigned role,
                            std::function<std::string()> value, bool is_switch) {
    rows_.push_back({name, role, std::move(value), option, nullptr, is_switch});
    return option;
}

CLI::Option* FlagTable::integer(const std::string& name, int& v, std::int64_t lo, std::int64_t hi,
                                const std::string& help, unsigned role) {
    return add(int_flag(app_, name, v, lo, hi, help), name, role, [&v] { return std::to_string(v); });
}

CLI::Option* FlagTable::integer(const std::string& name, std::int64_t& v, std::int64_t lo, std::int64_t hi,
                                const std::string& help, unsigned role) {
    return add(int_flag(app_, name, v, lo, hi, help), name, role, [&v] { return std::to_string(v); });
}

CLI::Option* FlagTable::real(const std::string& name, double& v, Interval range, const std::string& help,
                             unsigned role) {
    return add(real_flag(app_, name, v, range, help), name, role, [&v] { return fmt::format("{}", v); });
}

CLI::Option* FlagTable::seed(const std::string& name, std::uint64_t& v, const std::string& help, unsigned role) {
    return add(seed_flag(app_, name, v, help), name, role, [&v] { return std::to_string(v); });
}

CLI::Option* FlagTable::choice(const std::string& name, std::string& v, const std::vector<std::string>& choices,
                               const std::string& help, unsigned role) {
    CLI::Option* o = app_.add_option(name, v, help)->capture_default_str()->check(CLI::IsMember(choices));
    return add(o, name, role, [&v] { return v; });
}

CLI::Option* FlagTable::text(const std::string& name, std::string& v, const std::string& help, unsigned role) {
    return add(app_.add_option(name, v, help)->capture_default_str(), name, role, [&v] { return v; });
}

CLI::Option* FlagTable::path(const std::string& name, std::string& v, const std::string& help, unsigned role) {
    return add(path_flag(app_, name, v, help), name, role, [&v] { return v; });
}

CLI::Option* FlagTable::checkpoint(const std::string& name, std::string& v, const std::string& help) {
    return add(checkpoint_flag(app_, name, v, help), name, kFree, [&v] { return v; });
}

CLI::Option* FlagTable::flag(const std::string& name, bool& v, const std::string& help, unsigned role) {
    return add(app_.add_flag(name, v, help), name, role, [&v] { return v ? "true" : "false"; }, /*is_switch=*/true);
}

std::size_t FlagTable::index_of(const std::string& name) const {
    for (std::size_t i = 0; i < rows_.size(); ++i)
        if (rows_[i].name == name) return i;
    throw std::logic_error("FlagTable: no flag " + name + " in the table");
}

void FlagTable::only_when(const std::string& name, std::function<bool()> when) {
    rows_[index_of(name)].when = std::move(when);
}

bool FlagTable::given(const std::string& name) const { return rows_[index_of(name)].option->count() > 0; }

RunFlags FlagTable::values(unsigned role) const {
    RunFlags out;
    for (const Row& r : rows_)
        if ((r.role & role) == role && role != kFree && (!r.when || r.when())) out[r.name] = r.value();
    return out;
}

std::vector<std::string> FlagTable::args_of(const RunFlags& values) const {
    std::vector<std::string> args;
    for (const Row& r : rows_) {
        const auto it = values.find(r.name);
        if (it == values.end()) continue;
        if (!r.is_switch) args.insert(args.end(), {r.name, it->second});
        else if (it->second == "true") args.push_back(r.name);
    }
    return args;
}

std::string FlagTable::names_with(unsigned role) const {
    std::string out;
    for (const Row& r : rows_)
        if ((r.role & role) == role) out += (out.empty() ? "" : ", ") + r.name;
    return out;
}

std::string FlagTable::names_without(unsigned role) const {
    std::string out;
    for (const Row& r : rows_)
        if ((r.role & role) != role) out += (out.empty() ? "" : ", ") + r.name;
    return out;
}

}  // namespace examples
