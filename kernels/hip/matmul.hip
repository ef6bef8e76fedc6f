// y (+)= x · Wᵀ. Eight threads per output, one per lane of kernels/cpu/dot.hpp, combined by
// shuffles in the CPU's tree: each output's sum order is fixed by `in` alone (no split-K), so
// the result is batch-invariant and bitwise equal to the CPU reference.
#include <stdexcept>

#include "kernels/hip/device_math.hpp"
#include "kernels/hip/launch.hpp"
#include "kernels/hip/paging.hpp"

namespace ordo::hip {
namespace {

constexpr int threads = 256, outputs_per_block = threads / 8;

__global__ void matmul_kernel(matmul_args a) {
  const int32_t lane = threadIdx.x & 7;
  const int32_t o = blockIdx.x * outputs_per_block + threadIdx.x / 8;
  const int32_t r = blockIdx.y;
  const bool live = o < a.out;
  const float* x = a.x + r * a.ldx;
  const float* w = a.w + static_cast<int64_t>(live ? o : 0) * a.in;
  float sum = 0.0f;
  int32_t i = 0;
  if (live)
    for (; i + 8 <= a.in; i += 8) sum += x[i + lane] * w[i + lane];
  // Every thread of the warp takes part in the shuffles, live or not.
  sum += ORDO_SHFL_XOR(sum, 1);
  sum += ORDO_SHFL_XOR(sum, 2);
  sum += ORDO_SHFL_XOR(sum, 4);
  if (!live || lane != 0) return;
  for (i = a.in / 8 * 8; i < a.in; ++i) sum += x[i] * w[i];
  float* y = a.y + r * a.ldy + o;
  *y = a.accumulate ? *y + sum : sum;
}

} // namespace

void matmul(const matmul_args& a, hipStream_t stream) {
  if (a.rows <= 0 || a.out <= 0) return;
  matmul_kernel<<<dim3(blocks_for(a.out, outputs_per_block), a.rows), threads, 0, stream>>>(a);
  ORDO_HIP_LAUNCHED();
}

} // namespace ordo::hip
