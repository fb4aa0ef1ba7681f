// examples/tensor_basics.cpp — the smallest program: a matmul, a tanh, a sum and a backward.
//
//   x (2, 2), w (2, 1)          leaves with requires_grad
//   z = x · w        (2, 1)     [[1·0.5 + 2·(−1)], [3·0.5 + 4·(−1)]] = [[−1.5], [−2.5]]
//   y = Σ tanh(z)    ()         tanh(−1.5) + tanh(−2.5) = −1.89176
// backward, with g = dy/dz = 1 − tanh²(z) = [[0.180707], [0.026592]]:
//   dy/dx = g · wᵀ   (2, 2)     [[0.090353, −0.180707], [0.013296, −0.026592]]
//   dy/dw = xᵀ · g   (2, 1)     [[0.260483], [0.467782]]
// It prints y, x.grad() and w.grad(): these numbers.
#include <iostream>

#include <xgrad/core/ops.hpp>

using namespace xgrad;

int main() {
    Tensor x({{1, 2}, {3, 4}}, /*requires_grad=*/true);
    Tensor w({{0.5}, {-1}}, /*requires_grad=*/true);
    Tensor y = matmul(x, w).tanh().sum();
    y.backward();
    std::cout << y << "\n" << x.grad() << "\n" << w.grad() << "\n";
}
