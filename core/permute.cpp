// core/permute.cpp — permute_array: y = x with its dims reordered (see core/detail/permute.hpp).
//
// The output is filled a row (its last dim) at a time, rather than through xt::transpose's
// n-dim index: a memcpy when that dim is also the input's last (the head split), else a loop.
#include <xgrad/core/detail/permute.hpp>

#include <cstring>

namespace xgrad {

Array permute_array(const Array& x, const std::vector<std::size_t>& perm) {
    const std::size_t n = x.dimension();
    if (n == 0) return x;  // a scalar: nothing to reorder
    ArrayShape ys(n);
    for (std::size_t i = 0; i < n; ++i) ys[i] = x.shape()[perm[i]];
    Array y(ys);
    if (y.size() == 0) return y;
    // src[i]: how far one step along y's dim i moves in x (x is row-major and contiguous)
    std::vector<std::size_t> x_stride(n), src(n);
    for (std::size_t i = n, st = 1; i-- > 0;) x_stride[i] = st, st *= x.shape()[i];
    for (std::size_t i = 0; i < n; ++i) src[i] = x_stride[perm[i]];

    const std::size_t inner = ys[n - 1], rows = y.size() / inner;
    std::vector<std::size_t> idx(n - 1, 0);  // y's index over its leading dims
    std::size_t off = 0;                     // x's offset of that row's first value
    const real* px = x.data();
    real* py = y.data();
    for (std::size_t r = 0; r < rows; ++r, py += inner) {
        if (src[n - 1] == 1) std::memcpy(py, px + off, inner * sizeof(real));
        else
            for (std::size_t j = 0; j < inner; ++j) py[j] = px[off + j * src[n - 1]];
        for (std::size_t d = n - 1; d-- > 0;) {  // the next row: an odometer over the leading dims
            off += src[d];
            if (++idx[d] < ys[d]) break;
            off -= src[d] * ys[d];
            idx[d] = 0;
        }
    }
    return y;
}

}  // namespace xgrad
