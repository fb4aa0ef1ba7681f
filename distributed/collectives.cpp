// distributed/collectives.cpp — broadcast, all_reduce, all_gather and reduce_scatter on tensors,
// row-sparse gradients and plain values, built on the byte-level transport of
// distributed/detail/backend.hpp.
//
// Each collective is two rounds: an all-gather of one 64-bit hash of its signature (the collective,
// its op or root, the element type and shape, or why an argument is invalid) from every rank, then
// the data. When the hashes differ, every rank knows it from the same first round, gathers the
// signatures to name them, and throws the same error, so no rank is left waiting in MPI, and MPI
// never receives buffers of different sizes or types (undefined behaviour in MPI).
#include <xgrad/distributed/distributed.hpp>

#include <algorithm>
#include <cstdlib>
#include <exception>
#include <type_traits>

#include <fmt/format.h>

#include <xgrad/core/error.hpp>
#include <xgrad/core/profiler.hpp>
#include <xgrad/io/checksum.hpp>
#include <xgrad/distributed/detail/backend.hpp>
#include <xgrad/distributed/detail/signature.hpp>

namespace xgrad::distributed {

namespace {

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

// The error every rank throws when the ranks' signatures `all` differ, listing each rank's.
[[noreturn]] void throw_disagreement(const char* op, const std::vector<std::string>& all) {
    std::string listing;
    for (std::size_t r = 0; r < all.size(); ++r) listing += fmt::format("{}rank {}: {}", r ? ", " : "", r, all[r]);
    throw ValueError(fmt::format("{}: the ranks disagree on the collective or its arguments ({}); every rank "
                                 "must call the same collective on tensors of the same shape, in the same order",
                                 op, listing));
}

// Under mpirun, a collective before init() would silently act as a world of one.
void require_init(const char* op) {
    if (!backend::initialized() && backend::started_by_launcher())
        throw ValueError(fmt::format("{}: distributed::init() has not run, but this process was started by mpirun; "
                                     "start main() with distributed::InitGuard",
                                     op));
}

std::vector<std::string> lines_of(const std::string& text) {
    std::vector<std::string> lines;
    std::size_t at = 0;
    for (std::size_t nl; (nl = text.find('\n', at)) != std::string::npos; at = nl + 1) lines.push_back(text.substr(at, nl - at));
    lines.push_back(text.substr(at));
    return lines;
}

const char* name(ReduceOp op) { return op == ReduceOp::Sum ? "Sum" : "Mean"; }

// A tensor collective's signature: the call, this build's element type, t's shape.
std::string signature_of(const std::string& call, const Tensor& t) {
    return detail::tensor_signature(call, detail::kReal, t.defined() ? t.shape() : Shape{});
}

void scale(real* p, std::size_t n, real c) {
    for (std::size_t i = 0; i < n; ++i) p[i] *= c;
}

}  // namespace

namespace detail {

const char* type_name(backend::Number type) { return type == backend::Number::Float ? "float32" : "float64"; }

std::string tensor_signature(const std::string& call, backend::Number type, const Shape& shape) {
    return fmt::format("{} of {} {}", call, type_name(type), shape_str(shape));
}

void check_agree(const char* op, const std::string& signature, const std::string& invalid) {
    const std::string mine = invalid.empty() ? signature : fmt::format("{} (invalid: {})", op, invalid);
    const std::vector<std::string> all = gather_if_different(mine);
    if (!all.empty()) throw_disagreement(op, all);
    if (!invalid.empty()) throw ValueError(fmt::format("{}: {}", op, invalid));
}

}  // namespace detail

void init(int* argc, char*** argv) { backend::init(argc, argv); }
InitGuard::~InitGuard() {
    if (std::uncaught_exceptions() > 0 && world_size() > 1) abort(1);  // others may wait in a collective
    finalize();
}
void finalize() { backend::finalize(); }
bool mpi_available() { return backend::available(); }
bool is_initialized() { return backend::initialized(); }
int rank() { return backend::rank(); }
int world_size() { return backend::size(); }
std::string describe() { return backend::describe(); }
void abort(int code) { backend::abort(code); }

std::vector<std::string> gather_if_different(const std::string& text) {
    require_init("gather_if_different");
    const int W = backend::size();
    if (W == 1) return {};
    std::vector<std::uint64_t> hashes(static_cast<std::size_t>(W));
    const std::uint64_t h = io::fnv1a64(text);
    backend::all_gather(&h, sizeof h, hashes.data());
    if (std::all_of(hashes.begin(), hashes.end(), [&](std::uint64_t x) { return x == hashes[0]; })) return {};
    return gather_strings(text);
}

void barrier() {
    require_init("barrier");
    detail::check_agree("barrier", "barrier");
    backend::barrier();
}

// While profiling, each collective is an event with its payload (this rank's bytes, Event::bytes_sent).
void broadcast(Tensor& t, int root) {
    profiler::RecordFunction event("broadcast", profiler::Kind::collective);
    require_init("broadcast");
    const int W = world_size();
    std::string invalid;
    if (!t.defined()) invalid = "got an undefined tensor";
    else if (root < 0 || root >= W) invalid = fmt::format("root {} is outside [0, {}): the world has {} ranks", root, W, W);
    detail::check_agree("broadcast", signature_of(fmt::format("broadcast from {}", root), t), invalid);
    Array& a = t.mutable_data();
    event.bytes_sent(a.size() * sizeof(real));
    backend::broadcast(a.data(), a.size() * sizeof(real), root);
}

void all_reduce(Tensor& t, ReduceOp op) {
    profiler::RecordFunction event("all_reduce", profiler::Kind::collective);
    require_init("all_reduce");
    detail::check_agree("all_reduce", signature_of(fmt::format("all_reduce {}", name(op)), t),
                        t.defined() ? "" : "got an undefined tensor");
    Array& a = t.mutable_data();
    if (op == ReduceOp::Mean) scale(a.data(), a.size(), real(1) / real(world_size()));  // divide, then sum
    event.bytes_sent(a.size() * sizeof(real));
    backend::all_reduce_sum(a.data(), a.size(), detail::kReal);
}

Tensor all_gather(const Tensor& t) {
    profiler::RecordFunction event("all_gather", profiler::Kind::collective);
    require_init("all_gather");
    detail::check_agree("all_gather", signature_of("all_gather", t), t.defined() ? "" : "got an undefined tensor");
    const Array& a = t.data();
    ArrayShape shape{static_cast<std::size_t>(world_size())};
    shape.insert(shape.end(), a.shape().begin(), a.shape().end());
    Array out(shape);  // (W, ...)
    event.bytes_sent(a.size() * sizeof(real));
    backend::all_gather(a.data(), a.size() * sizeof(real), out.data());
    return from_array(std::move(out));
}

// t (W, ...) on every rank: rank r receives Σ_s t_s[r], shape (...), from MPI_Reduce_scatter_block.
Tensor reduce_scatter(const Tensor& t, ReduceOp op) {
    profiler::RecordFunction event("reduce_scatter", profiler::Kind::collective);
    require_init("reduce_scatter");
    const int W = world_size();
    std::string invalid;
    if (!t.defined()) invalid = "got an undefined tensor";
    else if (t.dim() == 0 || t.shape()[0] != W)
        invalid = fmt::format("t must have shape (W, ...), one row per rank, with W = {} ranks; got {}", W,
                              t.dim() == 0 ? std::string("a 0-dimensional tensor") : shape_str(t.shape()));
    detail::check_agree("reduce_scatter", signature_of(fmt::format("reduce_scatter {}", name(op)), t), invalid);
    const Array& a = t.data();
    Array out(ArrayShape(a.shape().begin() + 1, a.shape().end()));  // (...): n = a.size() / W elements
    event.bytes_sent(a.size() * sizeof(real));
    if (op == ReduceOp::Mean) {  // divide, then sum, on a copy: t is the caller's
        Array divided = a;
        scale(divided.data(), divided.size(), real(1) / real(W));
        backend::reduce_scatter_sum(divided.data(), out.data(), out.size(), detail::kReal);
    } else {
        backend::reduce_scatter_sum(a.data(), out.data(), out.size(), detail::kReal);
    }
    return from_array(std::move(out));
}

// What is wrong with a row-sparse gradient, or "" when nothing is.
static std::string sparse_problem(const SparseGrad& g) {
    if (g.dense_shape.size() != 2) return fmt::format("a row-sparse gradient has a (V, d) dense shape, got {}", shape_str(g.dense_shape));
    const std::size_t d = std::size_t(g.dense_shape[1]), k = g.indices.size();
    if (g.values.dimension() != 2 || g.values.shape()[0] != k || g.values.shape()[1] != d)
        return fmt::format("row-sparse values of shape {} do not match {} indices of width {}", shape_str(g.values.shape()), k, d);
    for (std::int64_t i : g.indices)
        if (i < 0 || i >= g.dense_shape[0]) return fmt::format("row index {} is outside [0, {})", i, g.dense_shape[0]);
    return "";
}

SparseGrad all_reduce(const SparseGrad& g, ReduceOp op) {
    profiler::RecordFunction event("all_reduce (row-sparse)", profiler::Kind::collective);
    require_init("all_reduce");
    const std::string invalid = sparse_problem(g);
    detail::check_agree("all_reduce",
                        detail::tensor_signature(fmt::format("all_reduce {} of a row-sparse gradient", name(op)), detail::kReal,
                                                 g.dense_shape),
                        invalid);
    const std::size_t d = std::size_t(g.dense_shape[1]), k = g.indices.size();
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
    event.bytes_sent(k * (sizeof(std::int64_t) + d * sizeof(real)));
    backend::all_gather_v(g.indices.data(), index_bytes, indices.data());
    backend::all_gather_v(g.values.data(), row_bytes, rows.data());
    if (op == ReduceOp::Mean) scale(rows.data(), rows.size(), real(1) / real(W));  // divide, then sum
    SparseGrad out;
    out.dense_shape = g.dense_shape;
    out.values = Array(ArrayShape{0, d});
    out.accumulate(indices, rows);  // the union, coalesced: sorted unique rows, duplicates summed
    return out;
}

void all_reduce(std::vector<double>& values, ReduceOp op) {
    profiler::RecordFunction event("all_reduce (doubles)", profiler::Kind::collective);
    event.bytes_sent(values.size() * sizeof(double));
    require_init("all_reduce");
    detail::check_agree("all_reduce", fmt::format("all_reduce {} of {} doubles", name(op), values.size()));
    if (op == ReduceOp::Mean)
        for (double& v : values) v /= world_size();
    backend::all_reduce_sum(values.data(), values.size(), backend::Number::Double);
}

void check_same_on_all_ranks(const std::string& what, const std::string& text) {
    // Round 1 compares the texts' hashes inside a signature, so that a rank in another collective
    // at this point is told so; only when they differ are the texts themselves gathered, to name
    // the first line where a rank departs from rank 0.
    const std::string signature = fmt::format("check_same_on_all_ranks({}) {:016x}", what, io::fnv1a64(text));
    const std::vector<std::string> all = gather_if_different(signature);
    if (all.empty()) return;
    const std::string prefix = fmt::format("check_same_on_all_ranks({}) ", what);
    for (const std::string& s : all)
        if (s.rfind(prefix, 0) != 0) throw_disagreement("check_same_on_all_ranks", all);  // another call
    const std::vector<std::string> texts = gather_strings(text);
    std::vector<int> differ;
    for (std::size_t r = 1; r < all.size(); ++r)
        if (all[r] != all[0]) differ.push_back(int(r));
    const std::vector<std::string> ours = lines_of(texts[0]), theirs = lines_of(texts[std::size_t(differ[0])]);
    std::size_t i = 0;
    while (i < ours.size() && i < theirs.size() && ours[i] == theirs[i]) ++i;
    auto line = [&](const std::vector<std::string>& v) { return i < v.size() ? "'" + v[i] + "'" : std::string("nothing"); };
    throw ValueError(fmt::format("{}: rank{} {} differ{} from rank 0: line {} is {} on rank {} and {} on rank 0", what,
                                 differ.size() > 1 ? "s" : "", fmt::join(differ, ", "), differ.size() > 1 ? "" : "s",
                                 i + 1, line(theirs), differ[0], line(ours)));
}

}  // namespace xgrad::distributed
