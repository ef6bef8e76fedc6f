// RMSNorm over rows (per head, optionally gated by silu).
#pragma once

#include "kernels/kernel_args.hpp"

namespace ordo::cpu {

void rmsnorm(const rmsnorm_args& a);

} // namespace ordo::cpu
