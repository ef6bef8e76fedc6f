// RMSNorm: one group of 8 threads per row takes the sum of squares in the CPU dot's lane order;
// then the whole block scales its rows.
#include "kernels/hip/device_math.hpp"
#include "kernels/hip/launch.hpp"
#include "kernels/hip/paging.hpp"

namespace ordo::hip {
namespace {

constexpr int threads = 256, rows_per_block = threads / 8;

__global__ void rmsnorm_kernel(rmsnorm_args a) {
  __shared__ float inv_s[rows_per_block];
  const int32_t lane = threadIdx.x & 7;
  const int32_t r0 = blockIdx.x * rows_per_block, r = r0 + threadIdx.x / 8;
  const bool live = r < a.rows;
  const float* x = a.x + static_cast<int64_t>(live ? r : 0) * a.ldx;
  float sum = 0.0f;
  // Unrolled so that a lane's loads are issued ahead of its (sequential) adds.
  if (live) {
    int32_t i = 0;
    for (; i + 64 <= a.dim; i += 64) {
      float v[8];
#pragma unroll
      for (int u = 0; u < 8; ++u) v[u] = x[i + 8 * u + lane];
#pragma unroll
      for (int u = 0; u < 8; ++u) sum += v[u] * v[u];
    }
    for (; i + 8 <= a.dim; i += 8) sum += x[i + lane] * x[i + lane];
  }
  sum = gpu::lane_tree8(sum);
  if (live && lane == 0) {
    for (int32_t i = a.dim / 8 * 8; i < a.dim; ++i) sum += x[i] * x[i];
    inv_s[threadIdx.x / 8] = 1.0f / sqrtf(sum / static_cast<float>(a.dim) + a.eps);
  }
  __syncthreads();
  // y = x · inv · w elementwise (no order to keep): the whole block writes the block's rows.
  const int32_t nrows = a.rows - r0 < rows_per_block ? a.rows - r0 : rows_per_block;
  for (int64_t e = threadIdx.x; e < static_cast<int64_t>(nrows) * a.dim; e += threads) {
    const int32_t rr = static_cast<int32_t>(e / a.dim), i = static_cast<int32_t>(e % a.dim);
    a.y[static_cast<int64_t>(r0 + rr) * a.ldy + i] = a.x[static_cast<int64_t>(r0 + rr) * a.ldx + i] * inv_s[rr] * a.w[i];
  }
}

} // namespace

void rmsnorm(const rmsnorm_args& a, hipStream_t stream) {
  if (a.rows <= 0) return;
  rmsnorm_kernel<<<blocks_for(a.rows, rows_per_block), threads, 0, stream>>>(a);
  ORDO_HIP_LAUNCHED();
}

} // namespace ordo::hip
