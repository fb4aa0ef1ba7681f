// nn/attention_fused.hpp — the same as <xgrad/nn/attention/fused.hpp> (fused_causal_attention).
#pragma once

#include <xgrad/nn/attention/fused.hpp>
