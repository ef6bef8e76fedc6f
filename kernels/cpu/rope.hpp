// Rotary position embedding from a host-built cos/sin table.
#pragma once

#include "kernels/kernel_args.hpp"

namespace ordo::cpu {

void rope(const rope_args& a);

} // namespace ordo::cpu
