// RMSNorm over rows.
#pragma once

#include "runtime/kernel_args.hpp"

namespace ordo::cpu {

void rmsnorm(const rmsnorm_args& a);

} // namespace ordo::cpu
