// nn/attention_tiled.hpp — the same as <xgrad/nn/attention/tiled.hpp> (tiled_causal_attention).
#pragma once

#include <xgrad/nn/attention/tiled.hpp>
