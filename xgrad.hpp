// xgrad.hpp — the whole library in one include, <xgrad/xgrad.hpp>: tensors and autograd
// (xgrad::), the core ops, threads and gradcheck; modules, losses, initialisers and generation
// (xgrad::nn); optimizers and schedulers (xgrad::optim); token data (xgrad::data); the training
// state (xgrad::train). The topic headers it includes can be used alone.
// Two libraries of their own are not in it: byte-pair tokens (<xgrad/text/train.hpp>, target
// xgrad::text) and several processes (<xgrad/distributed/distributed.hpp>, xgrad::distributed).
#pragma once

#include <xgrad/core/gradcheck.hpp>
#include <xgrad/core/ops.hpp>
#include <xgrad/core/threads.hpp>
#include <xgrad/data/sampler.hpp>
#include <xgrad/data/shards.hpp>
#include <xgrad/data/text_source.hpp>
#include <xgrad/data/vocab.hpp>
#include <xgrad/nn/nn.hpp>
#include <xgrad/optim/optim.hpp>
#include <xgrad/train/state.hpp>
