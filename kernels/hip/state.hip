// Zeroes the recurrent-state slot of each request that starts from an empty prefix.
#include "kernels/hip/launch.hpp"
#include "kernels/hip/paging.hpp"

namespace ordo::hip {
namespace {

__global__ void state_reset_kernel(state_reset_args a) {
  const int32_t r = blockIdx.x;
  if (a.batch.req_reset_state[r] != 1) return;
  uint8_t* slot = state_slot(a.batch, r, a.state_base, a.slot_bytes, a.num_slots);
  for (size_t i = threadIdx.x; i < a.slot_bytes; i += blockDim.x) slot[i] = 0;
}

} // namespace

void state_reset(const state_reset_args& a, hipStream_t stream) {
  if (a.batch.num_reqs <= 0) return;
  state_reset_kernel<<<a.batch.num_reqs, 256, 0, stream>>>(a);
  ORDO_HIP_LAUNCHED();
}

} // namespace ordo::hip
