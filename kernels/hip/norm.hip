// RMSNorm, one block per row: the block stages the row in shared memory (one coalesced pass), 8
// threads take the sum of squares in the CPU dot's lane order from there, then the block scales
// the row. A row too long for shared memory is summed from global memory instead.
#include "kernels/hip/device_math.hpp"
#include "kernels/hip/launch.hpp"
#include "kernels/hip/paging.hpp"

namespace ordo::hip {
namespace {

constexpr int threads = 256;
constexpr int32_t max_staged = 12288; // floats: 48 KiB of dynamic shared memory

__global__ void rmsnorm_kernel(rmsnorm_args a) {
  extern __shared__ float row_s[];
  __shared__ float inv_s;
  const int32_t r = blockIdx.x, tid = threadIdx.x;
  const float* x = a.x + static_cast<int64_t>(r) * a.ldx;
  const bool staged = a.dim <= max_staged;
  if (staged)
    for (int32_t i = tid; i < a.dim; i += threads) row_s[i] = x[i];
  __syncthreads();
  const float* xr = staged ? row_s : x;
  if (tid < 32) { // one warp: the shuffles span it
    const int32_t lane = tid & 7;
    float sum = 0.0f;
    if (tid < 8) {
      int32_t i = 0;
      for (; i + 64 <= a.dim; i += 64) { // a lane's loads issued ahead of its (sequential) adds
        float v[8];
#pragma unroll
        for (int u = 0; u < 8; ++u) v[u] = xr[i + 8 * u + lane];
#pragma unroll
        for (int u = 0; u < 8; ++u) sum += v[u] * v[u];
      }
      for (; i + 8 <= a.dim; i += 8) sum += xr[i + lane] * xr[i + lane];
    }
    sum = gpu::lane_tree8(sum);
    if (tid == 0) {
      for (int32_t i = a.dim / 8 * 8; i < a.dim; ++i) sum += xr[i] * xr[i];
      inv_s = 1.0f / sqrtf(sum / static_cast<float>(a.dim) + a.eps);
    }
  }
  __syncthreads();
  // y = x · inv · w elementwise (no order to keep).
  float* y = a.y + static_cast<int64_t>(r) * a.ldy;
  for (int32_t i = tid; i < a.dim; i += threads) y[i] = xr[i] * inv_s * a.w[i];
}

} // namespace

void rmsnorm(const rmsnorm_args& a, hipStream_t stream) {
  if (a.rows <= 0) return;
  const size_t smem = a.dim <= max_staged ? static_cast<size_t>(a.dim) * sizeof(float) : 0;
  rmsnorm_kernel<<<a.rows, threads, smem, stream>>>(a);
  ORDO_HIP_LAUNCHED();
}

} // namespace ordo::hip
