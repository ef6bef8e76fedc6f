// y (+)= x · Wᵀ. Eight threads per output, one per lane of kernels/cpu/dot.hpp, combined by
// shuffles in the CPU's tree: each output's sum order is fixed by `in` alone (no split-K), so
// the result is batch-invariant and bitwise equal to the CPU reference.
// A block computes 32·C outputs for a tile of up to `R` rows: each weight element is read once
// per tile instead of once per row, the tile's inputs are staged in shared memory, and each
// thread keeps C × R lane sums in registers. Every
// (row, output, lane) still accumulates its own products in ascending order with the same
// fused `sum = fma(x, w, sum)` as the CPU (kernels/cpu/matmul.cpp), so tiling changes the memory
// traffic, never a bit of the result.
#include <stdexcept>

#include "kernels/hip/device_math.hpp"
#include "kernels/hip/launch.hpp"
#include "kernels/hip/paging.hpp"

namespace ordo::hip {
namespace {

constexpr int k_tile = 256; // inputs staged per pass (a multiple of 8)
constexpr int unroll = 8;   // weight loads a thread issues before their multiply-adds

template <int R, int C, int threads>
__global__ void __launch_bounds__(threads) matmul_kernel(matmul_args a) {
  constexpr int outputs_per_block = threads / 8;
  __shared__ float xs[R][k_tile];
  const int32_t lane = threadIdx.x & 7;
  const int32_t group = threadIdx.x / 8;
  const int32_t r0 = blockIdx.y * R;
  const int32_t nrows = a.rows - r0 < R ? a.rows - r0 : R;
  const int32_t in8 = a.in / 8 * 8;
  // Outputs o_c = first + c * 32: each thread holds C outputs × R rows of lane sums.
  const int32_t first = blockIdx.x * outputs_per_block * C + group;
  const float* w[C];
  bool live[C];
#pragma unroll
  for (int c = 0; c < C; ++c) {
    live[c] = first + c * outputs_per_block < a.out;
    w[c] = a.w + static_cast<int64_t>(live[c] ? first + c * outputs_per_block : 0) * a.in;
  }
  float sum[C][R];
#pragma unroll
  for (int c = 0; c < C; ++c)
#pragma unroll
    for (int rr = 0; rr < R; ++rr) sum[c][rr] = 0.0f;
  for (int32_t k0 = 0; k0 < in8; k0 += k_tile) {
    const int32_t kt = in8 - k0 < k_tile ? in8 - k0 : k_tile;
    for (int32_t e = threadIdx.x; e < R * k_tile; e += threads) {
      const int32_t rr = e / k_tile, kk = e % k_tile;
      xs[rr][kk] = rr < nrows && kk < kt ? a.x[static_cast<int64_t>(r0 + rr) * a.ldx + k0 + kk] : 0.0f;
    }
    __syncthreads();
    if (live[0]) {
      int32_t kk = 0;
      // `unroll` steps' weights are loaded first (more loads in flight), then added in order.
      for (; kk + 8 * unroll <= kt; kk += 8 * unroll) {
        float wv[unroll][C];
#pragma unroll
        for (int u = 0; u < unroll; ++u)
#pragma unroll
          for (int c = 0; c < C; ++c) wv[u][c] = w[c][k0 + kk + 8 * u + lane];
#pragma unroll
        for (int u = 0; u < unroll; ++u)
#pragma unroll
          for (int rr = 0; rr < R; ++rr) {
            const float xv = xs[rr][kk + 8 * u + lane];
#pragma unroll
            for (int c = 0; c < C; ++c) sum[c][rr] = __fmaf_rn(xv, wv[u][c], sum[c][rr]);
          }
      }
      for (; kk < kt; kk += 8) {
        float wv[C];
#pragma unroll
        for (int c = 0; c < C; ++c) wv[c] = w[c][k0 + kk + lane];
#pragma unroll
        for (int rr = 0; rr < R; ++rr) {
          const float xv = xs[rr][kk + lane];
#pragma unroll
          for (int c = 0; c < C; ++c) sum[c][rr] = __fmaf_rn(xv, wv[c], sum[c][rr]);
        }
      }
    }
    __syncthreads();
  }
  // Every thread of the warp takes part in the shuffles, live or not.
#pragma unroll
  for (int c = 0; c < C; ++c)
#pragma unroll
    for (int rr = 0; rr < R; ++rr) sum[c][rr] = gpu::lane_tree8(sum[c][rr]);
  if (lane != 0) return;
#pragma unroll
  for (int c = 0; c < C; ++c) {
    if (!live[c]) break;
#pragma unroll
    for (int rr = 0; rr < R; ++rr) {
      if (rr >= nrows) break;
      const float* x = a.x + static_cast<int64_t>(r0 + rr) * a.ldx;
      float s = sum[c][rr];
      for (int32_t i = in8; i < a.in; ++i) s = __fmaf_rn(x[i], w[c][i], s);
      float* y = a.y + static_cast<int64_t>(r0 + rr) * a.ldy + first + c * outputs_per_block;
      *y = a.accumulate ? *y + s : s;
    }
  }
}

// Decode-sized batches: one group of 8 threads per output (lane = thread & 7) and 8 outputs per
// block, so even one row spreads over every multiprocessor; each thread keeps R row sums and reads
// x through the cache (every block reads the same few rows). The weights stream U loads ahead per
// thread, double-buffered: with so few threads per output, the loads in flight set the bandwidth.
// Each lane's products are still added in ascending k with the CPU's fused step.
template <int R, int U>
__global__ void __launch_bounds__(64) matmul_rows_kernel(matmul_args a) {
  const int32_t lane = threadIdx.x & 7;
  const int32_t o = blockIdx.x * 8 + threadIdx.x / 8;
  const int32_t r0 = blockIdx.y * R;
  const int32_t nrows = a.rows - r0 < R ? a.rows - r0 : R;
  const bool live = o < a.out;
  const int32_t in8 = a.in / 8 * 8;
  const float* w = a.w + static_cast<int64_t>(live ? o : 0) * a.in;
  const float* x = a.x + static_cast<int64_t>(r0) * a.ldx;
  float sum[R];
#pragma unroll
  for (int rr = 0; rr < R; ++rr) sum[rr] = 0.0f;
  const auto step = [&](int32_t k, float wv) {
#pragma unroll
    for (int rr = 0; rr < R; ++rr)
      if (rr < nrows) sum[rr] = __fmaf_rn(x[static_cast<int64_t>(rr) * a.ldx + k], wv, sum[rr]);
  };
  if (live) {
    const int32_t steps = in8 / 8, batches = steps / U;
    const float* wk = w + lane;
    float cur[U], nxt[U];
    if (batches > 0) {
#pragma unroll
      for (int u = 0; u < U; ++u) cur[u] = wk[8 * u];
    }
    for (int32_t b = 0; b < batches; ++b) {
      if (b + 1 < batches) {
#pragma unroll
        for (int u = 0; u < U; ++u) nxt[u] = wk[8 * ((b + 1) * U + u)];
      }
#pragma unroll
      for (int u = 0; u < U; ++u) step(8 * (b * U + u) + lane, cur[u]);
#pragma unroll
      for (int u = 0; u < U; ++u) cur[u] = nxt[u];
    }
    for (int32_t st = batches * U; st < steps; ++st) step(8 * st + lane, wk[8 * st]);
  }
#pragma unroll
  for (int rr = 0; rr < R; ++rr) sum[rr] = gpu::lane_tree8(sum[rr]);
  if (lane != 0 || !live) return;
#pragma unroll
  for (int rr = 0; rr < R; ++rr) {
    if (rr >= nrows) break;
    const float* xr = x + static_cast<int64_t>(rr) * a.ldx;
    float s = sum[rr];
    for (int32_t i = in8; i < a.in; ++i) s = __fmaf_rn(xr[i], w[i], s);
    float* y = a.y + static_cast<int64_t>(r0 + rr) * a.ldy + o;
    *y = a.accumulate ? *y + s : s;
  }
}

template <int R, int U>
void launch_rows(const matmul_args& a, hipStream_t stream) {
  const dim3 grid(blocks_for(a.out, 8), (a.rows + R - 1) / R);
  matmul_rows_kernel<R, U><<<grid, 64, 0, stream>>>(a);
  ORDO_HIP_LAUNCHED();
}

template <int R, int C, int threads>
void launch(const matmul_args& a, hipStream_t stream) {
  const dim3 grid(blocks_for(a.out, threads / 8 * C), (a.rows + R - 1) / R);
  matmul_kernel<R, C, threads><<<grid, threads, 0, stream>>>(a);
  ORDO_HIP_LAUNCHED();
}

} // namespace

void matmul(const matmul_args& a, hipStream_t stream) {
  if (a.rows <= 0 || a.out <= 0) return;
  // Prefill tiles: 16 rows × 128 outputs per block. Decode-sized batches: 8 outputs per block, so
  // that a batch of a few rows still spreads over every multiprocessor, and at most 8 rows per
  // block row (12 or 16 row sums per thread ran 3-7x slower than tiles of 8 on the H200).
  if (a.rows > 64)
    launch<16, 4, 256>(a, stream);
  else if (a.rows > 4)
    launch_rows<8, 32>(a, stream);
  else if (a.rows > 2)
    launch_rows<4, 32>(a, stream);
  else if (a.rows == 2)
    launch_rows<2, 64>(a, stream);
  else
    launch_rows<1, 64>(a, stream);
}

} // namespace ordo::hip
