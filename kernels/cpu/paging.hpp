// Position → KV slot through a request's block table (device_batch fields), and state slot
// lookup with bounds checks.
#pragma once

#include <cstddef>
#include <cstdint>

#include "kernels/batch.hpp"
#include "kernels/cpu/dtype.hpp"

namespace ordo::cpu {

inline int64_t slot_of(const device_batch& b, int32_t req, int32_t position, int32_t block_size) {
  const int32_t start = b.req_block_table_start[req], end = b.req_block_table_start[req + 1];
  const int32_t idx = position / block_size;
  if (idx >= end - start) kernel_fail("position beyond the request's block table", position);
  return static_cast<int64_t>(b.block_tables[start + idx]) * block_size + position % block_size;
}

inline uint8_t* state_slot(const device_batch& b, int32_t req, uint8_t* base, size_t slot_bytes, int32_t num_slots) {
  const int32_t s = b.req_state_slot[req];
  if (s < 0 || s >= num_slots) kernel_fail("request without a valid state slot", s);
  return base + static_cast<size_t>(s) * slot_bytes;
}

} // namespace ordo::cpu
