// Rotary position embedding from a host-built cos/sin table.
#pragma once

#include "runtime/kernel_args.hpp"

namespace ordo::cpu {

void rope(const rope_args& a);

} // namespace ordo::cpu
