// core/threads.cpp — set_num_threads and get_num_threads (see core/threads.hpp).
#include <xgrad/core/threads.hpp>

#include <cblas.h>

#include <xgrad/core/error.hpp>
#include <xgrad/core/parallel.hpp>

namespace xgrad {

void set_num_threads(int n) {
    check(n >= 1, "set_num_threads", "thread count must be >= 1; got {}", n);
    set_pool_threads(n);
    openblas_set_num_threads(1);
}

int get_num_threads() { return get_pool_threads(); }

}  // namespace xgrad
