#include <iostream>
#include "core/ops.hpp"
using namespace xgrad;
int main() {
    Tensor x({{1, 2}, {3, 4}}, true);
    Tensor w({{0.5}, {-1}}, true);
    Tensor y = matmul(x, w).tanh().sum();
    y.backward();
    std::cout << y << "\n" << x.grad() << "\n" << w.grad() << "\n";
}
