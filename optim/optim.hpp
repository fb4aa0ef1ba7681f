// optim/optim.hpp — everything in xgrad::optim, in one include.
//
//   optimizer.hpp     Optimizer, ParamGroup, OptimizerState (state dicts), MemoryReport
//   sgd.hpp           SGD, SGDOptions
//   adam.hpp          Adam, AdamW, AdamOptions, AdamWOptions (lazy updates for sparse grads)
//   clip_grad.hpp     clip_grad_norm_
//   lr_scheduler.hpp  CosineWithWarmup
#pragma once

#include <xgrad/optim/adam.hpp>
#include <xgrad/optim/clip_grad.hpp>
#include <xgrad/optim/lr_scheduler.hpp>
#include <xgrad/optim/optimizer.hpp>
#include <xgrad/optim/sgd.hpp>
