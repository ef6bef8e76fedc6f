// Zeroes recurrent-state slots of requests that start from an empty prefix.
#pragma once

#include "kernels/kernel_args.hpp"

namespace ordo::cpu {

void state_reset(const state_reset_args& a);

} // namespace ordo::cpu
