// The sigmoid output gate of Qwen's gated attention: x ← x · sigmoid(gate).
#pragma once

#include "kernels/kernel_args.hpp"

namespace ordo::cpu {

void output_gate(const output_gate_args& a);

} // namespace ordo::cpu
