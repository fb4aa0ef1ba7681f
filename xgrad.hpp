// xgrad.hpp — the whole library in one include, <xgrad/xgrad.hpp>: tensors and autograd
// (xgrad::), the core ops, threads and gradcheck; modules, losses and initialisers (xgrad::nn);
// optimizers and schedulers (xgrad::optim). The topic headers it includes can be used alone.
// Two libraries of their own are not in it: byte-pair tokens (<xgrad/text/train.hpp>, target
// xgrad::text) and several processes (<xgrad/distributed/distributed.hpp>, xgrad::distributed).
#pragma once

#include <xgrad/core/gradcheck.hpp>
#include <xgrad/core/ops.hpp>
#include <xgrad/core/threads.hpp>
#include <xgrad/nn/nn.hpp>
#include <xgrad/optim/optim.hpp>
#include <xgrad/train/state.hpp>
