// y (+)= x · Wᵀ. Eight threads per output, one per lane of kernels/cpu/dot.hpp, combined by
// shuffles in the CPU's tree: each output's sum order is fixed by `in` alone (no split-K), so
// the result is batch-invariant and bitwise equal to the CPU reference.
// A block computes 32·C outputs for a tile of up to `R` rows: each weight element is read once
// per tile instead of once per row, the tile's inputs are staged in shared memory, and each
// thread keeps C × R lane sums in registers. Every
// (row, output, lane) still accumulates its own products in ascending order with the same
// fused `sum = fma(x, w, sum)` as the CPU (kernels/cpu/matmul.cpp), so tiling changes the memory
// traffic, never a bit of the result.
#include <cstdint>
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

// Prefill tiles with one k lane per thread. A block of `threads` computes BM rows × BN outputs:
// the low three bits of the thread index pick the lane (lane j sums k ≡ j mod 8, as in
// kernels/cpu/dot.hpp), the other bits one (BM / 8) × (BN / NC) cell of 8 rows × NC outputs,
// so a step is an outer product of 8 x values and NC weights read as 16-byte shared loads. The
// lane sums meet in the CPU's tree by shuffles at the end: the order of every sum is still fixed by
// `in` alone, so the result is bitwise the CPU's at any batch. Rows and weights need 16-byte
// alignment (checked by the caller); a k slice past `in8` is zero, and fma(0, 0, s) is s since a
// lane sum that starts at +0 is never -0.
constexpr int lane_bk = 32;  // k per slice: four steps per lane
constexpr int lane_pad = 4;  // a row stride ≡ 4 (mod 32) words keeps the 8 lanes' loads apart

template <int BM, int BN>
struct lane_tiles {
  float x[2][lane_bk][BM + lane_pad];
  float w[2][lane_bk][BN + lane_pad];
};

// The 16-byte quads of an `n`-row × lane_bk slice, `per` per thread: a warp takes two quads of
// 16 rows, so its global reads are whole 32-byte sectors and its transposed shared stores
// fall in distinct banks.
template <int n>
__device__ inline void quad_of(int32_t e, int32_t& row, int32_t& quad) {
  row = (e >> 1) % n;
  quad = (e & 1) + 2 * (e / (2 * n));
}

template <int n, int per, int threads>
__device__ inline void fetch_quads(float4 (&v)[per], const float* base, int64_t ld, int32_t first,
                                   int32_t limit, int32_t k, int32_t in8) {
#pragma unroll
  for (int l = 0; l < per; ++l) {
    int32_t row, quad;
    quad_of<n>(static_cast<int32_t>(threadIdx.x) + threads * l, row, quad);
    const int32_t kk = k + 4 * quad;
    v[l] = first + row < limit && kk < in8
               ? *reinterpret_cast<const float4*>(base + static_cast<int64_t>(first + row) * ld + kk)
               : make_float4(0.0f, 0.0f, 0.0f, 0.0f);
  }
}

template <int n, int per, int threads>
__device__ inline void stash_quads(const float4 (&v)[per], float (*s)[n + lane_pad]) {
#pragma unroll
  for (int l = 0; l < per; ++l) {
    int32_t row, quad;
    quad_of<n>(static_cast<int32_t>(threadIdx.x) + threads * l, row, quad);
    s[4 * quad + 0][row] = v[l].x;
    s[4 * quad + 1][row] = v[l].y;
    s[4 * quad + 2][row] = v[l].z;
    s[4 * quad + 3][row] = v[l].w;
  }
}

// NC = 8 or 16 outputs per cell. The tiles are bound by shared memory (ncu on the H100: L1 85 %,
// issue 64 %): each thread reads 64 bytes per 64 multiply-adds at NC = 8, 96 per 128 at NC = 16
// (64 × 64 tiles of 256 threads, 213 registers; 3-5 % faster than NC = 8 with 512 threads).
// fused (NC = 16): the weight rows are gate/up runs of 8 (swiglu_args::group = 8), so a cell's
// outputs 0-7 are gates and 8-15 their ups; the epilogue writes silu(gate) * up to sw.out instead
// of both to a.y.
template <int BM, int BN, int NC, int threads, bool fused = false>
__global__ void __launch_bounds__(threads, NC == 8 ? 512 / threads : 1)
    matmul_lanes_kernel(matmul_args a, swiglu_args sw) {
  static_assert(!fused || NC == 16, "a fused cell holds 8 gates and their 8 ups");
  constexpr int SC = BN / NC, NQ = NC / 4;
  static_assert((BM / 8) * SC * 8 == threads, "8 lanes x cells of 8 rows x NC outputs");
  constexpr int xq = BM * lane_bk / 4 / threads, wq = BN * lane_bk / 4 / threads;
  __shared__ __align__(16) lane_tiles<BM, BN> t;
  const int32_t lane = threadIdx.x & 7;
  const int32_t cell = threadIdx.x >> 3;
  const int32_t sr = cell / SC, sc = cell % SC;
  const int32_t r0 = blockIdx.y * BM, o0 = blockIdx.x * BN;
  const int32_t in8 = a.in / 8 * 8;
  float acc[8][NC];
#pragma unroll
  for (int i = 0; i < 8; ++i)
#pragma unroll
    for (int n = 0; n < NC; ++n) acc[i][n] = 0.0f;
  float4 xv[xq], wv[wq];
  fetch_quads<BM, xq, threads>(xv, a.x, a.ldx, r0, a.rows, 0, in8);
  fetch_quads<BN, wq, threads>(wv, a.w, a.in, o0, a.out, 0, in8);
  stash_quads<BM, xq, threads>(xv, t.x[0]);
  stash_quads<BN, wq, threads>(wv, t.w[0]);
  __syncthreads();
  for (int32_t k0 = 0, buf = 0; k0 < in8; k0 += lane_bk, buf ^= 1) {
    const bool more = k0 + lane_bk < in8;
    if (more) {
      fetch_quads<BM, xq, threads>(xv, a.x, a.ldx, r0, a.rows, k0 + lane_bk, in8);
      fetch_quads<BN, wq, threads>(wv, a.w, a.in, o0, a.out, k0 + lane_bk, in8);
    }
#pragma unroll
    for (int j = 0; j < lane_bk / 8; ++j) {
      const int32_t k = lane + 8 * j;
      const float4 x0 = *reinterpret_cast<const float4*>(&t.x[buf][k][8 * sr]);
      const float4 x1 = *reinterpret_cast<const float4*>(&t.x[buf][k][8 * sr + 4]);
      const float xr[8] = {x0.x, x0.y, x0.z, x0.w, x1.x, x1.y, x1.z, x1.w};
      float wr[NC];
#pragma unroll
      for (int q = 0; q < NQ; ++q) {
        const float4 wq4 = *reinterpret_cast<const float4*>(&t.w[buf][k][NC * sc + 4 * q]);
        wr[4 * q] = wq4.x, wr[4 * q + 1] = wq4.y, wr[4 * q + 2] = wq4.z, wr[4 * q + 3] = wq4.w;
      }
#pragma unroll
      for (int i = 0; i < 8; ++i)
#pragma unroll
        for (int n = 0; n < NC; ++n) acc[i][n] = __fmaf_rn(xr[i], wr[n], acc[i][n]);
    }
    if (more) {
      stash_quads<BM, xq, threads>(xv, t.x[buf ^ 1]);
      stash_quads<BN, wq, threads>(wv, t.w[buf ^ 1]);
    }
    __syncthreads();
  }
  // Lane j ends with the full sums of outputs NC·sc + 8h + j of its 8 rows: sum[i·(NC / 8) + h],
  // acc[i][8h + j] summed over the lanes (scattered: 7 shuffles per 8 sums, not 24).
  constexpr int H = NC / 8;
  float sum[8 * H];
  gpu::lane_tree8_scatter<8 * H>(reinterpret_cast<float (&)[8 * H][8]>(acc), sum);
  if constexpr (fused) {
    // Lane j holds gate o and its up o + 8 (o = o0 + 16·sc + j): the output j' = o0 / 2 + 8·sc + j.
    const int32_t o = o0 + NC * sc + lane;
    if (o + 8 >= a.out) return;
    const float* wg = a.w + static_cast<int64_t>(o) * a.in;
    const float* wu = wg + static_cast<int64_t>(8) * a.in;
    const int32_t j = (o0 + NC * sc) / 2 + lane;
#pragma unroll
    for (int i = 0; i < 8; ++i) {
      const int32_t r = r0 + 8 * sr + i;
      if (r >= a.rows) break;
      const float* x = a.x + static_cast<int64_t>(r) * a.ldx;
      float g = sum[H * i], u = sum[H * i + 1];
      for (int32_t kk = in8; kk < a.in; ++kk) g = __fmaf_rn(x[kk], wg[kk], g);
      for (int32_t kk = in8; kk < a.in; ++kk) u = __fmaf_rn(x[kk], wu[kk], u);
      sw.out[static_cast<int64_t>(r) * sw.dim + j] = gpu::silu(g) * u;
    }
  } else {
#pragma unroll
    for (int h = 0; h < H; ++h) {
      const int32_t o = o0 + NC * sc + 8 * h + lane;
      if (o >= a.out) break;
      const float* w = a.w + static_cast<int64_t>(o) * a.in;
#pragma unroll
      for (int i = 0; i < 8; ++i) {
        const int32_t r = r0 + 8 * sr + i;
        if (r >= a.rows) break;
        const float* x = a.x + static_cast<int64_t>(r) * a.ldx;
        float s = sum[H * i + h];
        for (int32_t kk = in8; kk < a.in; ++kk) s = __fmaf_rn(x[kk], w[kk], s);
        float* y = a.y + static_cast<int64_t>(r) * a.ldy + o;
        *y = a.accumulate ? *y + s : s;
      }
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

template <int BM, int BN, int NC, int threads>
void launch_lanes(const matmul_args& a, hipStream_t stream) {
  const dim3 grid(blocks_for(a.out, BN), (a.rows + BM - 1) / BM);
  matmul_lanes_kernel<BM, BN, NC, threads><<<grid, threads, 0, stream>>>(a, swiglu_args{});
  ORDO_HIP_LAUNCHED();
}

// The lane tiles read rows of x and of the weights as 16-byte quads.
bool quad_aligned(const matmul_args& a) {
  const auto aligned = [](const void* p) { return reinterpret_cast<uintptr_t>(p) % 16 == 0; };
  return aligned(a.x) && aligned(a.w) && a.ldx % 4 == 0 && a.in % 4 == 0;
}

template <int R, int C, int threads>
void launch(const matmul_args& a, hipStream_t stream) {
  const dim3 grid(blocks_for(a.out, threads / 8 * C), (a.rows + R - 1) / R);
  matmul_kernel<R, C, threads><<<grid, threads, 0, stream>>>(a);
  ORDO_HIP_LAUNCHED();
}

// The 64 × 64 lane tiles' condition in matmul(): at least about two blocks per multiprocessor.
bool wide_tiles(const matmul_args& a) {
  return static_cast<int64_t>((a.rows + 63) / 64) * ((a.out + 63) / 64) >= 256;
}

} // namespace

bool matmul_swiglu(const matmul_args& mm, const swiglu_args& sw, hipStream_t stream) {
  const bool fits = mm.rows > 64 && quad_aligned(mm) && wide_tiles(mm) && !mm.accumulate && sw.group == 8 &&
                    mm.out == 2 * sw.dim && mm.out % 64 == 0 && sw.rows == mm.rows && mm.ldy == mm.out &&
                    sw.gate_up == mm.y;
  if (!fits) return false;
  const dim3 grid(blocks_for(mm.out, 64), (mm.rows + 63) / 64);
  matmul_lanes_kernel<64, 64, 16, 256, true><<<grid, 256, 0, stream>>>(mm, sw);
  ORDO_HIP_LAUNCHED();
  return true;
}

void matmul(const matmul_args& a, hipStream_t stream) {
  if (a.rows <= 0 || a.out <= 0) return;
  // Prefill: lane tiles where the rows are 16-byte aligned, else 16 rows × 128 outputs per block.
  // Lane tiles of 64 × 64 (16 outputs per cell, 256 threads, one block per multiprocessor) read
  // each operand half as often as 32 × 64, but give half the blocks: they win once there are about
  // two blocks per multiprocessor (132 on the H100 and H200; 2048→512 at 512 rows has 64 and ran
  // 1.6x slower).
  // Decode-sized batches: 8 outputs per block, so that a batch of a few rows still spreads over
  // every multiprocessor, and at most 8 rows per block row (12 or 16 row sums per thread ran 3-7x
  // slower than tiles of 8 on the H200).
  if (a.rows > 64) {
    if (!quad_aligned(a))
      launch<16, 4, 256>(a, stream);
    else if (wide_tiles(a))
      launch_lanes<64, 64, 16, 256>(a, stream);
    else
      launch_lanes<32, 64, 8, 256>(a, stream);
  } else if (a.rows > 4)
    launch_rows<8, 32>(a, stream);
  else if (a.rows > 2)
    launch_rows<4, 32>(a, stream);
  else if (a.rows == 2)
    launch_rows<2, 64>(a, stream);
  else
    launch_rows<1, 64>(a, stream);
}

} // namespace ordo::hip
