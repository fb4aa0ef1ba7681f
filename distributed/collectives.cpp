// distributed/collectives.cpp — broadcast, all_reduce and all_gather on tensors, row-sparse
// gradients and plain values, built on the byte-level transport of distributed/backend.hpp.
//
// Each tensor collective is two rounds: an all-gather of one 64-bit hash of (the collective, its
// root, the shape) from every rank, then the data. When the hashes differ, every rank knows it
// from the same first round and throws the same error, so no rank is left waiting in MPI, and MPI
// never receives buffers of different sizes (undefined behaviour in MPI).
#include <xgrad/distributed/distributed.hpp>

#include <cstdlib>
#include <type_traits>

#include <fmt/format.h>

#include <xgrad/core/error.hpp>
#include <xgrad/distributed/backend.hpp>

namespace xgrad::distributed {

namespace {

constexpr backend::Number kReal = std::is_same_v<real, float> ? backend::Number::Float : backend::Number::Double;

// FNV-1a, 64 bits (Fowler, Noll, Vo): h = 14695981039346656037; for each byte b: h = (h xor b) · 1099511628211.
std::uint64_t fnv1a64(const std::string& bytes) {
    std::uint64_t h = 14695981039346656037ull;
    for (unsigned char b : bytes) h = (h ^ b) * 1099511628211ull;
    return h;
}

// Every rank's string, in rank order (two rounds: the lengths, then the bytes).
std::vector<std::string> gather_strings(const std::string& mine) {
    const int W = backend::size();
    std::vector<std::uint64_t> lengths(static_cast<std::size_t>(W));
    const std::uint64_t n = mine.size();
    backend::all_gather(&n, sizeof n, lengths.data());
    std::vector<std::size_t> counts(lengths.begin(), lengths.end());
    std::size_t total = 0;
    for (std::size_t c : counts) total += c;
    std::string all(total, '\0');
    backend::all_gather_v(mine.data(), counts, all.data());
    std::vector<std::string> out;
    std::size_t at = 0;
    for (std::size_t c : counts) {
        out.push_back(all.substr(at, c));
        at += c;
    }
    return out;
}

// The ranks whose `mine` differs from rank 0's: empty when all agree. Collective.
std::vector<int> ranks_differing(const std::string& mine) {
    const int W = backend::size();
    std::vector<std::uint64_t> hashes(static_cast<std::size_t>(W));
    const std::uint64_t h = fnv1a64(mine);
    backend::all_gather(&h, sizeof h, hashes.data());
    std::vector<int> differ;
    for (int r = 1; r < W; ++r)
        if (hashes[std::size_t(r)] != hashes[0]) differ.push_back(r);
    return differ;
}

// Throws the same ValueError on every rank unless every rank calls the same collective on the
// same shape. `signature` is e.g. "all_reduce (4, 3)".
void check_agree(const char* op, const std::string& signature) {
    if (backend::size() == 1) return;
    if (ranks_differing(signature).empty()) return;
    const std::vector<std::string> all = gather_strings(signature);
    std::string listing;
    for (std::size_t r = 0; r < all.size(); ++r) listing += fmt::format("{}rank {}: {}", r ? ", " : "", r, all[r]);
    throw ValueError(fmt::format("{}: the ranks disagree on the collective or its shape ({}); every rank must call "
                                 "the same collective on tensors of the same shape, in the same order",
                                 op, listing));
}

void scale(real* p, std::size_t n, real c) {
    for (std::size_t i = 0; i < n; ++i) p[i] *= c;
}

}  // namespace

void init(int* argc, char*** argv) { backend::init(argc, argv); }
void finalize() { backend::finalize(); }
bool mpi_available() { return backend::available(); }
bool is_initialized() { return backend::initialized(); }
int rank() { return backend::rank(); }
int world_size() { return backend::size(); }
std::string describe() { return backend::describe(); }
void abort(int code) { backend::abort(code); }

void barrier() { backend::barrier(); }

void broadcast(Tensor& t, int root) {
    check(t.defined(), "broadcast", "got an undefined tensor");
    check(root >= 0 && root < world_size(), "broadcast", "root {} is outside [0, {}): the world has {} ranks", root,
          world_size(), world_size());
    check_agree("broadcast", fmt::format("broadcast from {} of {}", root, shape_str(t.shape())));
    Array& a = t.mutable_data();
    backend::broadcast(a.data(), a.size() * sizeof(real), root);
}

void all_reduce(Tensor& t, ReduceOp op) {
    check(t.defined(), "all_reduce", "got an undefined tensor");
    check_agree("all_reduce", fmt::format("all_reduce of {}", shape_str(t.shape())));
    Array& a = t.mutable_data();
    backend::all_reduce_sum(a.data(), a.size(), kReal);
    if (op == ReduceOp::Mean) scale(a.data(), a.size(), real(1) / real(world_size()));
}

Tensor all_gather(const Tensor& t) {
    check(t.defined(), "all_gather", "got an undefined tensor");
    check_agree("all_gather", fmt::format("all_gather of {}", shape_str(t.shape())));
    const Array& a = t.data();
    ArrayShape shape{std::size_t(world_size())};
    shape.insert(shape.end(), a.shape().begin(), a.shape().end());
    Array out(shape);  // (W, ...)
    backend::all_gather(a.data(), a.size() * sizeof(real), out.data());
    return from_array(std::move(out));
}

SparseGrad all_reduce(const SparseGrad& g, ReduceOp op) {
    check(g.dense_shape.size() == 2, "all_reduce", "a row-sparse gradient has a (V, d) dense shape, got {}",
          shape_str(g.dense_shape));
    const std::size_t d = std::size_t(g.dense_shape[1]), k = g.indices.size();
    check(g.values.dimension() == 2 && g.values.shape()[0] == k && g.values.shape()[1] == d, "all_reduce",
          "row-sparse values of shape {} do not match {} indices of width {}", shape_str(g.values.shape()), k, d);
    check_agree("all_reduce", fmt::format("all_reduce of a row-sparse gradient of {}", shape_str(g.dense_shape)));
    // Round 1: every rank's k_r. Rounds 2 and 3: the indices (k_r,) and rows (k_r, d), in rank order.
    const int W = world_size();
    std::vector<std::uint64_t> ks(static_cast<std::size_t>(W));
    const std::uint64_t mine = k;
    backend::all_gather(&mine, sizeof mine, ks.data());
    std::size_t total = 0;
    std::vector<std::size_t> index_bytes, row_bytes;
    for (std::uint64_t kr : ks) {
        total += kr;
        index_bytes.push_back(kr * sizeof(std::int64_t));
        row_bytes.push_back(kr * d * sizeof(real));
    }
    std::vector<std::int64_t> indices(total);
    Array rows(ArrayShape{total, d});  // (Σ k_r, d)
    backend::all_gather_v(g.indices.data(), index_bytes, indices.data());
    backend::all_gather_v(g.values.data(), row_bytes, rows.data());
    if (op == ReduceOp::Mean) scale(rows.data(), rows.size(), real(1) / real(W));
    SparseGrad out;
    out.dense_shape = g.dense_shape;
    out.values = Array(ArrayShape{0, d});
    out.accumulate(indices, rows);  // the union, coalesced: sorted unique rows, duplicates summed
    return out;
}

void all_reduce(std::vector<double>& values, ReduceOp op) {
    check_agree("all_reduce", fmt::format("all_reduce of {} doubles", values.size()));
    backend::all_reduce_sum(values.data(), values.size(), backend::Number::Double);
    if (op == ReduceOp::Mean)
        for (double& v : values) v /= world_size();
}

void check_same_on_all_ranks(const std::string& what, const std::string& text) {
    if (world_size() == 1) return;
    const std::vector<int> differ = ranks_differing(text);
    if (differ.empty()) return;
    throw ValueError(fmt::format("{}: rank{} {} differ{} from rank 0; every rank must be started with the same "
                                 "configuration",
                                 what, differ.size() > 1 ? "s" : "", fmt::join(differ, ", "),
                                 differ.size() > 1 ? "" : "s"));
}

}  // namespace xgrad::distributed
