// xgrad.hpp — the whole library in one include, <xgrad/xgrad.hpp>: tensors and autograd
// (xgrad::), the core ops, threads and gradcheck; modules, losses and initialisers (xgrad::nn);
// optimizers and schedulers (xgrad::optim). The topic headers it includes can be used alone.
#pragma once

#include <xgrad/core/gradcheck.hpp>
#include <xgrad/core/ops.hpp>
#include <xgrad/core/threads.hpp>
#include <xgrad/nn/nn.hpp>
#include <xgrad/optim/optim.hpp>
