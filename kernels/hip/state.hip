// Zeroes the recurrent-state slot of each request that starts from an empty prefix.
#include <algorithm>

#include "kernels/hip/launch.hpp"
#include "kernels/hip/paging.hpp"

namespace ordo::hip {
namespace {

// grid.y blocks share each slot; 16-byte words where the slot allows (zero bytes either way).
__global__ void state_reset_kernel(state_reset_args a) {
  const int32_t r = blockIdx.x;
  if (a.batch.req_reset_state[r] != 1) return;
  uint8_t* slot = state_slot(a.batch, r, a.state_base, a.slot_bytes, a.num_slots);
  const size_t stride = static_cast<size_t>(blockDim.x) * gridDim.y;
  const size_t first = static_cast<size_t>(blockIdx.y) * blockDim.x + threadIdx.x;
  if (a.slot_bytes % 16 == 0 && reinterpret_cast<uintptr_t>(slot) % 16 == 0) {
    uint4* words = reinterpret_cast<uint4*>(slot);
    for (size_t i = first; i < a.slot_bytes / 16; i += stride) words[i] = make_uint4(0, 0, 0, 0);
  } else {
    for (size_t i = first; i < a.slot_bytes; i += stride) slot[i] = 0;
  }
}

} // namespace

void state_reset(const state_reset_args& a, hipStream_t stream) {
  if (a.batch.num_reqs <= 0) return;
  const unsigned per_slot = static_cast<unsigned>(std::min<size_t>(a.slot_bytes / (16 * 256) + 1, 64));
  state_reset_kernel<<<dim3(a.batch.num_reqs, per_slot), 256, 0, stream>>>(a);
  ORDO_HIP_LAUNCHED();
}

} // namespace ordo::hip
