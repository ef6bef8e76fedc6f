// RMSNorm, one block per (row, head) vector (rmsnorm_args::heads), optionally gated by silu: the
// block stages the vector in shared memory (one coalesced pass), 8
// threads take the sum of squares in the CPU dot's lane order from there, then the block scales
// the row. Rows up to 2048 floats keep x and w in registers from one round of loads; a row too
// long for shared memory is summed from global memory instead.
#include "kernels/hip/device_math.hpp"
#include "kernels/hip/launch.hpp"
#include "kernels/hip/paging.hpp"

namespace ordo::hip {
namespace {

constexpr int threads = 256;
constexpr int32_t max_staged = 12288; // floats: 48 KiB of dynamic shared memory
constexpr int regs_per_thread = 8;    // rows up to 2048 floats stay in registers too

// The row's sum of squares in the CPU dot's lane order: 8 threads of the first warp each sum one
// lane (a lane's loads issued ahead of its sequential adds), then the shuffles' tree and the tail.
// Every thread of warp 0 must call it; thread 0 gets the sum.
__device__ inline float lane_sum_squares(const float* xr, int32_t dim) {
  const int32_t tid = threadIdx.x, lane = tid & 7;
  float sum = 0.0f;
  if (tid < 8) {
    int32_t i = 0;
    for (; i + 64 <= dim; i += 64) {
      float v[8];
#pragma unroll
      for (int u = 0; u < 8; ++u) v[u] = xr[i + 8 * u + lane];
#pragma unroll
      for (int u = 0; u < 8; ++u) sum += v[u] * v[u];
    }
    for (; i + 8 <= dim; i += 8) sum += xr[i + lane] * xr[i + lane];
  }
  sum = gpu::lane_tree8(sum);
  if (tid == 0)
    for (int32_t i = dim / 8 * 8; i < dim; ++i) sum += xr[i] * xr[i];
  return sum;
}

__device__ inline float inverse_rms(float sum, const rmsnorm_args& a) {
  return 1.0f / sqrtf(sum / static_cast<float>(a.dim) + a.eps);
}

// Rows of at most regs_per_thread · threads floats: each thread loads its x and w elements in one
// round (all in flight together), stages x for the lane sums, and scales from its registers.
__global__ void __launch_bounds__(threads) rmsnorm_regs_kernel(rmsnorm_args a) {
  __shared__ float row_s[regs_per_thread * threads];
  __shared__ float inv_s;
  const int32_t r = blockIdx.x / a.heads, h = blockIdx.x % a.heads, tid = threadIdx.x;
  const float* x = a.x + static_cast<int64_t>(r) * a.ldx + static_cast<int64_t>(h) * a.dim;
  float xv[regs_per_thread], wv[regs_per_thread];
#pragma unroll
  for (int u = 0; u < regs_per_thread; ++u) {
    const int32_t i = tid + u * threads;
    xv[u] = i < a.dim ? x[i] : 0.0f;
    wv[u] = i < a.dim ? a.w[i] : 0.0f;
  }
#pragma unroll
  for (int u = 0; u < regs_per_thread; ++u)
    if (tid + u * threads < a.dim) row_s[tid + u * threads] = xv[u];
  __syncthreads();
  if (tid < 32) {
    const float sum = lane_sum_squares(row_s, a.dim);
    if (tid == 0) inv_s = inverse_rms(sum, a);
  }
  __syncthreads();
  const float inv = inv_s;
  float* y = a.y + static_cast<int64_t>(r) * a.ldy + static_cast<int64_t>(h) * a.dim;
  const float* g = a.gate ? a.gate + static_cast<int64_t>(r) * a.ldg + static_cast<int64_t>(h) * a.dim : nullptr;
#pragma unroll
  for (int u = 0; u < regs_per_thread; ++u) {
    const int32_t i = tid + u * threads;
    if (i >= a.dim) continue;
    const float n = xv[u] * inv * wv[u]; // (x · inv) · w, as the CPU
    y[i] = g ? n * gpu::silu(g[i]) : n;
  }
}

// Longer rows: staged in shared memory (or, past max_staged, summed from global memory).
__global__ void __launch_bounds__(threads) rmsnorm_kernel(rmsnorm_args a) {
  extern __shared__ float row_s[];
  __shared__ float inv_s;
  const int32_t r = blockIdx.x / a.heads, h = blockIdx.x % a.heads, tid = threadIdx.x;
  const float* x = a.x + static_cast<int64_t>(r) * a.ldx + static_cast<int64_t>(h) * a.dim;
  const bool staged = a.dim <= max_staged;
  if (staged)
    for (int32_t i = tid; i < a.dim; i += threads) row_s[i] = x[i];
  __syncthreads();
  const float* xr = staged ? row_s : x;
  if (tid < 32) {
    const float sum = lane_sum_squares(xr, a.dim);
    if (tid == 0) inv_s = inverse_rms(sum, a);
  }
  __syncthreads();
  // y = x · inv · w (· silu(gate)) elementwise (no order to keep). A staged row may be written in
  // place; one read from global memory (past max_staged) is read before its own write.
  float* y = a.y + static_cast<int64_t>(r) * a.ldy + static_cast<int64_t>(h) * a.dim;
  const float* g = a.gate ? a.gate + static_cast<int64_t>(r) * a.ldg + static_cast<int64_t>(h) * a.dim : nullptr;
  for (int32_t i = tid; i < a.dim; i += threads) {
    const float n = xr[i] * inv_s * a.w[i];
    y[i] = g ? n * gpu::silu(g[i]) : n;
  }
}

} // namespace

void rmsnorm(const rmsnorm_args& a, hipStream_t stream) {
  if (a.rows <= 0 || a.heads <= 0) return;
  const int64_t blocks = static_cast<int64_t>(a.rows) * a.heads;
  if (a.dim <= regs_per_thread * threads) {
    rmsnorm_regs_kernel<<<blocks, threads, 0, stream>>>(a);
  } else {
    const size_t smem = a.dim <= max_staged ? static_cast<size_t>(a.dim) * sizeof(float) : 0;
    rmsnorm_kernel<<<blocks, threads, smem, stream>>>(a);
  }
  ORDO_HIP_LAUNCHED();
}

} // namespace ordo::hip
