#include "kernels/cpu/unit_copy.hpp"

#include <cstring>

#include "kernels/cpu/dtype.hpp"

namespace ordo::cpu {

void unit_copy(const unit_copy_args& a) {
  const bool gather = a.direction == unit_copy_direction::gather;
  uint8_t* host = a.host;
  for (int32_t i = 0; i < a.num_units; ++i) {
    const int32_t u = a.unit_ids[i];
    if (u < 0) kernel_fail("unit_copy: negative unit id", u);
    for (int32_t f = 0; f < a.num_fields; ++f) {
      const size_t bb = a.block_bytes[f];
      uint8_t* block = a.regions[f] + static_cast<size_t>(u) * bb;
      if (gather)
        std::memcpy(host, block, bb);
      else
        std::memcpy(block, host, bb);
      host += bb;
    }
  }
}

} // namespace ordo::cpu
