// Rotary embedding from the host-built cos/sin table: one block per row (kernels/hip/rope_row.hpp).
#include "kernels/hip/launch.hpp"
#include "kernels/hip/rope_row.hpp"

namespace ordo::hip {
namespace {

__global__ void rope_kernel(rope_args a) { rope_row(a, blockIdx.x); }

} // namespace

void rope(const rope_args& a, hipStream_t stream) {
  if (a.rows <= 0) return;
  rope_kernel<<<a.rows, 128, 0, stream>>>(a);
  ORDO_HIP_LAUNCHED();
}

} // namespace ordo::hip
