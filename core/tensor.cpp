// core/tensor.cpp — Tensor handle basics, factories, the random generator, SparseGrad.
#include <xgrad/core/tensor.hpp>

#include <pthread.h>
#include <sys/mman.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <limits>
#include <mutex>
#include <ostream>
#include <sstream>

#include <xtensor/xio.hpp>

#include <xgrad/core/autograd.hpp>
#include <xgrad/core/elementwise.hpp>
#include <xgrad/core/reduction.hpp>
#include <xgrad/core/shape.hpp>
#include <xgrad/core/matmul.hpp>
#include <xgrad/core/softmax.hpp>
#include <xgrad/core/slicing.hpp>
#include <xgrad/core/masking.hpp>
#include <xgrad/core/math_ops.hpp>

namespace xgrad {

// The process-wide malloc policy (core/allocator.cpp), applied when the library is loaded.
namespace {
[[maybe_unused]] const bool g_malloc_policy = apply_malloc_policy();
}  // namespace

// ---- random numbers ----------------------------------------------------------------------

// One generator for the process, as in PyTorch, locked once per call (not per value).
std::mt19937_64& generator() {
    static std::mt19937_64 gen(42);
    return gen;
}

std::mutex& generator_mutex() {
    static std::mutex m;
    return m;
}

std::string generator_text(const std::mt19937_64& g) {
    std::ostringstream text;
    text << g;
    return text.str();
}

std::optional<std::mt19937_64> generator_from_text(const std::string& text) {
    std::mt19937_64 g;
    std::istringstream in(text);
    if (!(in >> g) || generator_text(g) != text) return std::nullopt;
    return g;
}

namespace {
// fork() copies only the calling thread: a lock another thread held would stay held in the child,
// whose first draw would wait forever. So fork() takes the lock and both processes release it.
// Registered at load, before the pool's handler (core/parallel.cpp, at its first resize), so fork()
// takes the pool's lock first, as a parallel_for body may draw.
const int g_generator_atfork = pthread_atfork([] { generator_mutex().lock(); }, [] { generator_mutex().unlock(); },
                                              [] { generator_mutex().unlock(); });
}  // namespace

void manual_seed(std::uint64_t seed) {
    std::lock_guard<std::mutex> lock(generator_mutex());
    generator().seed(seed);
}

// ---- IndexTensor ---------------------------------------------------------------------------

std::int64_t IndexTensor::operator[](std::int64_t i) const {
    check_index(i >= 0 && static_cast<std::size_t>(i) < data_.size(), "IndexTensor[]",
                "flat index {} out of range [0, {})", i, data_.size());
    return data_.data()[i];
}

IndexTensor::IndexTensor(const std::vector<std::int64_t>& values)
    : IndexTensor(values, Shape{static_cast<std::int64_t>(values.size())}) {}

IndexTensor::IndexTensor(const std::vector<std::int64_t>& values, const Shape& shape)
    : data_(to_array_shape(shape, "IndexTensor")) {
    check(data_.size() == values.size(), "IndexTensor", "shape {} holds {} elements, but {} values were given",
          shape_str(shape), data_.size(), values.size());
    std::copy(values.begin(), values.end(), data_.begin());
}

std::int64_t IndexTensor::size(int dim) const {
    const int n = static_cast<int>(data_.dimension());
    check(dim >= -n && dim < n, "IndexTensor::size", "dim {} out of range [{}, {}) for shape {}", dim,
                -n, n, shape_str(data_.shape()));
    return static_cast<std::int64_t>(data_.shape()[dim < 0 ? dim + n : dim]);
}

std::size_t checked_numel(const Shape& shape, const char* op) {
    std::size_t n = 1;  // the product of the non-zero sizes
    bool empty = false;
    for (std::int64_t s : shape) {
        check(s >= 0, op, "negative size {} in shape {}", s, lazy_shape(shape));
        const auto size = static_cast<std::size_t>(s);
        if (size == 0) {
            empty = true;  // no element, but the other sizes are still bounded (strides use them)
            continue;
        }
        check(n <= kMaxNumel / size, op,
              "shape {} is too large: the product of its non-zero sizes overflows the limit of 2^60 "
              "elements", lazy_shape(shape));
        n *= size;
    }
    return empty ? 0 : n;
}

std::size_t checked_numel(const ArrayShape& shape, const char* op) {
    for (std::size_t s : shape)
        check(s <= kMaxNumel, op, "size {} in shape {} is too large", s, lazy_shape(shape));
    return checked_numel(to_shape(shape), op);
}

ArrayShape to_array_shape(const Shape& shape, const char* op) {
    checked_numel(shape, op);
    return ArrayShape(shape.begin(), shape.end());
}

IndexTensor IndexTensor::reshape(const Shape& shape) const {
    const std::size_t n = checked_numel(shape, "IndexTensor::reshape");
    check(n == data_.size(), "IndexTensor::reshape", "cannot reshape {} ({} elements) to {}",
          shape_str(this->shape()), data_.size(), shape_str(shape));
    IndexArray out = data_;
    out.reshape(ArrayShape(shape.begin(), shape.end()));
    return IndexTensor(std::move(out));
}

// ---- SparseGrad ----------------------------------------------------------------------------

void SparseGrad::accumulate(const std::vector<std::int64_t>& idx, const Array& rows) {
    const std::size_t d = dense_shape.at(1);
    check(rows.dimension() == 2 && rows.shape()[0] == idx.size() && rows.shape()[1] == d,
          "SparseGrad::accumulate", "rows of shape {} do not match {} indices of width {}",
          shape_str(rows.shape()), idx.size(), d);
    // Merge the old (sorted, unique) rows with the new ones: O((k + n) log(k + n) + (k + n)·d).
    std::vector<std::int64_t> all(indices);
    all.insert(all.end(), idx.begin(), idx.end());
    std::sort(all.begin(), all.end());
    all.erase(std::unique(all.begin(), all.end()), all.end());

    Array merged = xt::zeros<real>({all.size(), d});
    auto slot = [&](std::int64_t row) {
        return static_cast<std::size_t>(std::lower_bound(all.begin(), all.end(), row) - all.begin());
    };
    auto add_row = [&](std::size_t to, const real* src) {
        real* dst = merged.data() + to * d;
        for (std::size_t j = 0; j < d; ++j) dst[j] += src[j];
    };
    for (std::size_t i = 0; i < indices.size(); ++i) add_row(slot(indices[i]), values.data() + i * d);
    for (std::size_t i = 0; i < idx.size(); ++i) add_row(slot(idx[i]), rows.data() + i * d);
    indices = std::move(all);
    values = std::move(merged);
}

Array SparseGrad::to_dense() const {
    Array out = xt::zeros<real>(dense_shape);
    const std::size_t d = dense_shape.at(1);
    for (std::size_t i = 0; i < indices.size(); ++i) {
        std::copy_n(values.data() + i * d, d, out.data() + indices[i] * d);
    }
    return out;
}

std::size_t SparseGrad::nbytes() const {
    return indices.size() * sizeof(std::int64_t) + values.size() * sizeof(real);
}

// ---- Tensor --------------------------------------------------------------------------------

namespace {
std::shared_ptr<TensorImpl> make_impl(Array data, bool requires_grad) {
    return std::make_shared<TensorImpl>(std::move(data), requires_grad);
}
}  // namespace

Tensor::Tensor(NestedList<real> values, bool requires_grad)
    : impl_(make_impl(values.to_array(), requires_grad)) {}

TensorImpl& Tensor::checked(const char* op) const {
    check(impl_ != nullptr, op, "the tensor is undefined (default-constructed)");
    return *impl_;
}

Shape Tensor::shape() const {
    const auto& s = checked("shape").data.shape();
    return Shape(s.begin(), s.end());
}

std::int64_t Tensor::size(int dim) const {
    const int n = static_cast<int>(this->dim());
    check(dim >= -n && dim < n, "size", "dim {} out of range [{}, {}) for shape {}", dim, -n, n,
          shape_str(shape()));
    return shape()[static_cast<std::size_t>(dim < 0 ? dim + n : dim)];
}

std::int64_t Tensor::numel() const { return static_cast<std::int64_t>(checked("numel").data.size()); }
std::int64_t Tensor::dim() const { return static_cast<std::int64_t>(checked("dim").data.dimension()); }

real Tensor::item() const {
    const auto& d = checked("item").data;
    check(d.size() == 1, "item", "only a one-element tensor converts to a scalar; shape is {}",
          shape_str(d.shape()));
    return d.data()[0];
}

const Array& Tensor::data() const { return checked("data").data; }

Array& Tensor::mutable_data() {
    auto& t = checked("mutable_data");
    ++t.version;
    return t.data;
}

void Tensor::set_data(Array values) {
    auto& t = checked("set_data");
    const bool fits = (!t.grad || t.grad->data.shape() == values.shape()) &&
                      (!t.sparse_grad || t.sparse_grad->dense_shape == to_shape(values.shape()));
    if (!fits) clear_grad(t);
    if (!t.param_name.empty()) t.param_shape = ArrayShape(values.shape().begin(), values.shape().end());
    t.data = std::move(values);
    ++t.version;
}

real Tensor::at(std::initializer_list<std::int64_t> index) const {
    const auto& a = checked("at").data;
    check_index(index.size() == a.dimension(), "at", "got {} indices for a tensor of shape {}",
                index.size(), shape_str(a.shape()));
    std::size_t off = 0, k = 0;
    for (std::int64_t i : index) {
        check_index(i >= 0 && static_cast<std::size_t>(i) < a.shape()[k], "at",
                    "index {} out of range [0, {}) in dim {} of shape {}", i, a.shape()[k], k,
                    shape_str(a.shape()));
        off += static_cast<std::size_t>(i) * a.strides()[k];
        ++k;
    }
    return a.data()[off];
}

void check_parameter_shape(const TensorImpl& t, const char* op) {
    if (t.param_name.empty() || t.data.shape() == t.param_shape) return;
    throw ValueError(fmt::format("{}: parameter '{}' was registered with shape {} but now holds an array of "
                                 "shape {}; resize a parameter with set_data(), not through mutable_data()",
                                 op, t.param_name, shape_str(t.param_shape), shape_str(t.data.shape())));
}

bool Tensor::requires_grad() const { return impl_ && impl_->requires_grad; }

Tensor& Tensor::requires_grad_(bool on) {
    auto& t = checked("requires_grad_");
    check(t.grad_fn == nullptr || on, "requires_grad_",
          "cannot turn off requires_grad on a non-leaf tensor; use detach()");
    t.requires_grad = on;
    return *this;
}

bool Tensor::is_leaf() const { return checked("is_leaf").grad_fn == nullptr; }

Tensor Tensor::grad() const {
    auto& t = checked("grad");
    check(t.sparse_grad == nullptr, "grad",
          "the gradient of this {} tensor is row-sparse; use sparse_grad() (and its to_dense())",
          shape_str(t.data.shape()));
    return t.grad ? Tensor(t.grad) : Tensor();
}

const SparseGrad* Tensor::sparse_grad() const { return checked("sparse_grad").sparse_grad.get(); }

bool Tensor::has_grad() const {
    auto& t = checked("has_grad");
    return t.grad != nullptr || t.sparse_grad != nullptr;
}

void Tensor::set_grad(const Tensor& g) {
    check(g.defined(), "set_grad", "got an undefined gradient");
    set_leaf_grad(checked("set_grad"), Array(g.data()));  // a copy, shape-checked there
}

void Tensor::reset_grad() { clear_grad(checked("reset_grad")); }

std::shared_ptr<Node> Tensor::grad_fn() const { return checked("grad_fn").grad_fn; }

Tensor Tensor::detach() const { return from_array(checked("detach").data); }

// ---- methods forward to the free functions in core/ops.hpp ---------------------------------
Tensor Tensor::sum() const { return xgrad::sum(*this); }
Tensor Tensor::sum(int dim, bool keepdim) const { return xgrad::sum(*this, dim, keepdim); }
Tensor Tensor::mean() const { return xgrad::mean(*this); }
Tensor Tensor::mean(int dim, bool keepdim) const { return xgrad::mean(*this, dim, keepdim); }
Tensor Tensor::max() const { return xgrad::max(*this); }
Tensor Tensor::max(int dim, bool keepdim) const { return xgrad::max(*this, dim, keepdim); }
Tensor Tensor::reshape(const Dims& s) const { return xgrad::reshape(*this, s); }
Tensor Tensor::view(const Dims& s) const { return xgrad::reshape(*this, s); }
Tensor Tensor::transpose(int d0, int d1) const { return xgrad::transpose(*this, d0, d1); }
Tensor Tensor::permute(const std::vector<int>& dims) const { return xgrad::permute(*this, dims); }
Tensor Tensor::matmul(const Tensor& o) const { return xgrad::matmul(*this, o); }
Tensor Tensor::pow(real e) const { return xgrad::pow(*this, e); }
Tensor Tensor::exp() const { return xgrad::exp(*this); }
Tensor Tensor::log() const { return xgrad::log(*this); }
Tensor Tensor::tanh() const { return xgrad::tanh(*this); }
Tensor Tensor::relu() const { return xgrad::relu(*this); }
Tensor Tensor::sigmoid() const { return xgrad::sigmoid(*this); }
Tensor Tensor::softmax(int dim) const { return xgrad::softmax(*this, dim); }
Tensor Tensor::log_softmax(int dim) const { return xgrad::log_softmax(*this, dim); }
Tensor Tensor::narrow(int dim, std::int64_t start, std::int64_t length) const {
    return xgrad::narrow(*this, dim, start, length);
}
std::vector<Tensor> Tensor::split(std::int64_t size, int dim) const { return xgrad::split(*this, size, dim); }
std::vector<Tensor> Tensor::chunk(std::int64_t chunks, int dim) const { return xgrad::chunk(*this, chunks, dim); }
Tensor Tensor::masked_fill(const Tensor& mask, real value) const { return xgrad::masked_fill(*this, mask, value); }
Tensor Tensor::tril(std::int64_t k) const { return xgrad::tril(*this, k); }
Tensor Tensor::triu(std::int64_t k) const { return xgrad::triu(*this, k); }
Tensor Tensor::sqrt() const { return xgrad::sqrt(*this); }
Tensor Tensor::rsqrt() const { return xgrad::rsqrt(*this); }
Tensor Tensor::var(int dim, bool keepdim, bool unbiased) const { return xgrad::var(*this, dim, keepdim, unbiased); }

std::ostream& operator<<(std::ostream& os, const Tensor& t) {
    if (!t.defined()) return os << "Tensor(undefined)";
    os << "Tensor(shape=" << shape_str(t.shape());
    if (t.requires_grad()) os << ", requires_grad=true";
    if (t.grad_fn()) os << ", grad_fn=" << t.grad_fn()->name;
    os << ")";
    if (t.numel() <= 64) os << "\n" << t.data();
    return os;
}

std::ostream& operator<<(std::ostream& os, const IndexTensor& t) {
    os << "IndexTensor(shape=" << shape_str(t.shape()) << ")";
    if (t.numel() <= 64) os << "\n" << t.data();
    return os;
}

std::ostream& operator<<(std::ostream& os, const Array& a) { return xt::pretty_print(a, os); }
std::ostream& operator<<(std::ostream& os, const IndexArray& a) { return xt::pretty_print(a, os); }

// ---- factories -------------------------------------------------------------------------------

Tensor from_array(Array data, bool rg) { return Tensor(make_impl(std::move(data), rg)); }

void advise_huge_pages(Array& a) {
#ifdef MADV_HUGEPAGE
    constexpr std::uintptr_t huge = std::uintptr_t{2} << 20;
    const std::size_t bytes = a.size() * sizeof(real);
    if (bytes < (std::size_t{32} << 20)) return;
    // madvise wants whole pages: advise the 2 MiB-aligned span inside the array.
    const auto begin = reinterpret_cast<std::uintptr_t>(a.data());
    const std::uintptr_t first = (begin + huge - 1) & ~(huge - 1), last = (begin + bytes) & ~(huge - 1);
    if (last > first) ::madvise(reinterpret_cast<void*>(first), last - first, MADV_HUGEPAGE);
#else
    (void)a;
#endif
}

Array zeros_array(const ArrayShape& shape) {
    checked_numel(to_shape(shape), "zeros");
    Array a(shape);
    advise_huge_pages(a);
    a.fill(0);
    return a;
}

Tensor zeros(const Shape& shape, bool rg) { return from_array(zeros_array(to_array_shape(shape, "zeros")), rg); }
Tensor ones(const Shape& shape, bool rg) {
    Array a(to_array_shape(shape, "ones"));
    a.fill(1);
    return from_array(std::move(a), rg);
}

Tensor full(const Shape& shape, real value, bool rg) {
    Array a(to_array_shape(shape, "full"));
    a.fill(value);
    return from_array(std::move(a), rg);
}

Tensor arange(real end) { return arange(0, end, 1); }

Tensor arange(real start, real end, real step) {
    check(step != 0 && std::isfinite(start) && std::isfinite(end) && std::isfinite(step), "arange",
          "need finite start, end and a non-zero step; got ({}, {}, {})", start, end, step);
    const double n = std::ceil((static_cast<double>(end) - start) / step);
    // Bounded before the cast: a double past SIZE_MAX (arange(1e30)) does not convert (UB).
    check(n <= static_cast<double>(kMaxNumel), "arange", "arange({}, {}, {}) would hold {} values, more than {}",
          start, end, step, n, kMaxNumel);
    const std::size_t count = n > 0 ? static_cast<std::size_t>(n) : 0;
    Array a = xt::zeros<real>({count});
    for (std::size_t i = 0; i < count; ++i) a(i) = static_cast<real>(start + step * static_cast<double>(i));
    return from_array(std::move(a));
}

// ---- IndexTensor::arange ----------------------------------------------------------------------
// count = ceil((end - start) / step) values start + i·step, in unsigned 64-bit so that extreme
// bounds cannot overflow. ref: PyTorch docs, torch.arange.
IndexTensor IndexTensor::arange(std::int64_t end) { return arange(0, end, 1); }

IndexTensor IndexTensor::arange(std::int64_t start, std::int64_t end, std::int64_t step) {
    check(step != 0, "arange", "step must be non-zero; got arange({}, {}, {})", start, end, step);
    check(step > 0 ? start <= end : start >= end, "arange",
          "bounds inconsistent with the step's sign: arange({}, {}, {}) needs start {} end", start, end, step,
          step > 0 ? "<=" : ">=");
    // |end - start| and |step| as unsigned: exact even when the signed difference would overflow.
    const std::uint64_t span = step > 0 ? static_cast<std::uint64_t>(end) - static_cast<std::uint64_t>(start)
                                        : static_cast<std::uint64_t>(start) - static_cast<std::uint64_t>(end);
    const std::uint64_t stride = step > 0 ? static_cast<std::uint64_t>(step) : 0 - static_cast<std::uint64_t>(step);
    const std::uint64_t count = span / stride + (span % stride != 0);
    check(count <= std::numeric_limits<std::size_t>::max() / sizeof(std::int64_t), "arange",
          "arange({}, {}, {}) would hold {} values, more than memory can address", start, end, step, count);
    IndexArray a(ArrayShape{static_cast<std::size_t>(count)});
    // start + i·step stays within [start, end): formed in unsigned arithmetic, it never overflows.
    for (std::uint64_t i = 0; i < count; ++i)
        a.data()[i] = static_cast<std::int64_t>(static_cast<std::uint64_t>(start) + i * static_cast<std::uint64_t>(step));
    return IndexTensor(std::move(a));
}

Tensor randn(const Shape& shape, bool rg) {
    Array a(to_array_shape(shape, "randn"));
    advise_huge_pages(a);  // an embedding table may be large
    std::normal_distribution<real> dist(0, 1);
    std::lock_guard<std::mutex> lock(generator_mutex());
    for (auto& v : a) v = dist(generator());
    return from_array(std::move(a), rg);
}

Tensor rand(const Shape& shape, bool rg) {
    Array a(to_array_shape(shape, "rand"));
    std::uniform_real_distribution<real> dist(0, 1);
    std::lock_guard<std::mutex> lock(generator_mutex());
    for (auto& v : a) v = dist(generator());
    return from_array(std::move(a), rg);
}

IndexTensor randint(std::int64_t low, std::int64_t high, const Shape& shape) {
    check(low < high, "randint", "need low < high; got [{}, {})", low, high);
    IndexArray a(to_array_shape(shape, "randint"));
    std::uniform_int_distribution<std::int64_t> dist(low, high - 1);
    std::lock_guard<std::mutex> lock(generator_mutex());
    for (auto& v : a) v = dist(generator());
    return IndexTensor(std::move(a));
}

}  // namespace xgrad
