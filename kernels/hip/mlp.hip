// SwiGLU: silu(gate) * up, element-wise, with the CPU's expf (kernels/hip/device_math.hpp).
#include "kernels/hip/device_math.hpp"
#include "kernels/hip/launch.hpp"
#include "kernels/hip/paging.hpp"

namespace ordo::hip {
namespace {

__global__ void swiglu_kernel(swiglu_args a) {
  const int64_t t = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (t >= static_cast<int64_t>(a.rows) * a.dim) return;
  const int64_t r = t / a.dim, i = t % a.dim;
  const float* g = a.gate_up + r * 2 * a.dim;
  const int32_t j = static_cast<int32_t>(i);
  a.out[r * a.dim + i] = gpu::silu(g[swiglu_gate_at(j, a.group)]) * g[swiglu_up_at(j, a.dim, a.group)];
}

} // namespace

void swiglu(const swiglu_args& a, hipStream_t stream) {
  const int64_t n = static_cast<int64_t>(a.rows) * a.dim;
  if (n <= 0) return;
  swiglu_kernel<<<blocks_for(n, 256), 256, 0, stream>>>(a);
  ORDO_HIP_LAUNCHED();
}

} // namespace ordo::hip
