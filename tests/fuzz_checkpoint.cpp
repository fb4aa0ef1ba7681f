// tests/fuzz_checkpoint.cpp — a seeded fuzzer for checkpoint loading (`make fuzz`).
//
// It builds a real checkpoint, the kind `make run` writes (examples/char_mlp: the model's
// parameters, AdamW's exp_avg and exp_avg_sq, step counts, lrs, options, the batch sampler's
// rng state and the run's flags, in one safetensors file), then loads altered copies of it into
// the live model and optimizer, in two phases:
//
//   1. every bit of the header (file bytes [0, 8+N): the length and the JSON), flipped alone;
//   2. --iterations random mutants, each of 1 to 4 mutations (bit flips, random bytes, tokens in
//      place of numbers, insertions, deletions, truncation, a wrong length). Every other mutant is
//      stamped with a valid checksum again, as a buggy writer would, so that it reaches the parser.
//
// After every load it checks:
//   - a load either succeeds or throws one of xgrad's documented errors (ValueError, IndexError,
//     std::runtime_error); anything else (std::bad_alloc, a JSON library exception, a crash, a
//     sanitizer report) is a bug;
//   - a refused load leaves the model, the optimizer and the rng bit-identical;
//   - a file whose checksum no longer matches (phase 1, the unstamped mutants) is refused or loads
//     a bit-identical state (model, optimizer, rng and step): anything else is a silent change,
//     which the checksum over header and data (nn/serialize.hpp) exists to prevent.
//
// Built in the ASan + UBSan tree (build-asan/, as `make sanitize`), every out-of-bounds read,
// overflow or leak on the way aborts the run. The mutations are seeded (std::mt19937_64), so a
// failing iteration is reproduced by rerunning with the same --seed; --keep writes it to disk.
//
// Usage: fuzz_checkpoint [--iterations N] [--seed S] [--dir D] [--keep]
//   N random mutants (default 20,000), seed S (default 1), files in a fresh subdirectory of D
//   (default /dev/shm), kept afterwards with --keep.
// Prints the counts of each phase; exits 1 on the first violation.
#include <sys/types.h>
#include <unistd.h>

#include <cctype>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <random>
#include <stdexcept>
#include <string>
#include <typeinfo>
#include <vector>

#include <fmt/format.h>

#include "char_mlp/model.hpp"     // the model whose checkpoints are mutated
#include "common/checkpoint.hpp"  // save_checkpoint / load_checkpoint under test
#include <xgrad/core/parse.hpp>
#include <xgrad/optim/optim.hpp>

using namespace xgrad;
namespace fs = std::filesystem;

namespace {

[[noreturn]] void fail(const std::string& what) {
    fmt::print(stderr, "fuzz_checkpoint: FAILED: {}\n", what);
    std::exit(1);
}

std::string read_file(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    if (!in) fail("cannot read " + path);
    return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

void write_file(const std::string& path, const std::string& bytes) {
    std::ofstream out(path, std::ios::binary | std::ios::trunc);
    out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
    if (!out) fail("cannot write " + path);
}

// ---- the checksum, written again from its definition in nn/serialize.hpp -------------------------
// CRC-32 (reflected polynomial 0xEDB88320, initial and final XOR 0xFFFFFFFF, as zlib) of every
// byte of the file but the 8 hex digits at bytes [40, 48), which follow this prefix at byte 8.
const std::string kStampPrefix = R"({"__metadata__":{"xgrad.crc32":")";

// Gives a mutant a valid checksum again; false if its prefix is damaged (nothing to stamp).
bool restamp(std::string& b) {
    if (b.size() < 49 || b.compare(8, kStampPrefix.size(), kStampPrefix) != 0) return false;
    std::uint32_t crc = 0xFFFFFFFFu;
    for (std::size_t i = 0; i < b.size(); i = i + 1 == 40 ? 48 : i + 1) {
        crc ^= static_cast<unsigned char>(b[i]);
        for (int k = 0; k < 8; ++k) crc = (crc >> 1) ^ (0xEDB88320u & (0u - (crc & 1u)));
    }
    b.replace(40, 8, fmt::format("{:08x}", ~crc));
    return true;
}

// Everything a load may change, copied bit for bit.
struct State {
    std::vector<Array> params;
    optim::OptimizerState optimizer;  // a deep copy (Optimizer::state_dict)
    std::mt19937_64 rng;
    int step = 0;
};

State capture(const char_mlp::CharMLP& model, const optim::Optimizer& opt, const std::mt19937_64& rng, int step) {
    State s;
    for (const auto& [_, p] : model.named_parameters()) s.params.push_back(p.data());
    s.optimizer = opt.state_dict();
    s.rng = rng;
    s.step = step;
    return s;
}

bool same_bits(const Array& a, const Array& b) {
    return a.shape() == b.shape() && std::memcmp(a.data(), b.data(), a.size() * sizeof(real)) == 0;
}

// "" if equal, else what differs.
std::string difference(const State& a, const State& b) {
    for (std::size_t i = 0; i < a.params.size(); ++i)
        if (!same_bits(a.params[i], b.params[i])) return fmt::format("model parameter {} changed", i);
    if (a.optimizer.metadata != b.optimizer.metadata) return "optimizer metadata changed";
    if (a.optimizer.tensors.size() != b.optimizer.tensors.size()) return "optimizer tensor count changed";
    for (std::size_t i = 0; i < a.optimizer.tensors.size(); ++i)
        if (a.optimizer.tensors[i].first != b.optimizer.tensors[i].first ||
            !same_bits(a.optimizer.tensors[i].second.data(), b.optimizer.tensors[i].second.data()))
            return "optimizer tensor " + a.optimizer.tensors[i].first + " changed";
    if (!(a.rng == b.rng)) return "rng state changed";
    if (a.step != b.step) return fmt::format("step changed from {} to {}", a.step, b.step);
    return "";
}

// ---- mutations ---------------------------------------------------------------------------------
// Texts that probe the parsers: integer and float limits, other spellings, JSON structure.
const std::vector<std::string> kTokens = {
    "0", "-1", "1", "2", "8", "-0", "9223372036854775807", "9223372036854775808", "18446744073709551615",
    "18446744073709551616", "4611686018427387904", "4294967296", "2147483648", "9007199254740993",
    "1e3", "1e999", "-1e999", "0x10", "+1", " 1", "1 ", "nan", "inf", "1.5", "5abc", "\"\"", "null",
    "true", "[]", "{}", "[0,0]", "[1,2,3]", "\"F32\"", "\"F64\"", "\"I64\"", "\"F16\"", "\\u0000",
    std::string("\0", 1), "\xff", "\"__metadata__\"", ",", ":", "{", "}", "[", "]", "\"", "\\"};

struct Mutator {
    std::mt19937_64 rng;
    std::size_t below(std::size_t n) { return n == 0 ? 0 : std::uniform_int_distribution<std::size_t>(0, n - 1)(rng); }

    // One mutation of `b`, whose header spans bytes [8, 8 + n) of the original file.
    // Returns true if it touched the data section only.
    bool mutate(std::string& b, std::size_t header_end) {
        const std::size_t kind = below(11);
        const bool in_header = header_end <= b.size() && header_end > 8;
        auto header_pos = [&] { return in_header ? 8 + below(header_end - 8) : below(b.size()); };
        switch (kind) {
        case 0: {  // flip one bit anywhere
            if (b.empty()) return false;
            const std::size_t i = below(b.size());
            b[i] = static_cast<char>(b[i] ^ (1 << below(8)));
            return false;
        }
        case 1: {  // flip one bit in the data section only
            if (!in_header || header_end >= b.size()) return false;
            const std::size_t i = header_end + below(b.size() - header_end);
            b[i] = static_cast<char>(b[i] ^ (1 << below(8)));
            return true;
        }
        case 2: {  // a random byte in the header
            if (b.empty()) return false;
            b[header_pos()] = static_cast<char>(below(256));
            return false;
        }
        case 3:    // replace a run of digits (a size, an offset, a step count, an lr) by a token
        case 4: {
            if (b.empty()) return false;
            std::size_t i = header_pos();
            while (i < b.size() && !std::isdigit(static_cast<unsigned char>(b[i]))) ++i;
            std::size_t j = i;
            while (j < b.size() && (std::isdigit(static_cast<unsigned char>(b[j])) || b[j] == '.' || b[j] == 'e' || b[j] == '-')) ++j;
            b.replace(std::min(i, b.size()), j - std::min(i, j), kTokens[below(kTokens.size())]);
            return false;
        }
        case 5: {  // insert a token into the header
            b.insert(std::min(header_pos(), b.size()), kTokens[below(kTokens.size())]);
            return false;
        }
        case 6: {  // delete a range
            if (b.empty()) return false;
            const std::size_t i = below(b.size());
            b.erase(i, 1 + below(std::min<std::size_t>(64, b.size() - i)));
            return false;
        }
        case 7: {  // truncate
            b.resize(below(b.size() + 1));
            return false;
        }
        case 8: {  // the header length: off by a little, or absurd
            if (b.size() < 8) return false;
            std::uint64_t n;
            std::memcpy(&n, b.data(), 8);
            const std::uint64_t choices[] = {n + 1, n - 1, n + 8, n - 8, 0, 1, ~std::uint64_t(0), 1ull << 62,
                                             static_cast<std::uint64_t>(b.size()), 100'000'001};
            n = choices[below(std::size(choices))];
            std::memcpy(b.data(), &n, 8);
            return false;
        }
        case 9: {  // copy a chunk of the header over another place in it
            if (!in_header) return false;
            const std::size_t from = header_pos(), to = header_pos();
            const std::size_t len = 1 + below(32);
            if (from + len <= b.size() && to + len <= b.size()) b.replace(to, len, b.substr(from, len));
            return false;
        }
        default: {  // swap two bytes of the header
            if (!in_header) return false;
            std::swap(b[header_pos()], b[header_pos()]);
            return false;
        }
        }
    }
};

// The live model, optimizer and rng, the pristine checkpoint and the state it holds.
struct Harness {
    char_mlp::CharMLP& model;
    optim::Optimizer& opt;
    std::mt19937_64& rng;
    const examples::RunFlags& flags;
    std::string dir, pristine_path, mutant_path;
    State reference;
    bool keep;

    // Loads `bytes`. Returns the error type ("" if it loaded) and sets `changed` to how the state
    // differs from the reference ("" if bit-identical). A refused load must change nothing; a
    // loaded one is compared, then the pristine state is loaded again.
    std::string load(const std::string& bytes, const std::string& label, std::string& changed) {
        write_file(mutant_path, bytes);
        std::string type, error;
        int step = reference.step;
        try {
            step = examples::load_checkpoint(mutant_path, model, opt, rng, flags);
        } catch (const ValueError& e) {
            type = "ValueError", error = e.what();
        } catch (const IndexError& e) {
            type = "IndexError", error = e.what();
        } catch (const std::runtime_error& e) {
            type = "runtime_error", error = e.what();
        } catch (const std::exception& e) {
            failure(bytes, label, fmt::format("an undocumented exception ({}): {}", typeid(e).name(), e.what()));
        }
        changed = difference(reference, capture(model, opt, rng, step));
        if (!type.empty() && !changed.empty()) failure(bytes, label, changed + " after a refused load (" + error + ")");
        if (type.empty()) {
            examples::load_checkpoint(pristine_path, model, opt, rng, flags);
            const std::string again = difference(reference, capture(model, opt, rng, reference.step));
            if (!again.empty()) failure(bytes, label, again + " after reloading the pristine file");
        }
        return type;
    }

    [[noreturn]] void failure(const std::string& bytes, const std::string& label, const std::string& what) {
        if (keep) write_file(dir + "/failure-" + label + ".safetensors", bytes);
        fail(label + ": " + what);
    }
};

bool parse_flag(int& i, int argc, char** argv, const char* name, std::string& value) {
    if (std::strcmp(argv[i], name) != 0) return false;
    if (i + 1 >= argc) fail(std::string(name) + " needs a value");
    value = argv[++i];
    return true;
}

double seconds_since(std::chrono::steady_clock::time_point t0) {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

// Phase 1: every bit of bytes [0, header_end), flipped alone. A flip must be refused or load the
// reference state bit for bit; the counts are printed, and a silent change fails the run.
void flip_every_header_bit(Harness& h, const std::string& pristine, std::size_t header_end) {
    std::int64_t flips = 0, refused = 0, identical = 0;
    const auto t0 = std::chrono::steady_clock::now();
    for (std::size_t i = 0; i < header_end; ++i)
        for (int bit = 0; bit < 8; ++bit) {
            std::string bytes = pristine;
            bytes[i] = static_cast<char>(bytes[i] ^ (1 << bit));
            std::string changed;
            const std::string label = fmt::format("flip-byte{}-bit{}", i, bit);
            ++flips;
            if (!h.load(bytes, label, changed).empty()) ++refused;
            else if (changed.empty()) ++identical;
            else h.failure(bytes, label, "a silent change: " + changed + " after a successful load");
        }
    fmt::print("fuzz_checkpoint: every header bit (bytes [0, {})) of a {}-byte char_mlp checkpoint in {:.1f} s: "
               "{} flips, {} refused, {} loaded bit-identical, 0 silent changes\n",
               header_end, pristine.size(), seconds_since(t0), flips, refused, identical);
}

// Phase 2: `iterations` seeded mutants, every other one stamped with a valid checksum.
void mutate_at_random(Harness& h, const std::string& pristine, std::size_t header_end, std::int64_t iterations,
                      std::uint64_t seed) {
    Mutator mutator{std::mt19937_64(seed)};
    std::map<std::string, std::int64_t> refused;  // by exception type
    std::int64_t stamped = 0, stamped_loaded = 0, stale_identical = 0, data_only = 0;
    const auto t0 = std::chrono::steady_clock::now();
    for (std::int64_t it = 0, loads = 0; loads < iterations; ++it) {
        std::string bytes = pristine;
        const std::size_t count = 1 + mutator.below(4);
        bool only_data = true;
        for (std::size_t m = 0; m < count; ++m) only_data = mutator.mutate(bytes, header_end) && only_data;
        const bool stamp = it % 2 == 1 && restamp(bytes);
        if (bytes == pristine) continue;  // e.g. two swaps that cancel: not a mutated load
        ++loads;
        std::string changed;
        const std::string label = fmt::format("iteration{}", it);
        const std::string type = h.load(bytes, label, changed);
        if (!type.empty()) ++refused[type];
        if (stamp) {
            ++stamped;
            stamped_loaded += type.empty();  // e.g. a changed lr digit, checksum and all: legal
        } else if (type.empty()) {
            if (!changed.empty()) h.failure(bytes, label, "a silent change: " + changed + " after a successful load");
            ++stale_identical;
        }
        data_only += !stamp && only_data;
        if (loads % 5000 == 0) {
            fmt::print("fuzz_checkpoint: {} mutants, {:.1f} s\n", loads, seconds_since(t0));
            std::fflush(stdout);
        }
    }
    std::int64_t total_refused = 0;
    std::string by_type;
    for (const auto& [type, k] : refused) {
        total_refused += k;
        by_type += fmt::format(" {} {}", type, k);
    }
    fmt::print("fuzz_checkpoint: {} random mutants (seed {}) in {:.1f} s: {} refused ({} ); {} with a stale "
               "checksum ({} of them in the data only), of which {} loaded bit-identical and 0 changed anything; "
               "{} re-stamped, of which {} loaded; the model, optimizer and rng were bit-identical after every "
               "refused load\n",
               iterations, seed, seconds_since(t0), total_refused, by_type, iterations - stamped, data_only,
               stale_identical, stamped, stamped_loaded);
}

}  // namespace

int main(int argc, char** argv) {
    std::int64_t iterations = 20000;
    std::uint64_t seed = 1;
    // Files go to a fresh subdirectory of --dir; by default of /dev/shm (memory): a file rewritten
    // per load on a disk filesystem costs a flush of the truncated file each time.
    std::error_code ec;
    fs::path parent = fs::is_directory("/dev/shm", ec) ? fs::path("/dev/shm") : fs::temp_directory_path();
    bool keep = false;
    for (int i = 1; i < argc; ++i) {
        std::string v;
        if (parse_flag(i, argc, argv, "--iterations", v)) iterations = parse_int64(v, "fuzz_checkpoint", "--iterations", 1, INT64_MAX);
        else if (parse_flag(i, argc, argv, "--seed", v)) seed = static_cast<std::uint64_t>(parse_int64(v, "fuzz_checkpoint", "--seed", 0, INT64_MAX));
        else if (parse_flag(i, argc, argv, "--dir", v)) parent = v;
        else if (std::strcmp(argv[i], "--keep") == 0) keep = true;
        else fail(fmt::format("unknown argument '{}' (usage: fuzz_checkpoint [--iterations N] [--seed S] [--dir D] [--keep])", argv[i]));
    }
    const std::string dir = (parent / ("xgrad_fuzz_" + std::to_string(::getpid()))).string();
    fs::create_directories(dir);

    // A small char_mlp (V 27, block 3, d 4, hidden 8: 343 parameters), three AdamW steps so the
    // optimizer has state, saved as the main job saves it.
    manual_seed(seed);
    char_mlp::CharMLP model(27, 3, 4, 8);
    optim::AdamW opt(model.named_parameters(), optim::AdamWOptions(3e-3));
    std::mt19937_64 batch_rng(seed);
    for (int step = 0; step < 3; ++step) {
        IndexTensor x({{1, 2, 3}, {4, 5, 6}, {0, 0, 7}});
        IndexTensor y({4, 7, 1});
        Tensor loss = nn::functional::cross_entropy(model.forward(x), y);
        opt.zero_grad();
        loss.backward();
        opt.step();
    }
    const examples::RunFlags flags{{"--steps", "100"}, {"--lr", "0.003"}, {"--data", "/usr/share/dict/words"}};
    Harness h{model, opt, batch_rng, flags, dir, dir + "/pristine.safetensors", dir + "/mutant.safetensors", {}, keep};
    examples::save_checkpoint(h.pristine_path, model, opt, 3, batch_rng, flags);
    h.reference = capture(model, opt, batch_rng, 3);
    const std::string pristine = read_file(h.pristine_path);
    std::uint64_t n = 0;
    std::memcpy(&n, pristine.data(), 8);
    const std::size_t header_end = 8 + n;
    std::string stamped = pristine;
    if (!restamp(stamped) || stamped != pristine) fail("the checksum written here differs from nn/serialize.hpp's");

    flip_every_header_bit(h, pristine, header_end);
    mutate_at_random(h, pristine, header_end, iterations, seed);
    if (!keep) fs::remove_all(dir);
    return 0;
}
