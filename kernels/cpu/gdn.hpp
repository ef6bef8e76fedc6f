// Gated DeltaNet recurrence, token by token in fp32 per head.
#pragma once

#include "kernels/kernel_args.hpp"

namespace ordo::cpu {

void gdn(const gdn_args& a);

} // namespace ordo::cpu
