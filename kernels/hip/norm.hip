// RMSNorm: one group of 8 threads per row; the sum of squares in the CPU dot's lane order.
#include "kernels/hip/device_math.hpp"
#include "kernels/hip/launch.hpp"
#include "kernels/hip/paging.hpp"

namespace ordo::hip {
namespace {

constexpr int threads = 256, rows_per_block = threads / 8;

__global__ void rmsnorm_kernel(rmsnorm_args a) {
  const int32_t lane = threadIdx.x & 7;
  const int32_t r = blockIdx.x * rows_per_block + threadIdx.x / 8;
  const bool live = r < a.rows;
  const float* x = a.x + static_cast<int64_t>(live ? r : 0) * a.ldx;
  float sum = 0.0f;
  if (live)
    for (int32_t i = 0; i + 8 <= a.dim; i += 8) sum += x[i + lane] * x[i + lane];
  sum += ORDO_SHFL_XOR(sum, 1);
  sum += ORDO_SHFL_XOR(sum, 2);
  sum += ORDO_SHFL_XOR(sum, 4);
  if (!live) return;
  for (int32_t i = a.dim / 8 * 8; i < a.dim; ++i) sum += x[i] * x[i];
  const float inv = 1.0f / sqrtf(sum / static_cast<float>(a.dim) + a.eps);
  float* y = a.y + static_cast<int64_t>(r) * a.ldy;
  for (int32_t i = lane; i < a.dim; i += 8) y[i] = x[i] * inv * a.w[i];
}

} // namespace

void rmsnorm(const rmsnorm_args& a, hipStream_t stream) {
  if (a.rows <= 0) return;
  rmsnorm_kernel<<<blocks_for(a.rows, rows_per_block), threads, 0, stream>>>(a);
  ORDO_HIP_LAUNCHED();
}

} // namespace ordo::hip
