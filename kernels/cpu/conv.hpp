// Causal depthwise short conv with per-request state (GDN q/k/v conv, PLE conv).
#pragma once

#include "kernels/kernel_args.hpp"

namespace ordo::cpu {

void causal_conv(const causal_conv_args& a);

} // namespace ordo::cpu
