// y (+)= x · Wᵀ, each output a fixed-order dot (kernels/cpu/dot.hpp).
#pragma once

#include "runtime/kernel_args.hpp"

namespace ordo::cpu {

void matmul(const matmul_args& a);

} // namespace ordo::cpu
