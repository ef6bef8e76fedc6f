// y (+)= x · Wᵀ, each output a fixed-order dot: dot.hpp's lanes and tree with fused multiply-adds.
#pragma once

#include "kernels/kernel_args.hpp"

namespace ordo::cpu {

void matmul(const matmul_args& a);

} // namespace ordo::cpu
