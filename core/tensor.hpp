// core/tensor.hpp — the Tensor: an n-dimensional array of `real` with reverse-mode autograd.
//
// The engine path of README.md starts here. It defines
//   real          float32 (library `xgrad`) or float64 (`xgrad_f64`, for gradcheck's precision)
//   Array         xt::xarray of real, row-major; every op writes a fresh Array, so no aliasing
//   IndexTensor   int64 token IDs and class targets; a separate type, so floats cannot pass as IDs
//   SparseGrad    a row-sparse gradient (k unique rows of a (V, d) table), nn::Embedding(sparse)
//   Tensor        a shared handle, like torch::Tensor: a copy shares data, gradient and graph
//
// Legend used in shape comments throughout xgrad:
//   B batch, T time (sequence position), V vocabulary size, d embedding width, H heads,
//   hd = d / H head width, C classes, N rows, n/k/m matrix sizes in (n, k) @ (k, m).
#pragma once

#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <iosfwd>
#include <memory>
#include <mutex>
#include <optional>
#include <random>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include <xtensor/xarray.hpp>

#include <xgrad/core/allocator.hpp>
#include <xgrad/core/error.hpp>

namespace xgrad {

#ifdef XGRAD_DOUBLE
using real = double;
#else
using real = float;
#endif

// Storage: 32-byte-aligned blocks from plain malloc (MallocAllocator, core/allocator.hpp).
using Array = xt::xarray<real, xt::layout_type::row_major, MallocAllocator<real>>;
using IndexArray = xt::xarray<std::int64_t, xt::layout_type::row_major, MallocAllocator<std::int64_t>>;
// Sizes in the public API are int64, as PyTorch's IntArrayRef: Shape{B, T} with int64 B and T.
using Shape = std::vector<std::int64_t>;
// Sizes for reshape/view, where one entry may be -1 ("infer this one"), as in PyTorch.
using Dims = std::vector<std::int64_t>;
// What xtensor's arrays take and return: unsigned sizes. Used inside the library.
using ArrayShape = std::vector<std::size_t>;
// At most 2^60 elements, so byte offsets of 8-byte elements fit xtensor's signed 64-bit strides.
constexpr std::size_t kMaxNumel = std::size_t{1} << 60;
// The element count of `shape` (1 for 0-d). Throws ValueError naming `op` and the shape for a
// negative size, or when the product of its non-zero sizes exceeds kMaxNumel.
std::size_t checked_numel(const Shape& shape, const char* op);
std::size_t checked_numel(const ArrayShape& shape, const char* op);
// `shape` for xtensor, checked as checked_numel does.
ArrayShape to_array_shape(const Shape& shape, const char* op);
// The int64 Shape of xtensor's shape container, and an array's unsigned shape for kernels.
template <class S>
Shape to_shape(const S& shape) {
    return Shape(shape.begin(), shape.end());
}
template <class A>
ArrayShape array_shape(const A& a) {
    return ArrayShape(a.shape().begin(), a.shape().end());
}

struct Node;  // core/autograd.hpp: one recorded op, the `grad_fn` of its output

// ---- random numbers ------------------------------------------------------------------
// One process-wide generator behind a mutex, as PyTorch's: manual_seed(s) makes later draws and
// module initialisation reproducible on one thread (across threads, each call draws a block).
void manual_seed(std::uint64_t seed);
// The generator itself, for code that draws from it directly. Not synchronised: from several
// threads, hold `std::lock_guard<std::mutex> lock(generator_mutex());` while drawing. fork() takes
// this lock (pthread_atfork), so a forked child never inherits it held.
std::mt19937_64& generator();
std::mutex& generator_mutex();
// A generator's state as text, as operator<< writes it (312 numbers and an index), for a file that
// saves it; and back. operator>> would skip spaces, take a '+' and ignore what follows, so a text
// reads back only when it is exactly what operator<< writes for the state it holds (else nullopt).
std::string generator_text(const std::mt19937_64& g);
std::optional<std::mt19937_64> generator_from_text(const std::string& text);

// ---- NestedList: brace-initialised values -------------------------------------------------
// A scalar or a brace list of NestedLists: Tensor({{1, 2}, {3, 4}}) is (2, 2), as torch::tensor.
// to_array() throws ValueError for ragged lists such as {{1, 2}, {3}}.
template <class T>
class NestedList {
public:
    NestedList(T v) : value_(v), is_scalar_(true) {}
    // IDs are integers: a floating-point literal where an ID is expected does not compile.
    template <class U, class = std::enable_if_t<std::is_integral_v<T> && std::is_floating_point_v<U>>>
    NestedList(U) = delete;
    NestedList(std::initializer_list<NestedList> items) : items_(items) {}

    xt::xarray<T> to_array() const {
        ArrayShape shape;
        for (const NestedList* n = this; !n->is_scalar_; n = &n->items_.front()) {
            shape.push_back(n->items_.size());
            if (n->items_.size() == 0) break;
        }
        xt::xarray<T> out(shape);
        std::size_t pos = 0;
        fill(0, shape, out, pos);
        return out;
    }

private:
    void fill(std::size_t depth, const ArrayShape& shape, xt::xarray<T>& out, std::size_t& pos) const {
        if (is_scalar_) {
            check(depth == shape.size(), "tensor", "ragged nested list: a scalar at depth {} of shape {}",
                  depth, shape_str(shape));
            out.data()[pos++] = value_;
            return;
        }
        check(depth < shape.size() && items_.size() == shape[depth], "tensor",
              "ragged nested list: {} items at depth {}, expected shape {}", items_.size(), depth,
              shape_str(shape));
        for (const auto& item : items_) item.fill(depth + 1, shape, out, pos);
    }

    T value_{};
    bool is_scalar_ = false;
    std::vector<NestedList> items_;
};

// ---- IndexTensor: integer IDs ---------------------------------------------------------
// int64 values of any shape, no gradient: IndexTensor ids{{0, 1, 2}, {3, 3, 1}};  // (2, 3)
// Braces with floating-point values do not compile.
class IndexTensor {
public:
    IndexTensor() = default;
    explicit IndexTensor(IndexArray data) : data_(std::move(data)) {}
    IndexTensor(std::initializer_list<NestedList<std::int64_t>> v)
        : data_(NestedList<std::int64_t>(v).to_array()) {}

    // torch::tensor(values): a (n,) tensor of `values`; with `shape`, viewed as it (same count).
    // Throws ValueError when the shape does not hold values.size() elements.
    explicit IndexTensor(const std::vector<std::int64_t>& values);
    IndexTensor(const std::vector<std::int64_t>& values, const Shape& shape);
    // The same from any other integer type (int, unsigned, std::size_t, ...), as torch::tensor
    // gives int64. Throws IndexError naming the value and its position for an unsigned value
    // above 2^63 − 1, which int64 cannot hold (a negative number converted to std::size_t).
    template <class I, class = std::enable_if_t<std::is_integral_v<I>>>
    explicit IndexTensor(const std::vector<I>& values)
        : IndexTensor(to_int64(values), Shape{static_cast<std::int64_t>(values.size())}) {}
    template <class I, class = std::enable_if_t<std::is_integral_v<I>>>
    IndexTensor(const std::vector<I>& values, const Shape& shape) : IndexTensor(to_int64(values), shape) {}

    Shape shape() const { return to_shape(data_.shape()); }
    std::int64_t size(int dim) const;  // negative dims count from the end
    std::int64_t numel() const { return static_cast<std::int64_t>(data_.size()); }
    std::int64_t dim() const { return static_cast<std::int64_t>(data_.dimension()); }
    const IndexArray& data() const { return data_; }
    IndexArray& mutable_data() { return data_; }
    // Flat (row-major) element access, bounds-checked.
    std::int64_t operator[](std::int64_t i) const;
    IndexTensor reshape(const Shape& shape) const;

    // torch.arange on int64, shape (count,): start, start + step, ... while < end (step > 0) or
    // > end (step < 0); arange(T) is the positions 0 .. T-1. Throws ValueError for step 0, for
    // bounds against the step's sign (arange(5, 0), arange(-3), as PyTorch), and for a huge count.
    static IndexTensor arange(std::int64_t end);
    static IndexTensor arange(std::int64_t start, std::int64_t end, std::int64_t step = 1);

private:
    template <class I>
    static std::vector<std::int64_t> to_int64(const std::vector<I>& values) {
        static_assert(!std::is_same_v<I, bool>, "IndexTensor: a std::vector<bool> holds flags, not indices: "
                                                "select with a mask (where, masked_fill) or convert to int64");
        std::vector<std::int64_t> out(values.size());
        for (std::size_t i = 0; i < values.size(); ++i) {
            if constexpr (std::is_unsigned_v<I> && sizeof(I) >= sizeof(std::int64_t))
                check_index(values[i] <= static_cast<I>(INT64_MAX), "IndexTensor",
                            "value {} at position {} does not fit in int64 (at most {}): a negative number "
                            "converted to an unsigned type?", values[i], i, INT64_MAX);
            out[i] = static_cast<std::int64_t>(values[i]);
        }
        return out;
    }

    IndexArray data_ = IndexArray(ArrayShape{0});  // empty (0,); a default xarray is 0-d with 1 element
};

// ---- SparseGrad: a coalesced row-sparse gradient ----------------------------------------
// The gradient of a (V, d) table of which only k rows were used:
//   indices  (k,)   unique row numbers, sorted ascending
//   values   (k, d) the summed gradient of each of those rows
// Memory is k·(8 + d·sizeof(real)) bytes instead of V·d·sizeof(real).
struct SparseGrad {
    Shape dense_shape;                  // (V, d)
    std::vector<std::int64_t> indices;  // (k,)
    Array values = Array(ArrayShape{0, 0});  // (k, d); a default Array would be 0-d with 1 element

    // Adds rows `rows` (n, d) at `idx` (n,) (duplicates allowed) and re-coalesces.
    void accumulate(const std::vector<std::int64_t>& idx, const Array& rows);
    // The dense (V, d) equivalent; O(V·d), for inspection and tests.
    Array to_dense() const;
    // Bytes actually held: indices + values.
    std::size_t nbytes() const;
};

// ---- TensorImpl: what a Tensor handle points to ---------------------------------------
struct TensorImpl {
    TensorImpl() = default;
    // Takes `data` without copying.
    explicit TensorImpl(Array data, bool requires_grad = false)
        : data(std::move(data)), requires_grad(requires_grad) {}

    Array data;
    // Counts in-place changes: bumped by Tensor::mutable_data() and set_data(), and by
    // optimizers' steps. backward checks it against the version each op recorded (core/autograd.hpp).
    std::uint64_t version = 0;
    // Set for a module's parameter (nn::Module::register_parameter): its dotted name and the
    // shape it may have. Ops, backward and optimizers refuse it once data's shape differs
    // (check_parameter_shape); set_data() is the way to resize it.
    std::string param_name;
    ArrayShape param_shape;
    bool requires_grad = false;
    // The gradient, written only by core/accumulate.cpp (backward, set_grad, zero_grad): at most
    // one of the two is set, and it has data's shape.
    std::shared_ptr<TensorImpl> grad;          // dense gradient; or null
    std::unique_ptr<SparseGrad> sparse_grad;   // row-sparse gradient; or null
    std::shared_ptr<Node> grad_fn;             // the op that made this tensor; null for leaves
};

// ---- Tensor -------------------------------------------------------------------------------
class Tensor {
public:
    Tensor() = default;  // an undefined tensor: defined() is false
    explicit Tensor(std::shared_ptr<TensorImpl> impl) : impl_(std::move(impl)) {}
    // From an xtensor array or expression (evaluated and copied).
    template <class E>
    explicit Tensor(const xt::xexpression<E>& e, bool requires_grad = false)
        : impl_(std::make_shared<TensorImpl>()) {
        impl_->data = e.derived_cast();
        impl_->requires_grad = requires_grad;
    }
    // Nested braces: Tensor({{1, 2}, {3, 4}}) is (2, 2); Tensor(3.5) is a 0-d scalar.
    Tensor(NestedList<real> values, bool requires_grad = false);
    Tensor(std::initializer_list<NestedList<real>> values, bool requires_grad = false)
        : Tensor(NestedList<real>(values), requires_grad) {}

    // -- basics ---------------------------------------------------------------------------
    bool defined() const { return impl_ != nullptr; }
    Shape shape() const;
    std::int64_t size(int dim) const;  // negative dims count from the end
    std::int64_t numel() const;
    std::int64_t dim() const;
    real item() const;                 // only for a one-element tensor
    // The values, read only: free at any time, even between forward and backward. A reference
    // into this tensor's storage, valid while a handle to it lives: keep the Tensor, not only the
    // reference (`Tensor y = model.forward(x); const Array& z = y.data();`), as with LibTorch's
    // data_ptr(); a reference taken from a temporary, model.forward(x).data(), dangles.
    const Array& data() const;
    // Write access in place. Bumps the version: a backward that needs the old values then throws
    // ValueError, as PyTorch after an in-place op. The bump happens at this call, so write right
    // after it: like PyTorch's .data, a reference kept across a forward writes unseen. Keep the
    // shape: a parameter resized here is refused (ValueError naming it) at its next op, backward
    // or optimizer step.
    Array& mutable_data();
    // Replaces the values by `values` of any shape (PyTorch's `t.data = values`), the way to
    // resize a parameter: bumps the version and drops a gradient of another shape.
    void set_data(Array values);
    // Bounds-checked read of one element, t.at({1, 2}). Throws IndexError out of range.
    real at(std::initializer_list<std::int64_t> index) const;

    // -- autograd -------------------------------------------------------------------------
    bool requires_grad() const;
    Tensor& requires_grad_(bool on = true);  // only on leaves, as in PyTorch
    bool is_leaf() const;                    // true when no op made this tensor
    // dL/dself accumulated by backward(); undefined until a backward reaches this leaf.
    // Throws ValueError when the gradient is row-sparse (see sparse_grad()).
    Tensor grad() const;
    const SparseGrad* sparse_grad() const;   // null unless the gradient is row-sparse
    bool has_grad() const;                   // dense or sparse
    void set_grad(const Tensor& g);          // replace the gradient by a copy of g (shape-checked)
    void reset_grad();                       // drop the gradient (set_to_none)
    std::shared_ptr<Node> grad_fn() const;
    // A new leaf with the same values (copied) and no history.
    Tensor detach() const;
    // Reverse-mode autodiff from this tensor (core/autograd.cpp). A non-scalar output needs
    // `gradient` of its own shape. retain_graph=false frees saved arrays after the pass.
    // Thread-safe as in PyTorch: several threads may backward at once, through their own graphs
    // into shared leaves or through one graph retained by every call; the gradients add up.
    void backward(const Tensor& gradient = Tensor(), bool retain_graph = false) const;

    // -- ops as methods (core/ops.hpp has the free functions and their math) ---------------
    Tensor sum() const;
    Tensor sum(int dim, bool keepdim = false) const;
    Tensor mean() const;
    Tensor mean(int dim, bool keepdim = false) const;
    Tensor max() const;
    Tensor max(int dim, bool keepdim = false) const;
    Tensor reshape(const Dims& shape) const;
    Tensor view(const Dims& shape) const;
    Tensor transpose(int dim0, int dim1) const;
    Tensor permute(const std::vector<int>& dims) const;
    Tensor matmul(const Tensor& other) const;
    Tensor pow(real exponent) const;
    Tensor exp() const;
    Tensor log() const;
    Tensor tanh() const;
    Tensor relu() const;
    Tensor sigmoid() const;
    Tensor softmax(int dim) const;
    Tensor log_softmax(int dim) const;
    Tensor narrow(int dim, std::int64_t start, std::int64_t length) const;
    std::vector<Tensor> split(std::int64_t split_size, int dim = 0) const;
    std::vector<Tensor> chunk(std::int64_t chunks, int dim = 0) const;
    Tensor masked_fill(const Tensor& mask, real value) const;
    Tensor tril(std::int64_t k = 0) const;
    Tensor triu(std::int64_t k = 0) const;
    Tensor sqrt() const;
    Tensor rsqrt() const;
    Tensor var(int dim, bool keepdim = false, bool unbiased = true) const;

    TensorImpl* impl() const { return impl_.get(); }
    const std::shared_ptr<TensorImpl>& impl_ptr() const { return impl_; }

private:
    TensorImpl& checked(const char* op) const;
    std::shared_ptr<TensorImpl> impl_;
};

// Throws ValueError naming `op` when `t` is a module parameter whose array no longer has the
// shape it was registered (or set_data()) with: the array was replaced through mutable_data().
void check_parameter_shape(const TensorImpl& t, const char* op);

// Throws ValueError "op: <what> is an undefined tensor" for a default-constructed Tensor.
inline void check_defined(const Tensor& t, const char* op, const char* what) {
    check(t.defined(), op, "{} is an undefined tensor", what);
}

// (name, tensor) pairs in a fixed order: named_parameters(), state_dict(), checkpoints.
using NamedTensors = std::vector<std::pair<std::string, Tensor>>;

// Prints "Tensor(shape=(2, 3), requires_grad=true)" followed by the values (small tensors).
std::ostream& operator<<(std::ostream& os, const Tensor& t);
std::ostream& operator<<(std::ostream& os, const IndexTensor& t);
// Prints the values alone, as the lines under a Tensor's header: std::cout << t.data(). Found by
// argument-dependent lookup (MallocAllocator is xgrad's), and, matching exactly, preferred over
// the template of <xtensor/xio.hpp> where both are visible.
std::ostream& operator<<(std::ostream& os, const Array& a);
std::ostream& operator<<(std::ostream& os, const IndexArray& a);

// ---- large arrays on huge pages ------------------------------------------------------------
// Asks Linux for 2 MiB transparent huge pages behind an array of 32 MiB or more (else a no-op),
// so random row lookups in a big table need one TLB entry per 2 MiB. Call before the first write.
void advise_huge_pages(Array& a);
// xt::zeros, with advise_huge_pages before the fill. For tables, their gradients and state.
Array zeros_array(const ArrayShape& shape);

// ---- factories ----------------------------------------------------------------------------
// Those taking a Shape throw ValueError when its element count overflows (checked_numel), and
// OutOfMemoryError (a std::bad_alloc naming the bytes) when the memory cannot be had.
Tensor from_array(Array data, bool requires_grad = false);  // takes the array without copying
Tensor zeros(const Shape& shape, bool requires_grad = false);
Tensor ones(const Shape& shape, bool requires_grad = false);
Tensor full(const Shape& shape, real value, bool requires_grad = false);
Tensor arange(real end);                          // [0, 1, ..., end)  shape (ceil(end),)
Tensor arange(real start, real end, real step = 1);
Tensor randn(const Shape& shape, bool requires_grad = false);  // N(0, 1)
Tensor rand(const Shape& shape, bool requires_grad = false);   // U[0, 1)
IndexTensor randint(std::int64_t low, std::int64_t high, const Shape& shape);  // uniform in [low, high)

}  // namespace xgrad
