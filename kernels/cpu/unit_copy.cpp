#include "kernels/cpu/unit_copy.hpp"

#include <cstring>

#include "kernels/object_checksum.hpp"

namespace ordo::cpu {

void unit_copy(const unit_copy_args& a) {
  const bool gather = a.direction == unit_copy_direction::gather;
  const uint64_t num_units = static_cast<uint64_t>(a.num_units > 0 ? a.num_units : 0);
  uint64_t unit_bytes = 0;
  for (int32_t f = 0; f < a.num_fields; ++f) unit_bytes += a.block_bytes[f];
  // Each (field, entry) block goes to the host offset of kernel_args.hpp's formula, computed
  // whole rather than by advancing a cursor, so a skipped entry moves no other entry.
  uint64_t before = 0; // sum of block_bytes of the fields before f
  for (int32_t f = 0; f < a.num_fields; ++f) {
    const uint64_t bb = a.block_bytes[f];
    for (uint64_t i = 0; i < num_units; ++i) {
      const int32_t u = a.unit_ids[i];
      if (u < 0) continue; // skipped entry
      uint8_t* block = a.regions[f] + static_cast<uint64_t>(u) * bb;
      uint8_t* host = a.host + (a.segment_major ? num_units * before + i * bb : i * unit_bytes + before);
      if (gather)
        std::memcpy(host, block, bb);
      else
        std::memcpy(block, host, bb);
    }
    before += bb;
  }
  if (a.checksum)
    *a.checksum += checksum_terms(a.host, num_units * unit_bytes, 0);
}

} // namespace ordo::cpu
