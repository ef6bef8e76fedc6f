// Device twins of kernels/cpu/paging.hpp: position → KV slot through the block table, state slot
// lookup. A bad index traps the kernel (the CPU reference aborts), leaving a sticky device error.
#pragma once

#include <cstdint>
#include <cstdio>

#include "kernels/batch.hpp"
#include "kernels/hip_compat.hpp"

namespace ordo::hip {

__device__ inline void kernel_fail(const char* what, long long value) {
  printf("ordo hip kernel: %s (%lld)\n", what, value);
  ORDO_DEVICE_TRAP();
}

__device__ inline int64_t slot_of(const device_batch& b, int32_t req, int32_t position, int32_t block_size) {
  const int32_t start = b.req_block_table_start[req], end = b.req_block_table_start[req + 1];
  const int32_t idx = position / block_size;
  if (idx >= end - start) kernel_fail("position beyond the request's block table", position);
  return static_cast<int64_t>(b.block_tables[start + idx]) * block_size + position % block_size;
}

__device__ inline uint8_t* state_slot(const device_batch& b, int32_t req, uint8_t* base, size_t slot_bytes,
                                      int32_t num_slots) {
  const int32_t s = b.req_state_slot[req];
  if (s < 0 || s >= num_slots) kernel_fail("request without a valid state slot", s);
  return base + static_cast<size_t>(s) * slot_bytes;
}

inline unsigned blocks_for(int64_t n, int threads) { return static_cast<unsigned>((n + threads - 1) / threads); }

// Launch errors surface at once, at the op that caused them.
#define ORDO_HIP_LAUNCHED() ORDO_HIP_CHECK(hipGetLastError())

} // namespace ordo::hip
