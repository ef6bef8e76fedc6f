// Page-unit gather / scatter between the KV arena and a contiguous host buffer, unit-major or
// segment-major, skipping negative unit ids (the layouts and the skip rule are documented at
// unit_copy_args in kernels/kernel_args.hpp). The reference for kernels/hip.
#pragma once

#include "kernels/kernel_args.hpp"

namespace ordo::cpu {

void unit_copy(const unit_copy_args& a);

} // namespace ordo::cpu
