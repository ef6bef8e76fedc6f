// SwiGLU activation of the MLP: silu(gate) * up.
#pragma once

#include "kernels/kernel_args.hpp"

namespace ordo::cpu {

void swiglu(const swiglu_args& a);

} // namespace ordo::cpu
