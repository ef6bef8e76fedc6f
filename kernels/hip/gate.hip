// The sigmoid output gate, x ← x · sigmoid(gate), element-wise with the CPU's expf
// (kernels/cpu/gate.cpp, kernels/hip/device_math.hpp).
#include "kernels/hip/device_math.hpp"
#include "kernels/hip/launch.hpp"
#include "kernels/hip/paging.hpp"

namespace ordo::hip {
namespace {

__global__ void output_gate_kernel(output_gate_args a) {
  const int64_t t = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (t >= static_cast<int64_t>(a.rows) * a.dim) return;
  const int64_t r = t / a.dim, i = t % a.dim;
  float* x = a.x + r * a.ldx + i;
  *x = *x * gpu::sigmoid(a.gate[r * a.ldg + i]);
}

} // namespace

void output_gate(const output_gate_args& a, hipStream_t stream) {
  const int64_t n = static_cast<int64_t>(a.rows) * a.dim;
  if (n <= 0) return;
  output_gate_kernel<<<blocks_for(n, 256), 256, 0, stream>>>(a);
  ORDO_HIP_LAUNCHED();
}

} // namespace ordo::hip
