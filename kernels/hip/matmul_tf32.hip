// y (+)= x · Wᵀ on the matrix units (device.matmul = "tf32"): 16×16×8 TF32 tiles with fp32
// accumulators. Both operands are rounded to TF32 (round to nearest, ties away) as they are staged
// in shared memory; k runs in steps of 8 in ascending order from a zero accumulator, with no
// split-K, so every output element takes the same sequence of matrix ops whatever the row count,
// the tile shape or the row's place in its tile: the result is batch-invariant and deterministic,
// though not equal to the CPU reference (gpu_check reports the error and checks the invariance).
// Steps past the end of k are not issued; the tail of the last step is zero-padded, the same way
// for every tile shape.
#include <stdexcept>

#include "kernels/hip/launch.hpp"
#include "kernels/hip/paging.hpp"

namespace ordo::hip {

#if ORDO_HAS_TF32_MMA
namespace {

namespace wmma = nvcuda::wmma;

constexpr int k_step = 8;       // k per matrix op
constexpr int k_tile = 32;      // k staged per pass
constexpr int ld = k_tile + 4;  // shared row stride in floats (a multiple of 4; 16 rows = 2304 B)

// Four consecutive k of one row from k (a multiple of 4), zero past `limit`. `vec`: the rows are
// 16-byte aligned (row stride and pointer), so in-range quads load as one float4.
__device__ inline float4 load4(const float* row, int32_t k, int32_t limit, bool vec) {
  if (vec && k + 3 < limit) return *reinterpret_cast<const float4*>(row + k);
  float4 v;
  v.x = k < limit ? row[k] : 0.0f;
  v.y = k + 1 < limit ? row[k + 1] : 0.0f;
  v.z = k + 2 < limit ? row[k + 2] : 0.0f;
  v.w = k + 3 < limit ? row[k + 3] : 0.0f;
  return v;
}

__device__ inline void store_tf32(float* dst, float4 v) {
  float4 t;
  t.x = wmma::__float_to_tf32(v.x);
  t.y = wmma::__float_to_tf32(v.y);
  t.z = wmma::__float_to_tf32(v.z);
  t.w = wmma::__float_to_tf32(v.w);
  *reinterpret_cast<float4*>(dst) = t;
}

// A block computes BM rows × BN outputs with WARPS_M × WARPS_N warps, each FM × FN fragments.
// The k tiles are fetched DEPTH tiles ahead into registers, so their global loads overlap the
// matrix ops of the tiles before them; a tile is rounded to TF32 as it is staged in shared memory.
template <int BM, int BN, int WARPS_M, int WARPS_N, int DEPTH>
__global__ void __launch_bounds__(WARPS_M * WARPS_N * 32) matmul_tf32_kernel(matmul_args a, bool vec) {
  constexpr int threads = WARPS_M * WARPS_N * 32;
  constexpr int FM = BM / WARPS_M / 16, FN = BN / WARPS_N / 16;
  constexpr int quads = k_tile / 4; // float4 per tile row
  constexpr int XQ = (BM * quads + threads - 1) / threads, WQ = (BN * quads + threads - 1) / threads;
  static_assert(FM * WARPS_M * 16 == BM && FN * WARPS_N * 16 == BN, "tile must split into 16×16 fragments");
  static_assert(BM * ld >= WARPS_M * WARPS_N * 256, "the epilogue reuses xs as 16×16 scratch per warp");
  __shared__ __align__(128) float xs[BM * ld];
  __shared__ __align__(128) float ws[BN * ld];
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int wm = warp / WARPS_N, wn = warp % WARPS_N;
  const int32_t r0 = blockIdx.y * BM, n0 = blockIdx.x * BN;
  const int32_t tiles = (a.in + k_tile - 1) / k_tile;

  float4 xr[DEPTH][XQ], wr[DEPTH][WQ];
  const auto fetch = [&](float4 (&xq)[XQ], float4 (&wq)[WQ], int32_t tile) {
    const int32_t k0 = tile * k_tile;
#pragma unroll
    for (int i = 0; i < XQ; ++i) {
      const int e = threadIdx.x + i * threads, r = e / quads;
      const int32_t row = r0 + r;
      xq[i] = tile < tiles && e < BM * quads && row < a.rows
                  ? load4(a.x + static_cast<int64_t>(row) * a.ldx, k0 + (e % quads) * 4, a.in, vec)
                  : make_float4(0.0f, 0.0f, 0.0f, 0.0f);
    }
#pragma unroll
    for (int i = 0; i < WQ; ++i) {
      const int e = threadIdx.x + i * threads, n = e / quads;
      const int32_t out = n0 + n;
      wq[i] = tile < tiles && e < BN * quads && out < a.out
                  ? load4(a.w + static_cast<int64_t>(out) * a.in, k0 + (e % quads) * 4, a.in, vec)
                  : make_float4(0.0f, 0.0f, 0.0f, 0.0f);
    }
  };
  const auto stage = [&](const float4 (&xq)[XQ], const float4 (&wq)[WQ]) {
#pragma unroll
    for (int i = 0; i < XQ; ++i) {
      const int e = threadIdx.x + i * threads;
      if (e < BM * quads) store_tf32(xs + (e / quads) * ld + (e % quads) * 4, xq[i]);
    }
#pragma unroll
    for (int i = 0; i < WQ; ++i) {
      const int e = threadIdx.x + i * threads;
      if (e < BN * quads) store_tf32(ws + (e / quads) * ld + (e % quads) * 4, wq[i]);
    }
  };

  wmma::fragment<wmma::accumulator, 16, 16, k_step, float> acc[FM][FN];
#pragma unroll
  for (int i = 0; i < FM; ++i)
#pragma unroll
    for (int j = 0; j < FN; ++j) wmma::fill_fragment(acc[i][j], 0.0f);

#pragma unroll
  for (int d = 0; d < DEPTH; ++d) fetch(xr[d], wr[d], d);
  for (int32_t t0 = 0; t0 < tiles; t0 += DEPTH) {
#pragma unroll
    for (int d = 0; d < DEPTH; ++d) {
      const int32_t t = t0 + d;
      if (t >= tiles) break;
      stage(xr[d], wr[d]);
      __syncthreads();
      fetch(xr[d], wr[d], t + DEPTH);
      const int32_t left = a.in - t * k_tile;
      const int steps = left >= k_tile ? k_tile / k_step : (left + k_step - 1) / k_step;
      for (int s = 0; s < steps; ++s) {
        wmma::fragment<wmma::matrix_a, 16, 16, k_step, wmma::precision::tf32, wmma::row_major> fa[FM];
        wmma::fragment<wmma::matrix_b, 16, 16, k_step, wmma::precision::tf32, wmma::col_major> fb[FN];
#pragma unroll
        for (int i = 0; i < FM; ++i) wmma::load_matrix_sync(fa[i], xs + (wm * FM + i) * 16 * ld + s * k_step, ld);
#pragma unroll
        for (int j = 0; j < FN; ++j) wmma::load_matrix_sync(fb[j], ws + (wn * FN + j) * 16 * ld + s * k_step, ld);
#pragma unroll
        for (int i = 0; i < FM; ++i)
#pragma unroll
          for (int j = 0; j < FN; ++j) wmma::mma_sync(acc[i][j], fa[i], fb[j], acc[i][j]);
      }
      __syncthreads();
    }
  }

  // Each warp writes its fragments through its own 16×16 scratch, so edges and `accumulate`
  // are handled per element, exactly as in the exact kernel (y = y + s).
  float* scratch = xs + warp * 256;
#pragma unroll
  for (int i = 0; i < FM; ++i)
#pragma unroll
    for (int j = 0; j < FN; ++j) {
      wmma::store_matrix_sync(scratch, acc[i][j], 16, wmma::mem_row_major);
      __syncwarp();
      for (int e = lane; e < 256; e += 32) {
        const int32_t row = r0 + (wm * FM + i) * 16 + e / 16, out = n0 + (wn * FN + j) * 16 + e % 16;
        if (row < a.rows && out < a.out) {
          float* y = a.y + static_cast<int64_t>(row) * a.ldy + out;
          *y = a.accumulate ? *y + scratch[e] : scratch[e];
        }
      }
      __syncwarp();
    }
}

// Decode (at most 16 rows) where the weights allow it (in % 8 == 0, out % 16 == 0, W 32-byte
// aligned): each warp streams its 16-output strip of W from global memory straight into B
// fragments, AHEAD k-steps in flight, rounding each element to TF32 as the staged kernel does at
// staging; x is staged in shared memory x_chunk k at a time (rows past a.rows stay zero). The
// fragments hold the same values in the same order as the staged kernel's, so the bits agree.
constexpr int x_chunk = 256, x_ld = x_chunk + 4;

template <int WARPS, int AHEAD>
__global__ void __launch_bounds__(WARPS * 32) matmul_tf32_strip_kernel(matmul_args a) {
  __shared__ __align__(128) float xs[16 * x_ld];
  __shared__ __align__(128) float scratch_all[WARPS * 256];
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int32_t out0 = (blockIdx.x * WARPS + warp) * 16;
  const bool live = out0 < a.out;
  const float* wstrip = a.w + static_cast<int64_t>(live ? out0 : 0) * a.in;
  for (int e = threadIdx.x; e < 16 * x_ld; e += WARPS * 32) xs[e] = 0.0f;

  wmma::fragment<wmma::accumulator, 16, 16, k_step, float> acc;
  wmma::fill_fragment(acc, 0.0f);
  for (int32_t c0 = 0; c0 < a.in; c0 += x_chunk) {
    const int32_t cn = a.in - c0 < x_chunk ? a.in - c0 : x_chunk;
    __syncthreads(); // zeroed, or the previous chunk consumed
    // Eight loads issued before their stores (a batch of rows is up to 16 × x_chunk floats).
    constexpr int stride = WARPS * 32;
    for (int e0 = threadIdx.x; e0 < a.rows * x_chunk; e0 += 8 * stride) {
      float v[8];
#pragma unroll
      for (int u = 0; u < 8; ++u) {
        const int e = e0 + u * stride, r = e / x_chunk, k = e % x_chunk;
        v[u] = e < a.rows * x_chunk && k < cn ? a.x[static_cast<int64_t>(r) * a.ldx + c0 + k] : 0.0f;
      }
#pragma unroll
      for (int u = 0; u < 8; ++u) {
        const int e = e0 + u * stride, r = e / x_chunk, k = e % x_chunk;
        if (e < a.rows * x_chunk && k < cn) xs[r * x_ld + k] = wmma::__float_to_tf32(v[u]);
      }
    }
    __syncthreads();
    if (!live) continue;
    const int steps = cn / k_step;
    for (int s0 = 0; s0 < steps; s0 += AHEAD) {
      wmma::fragment<wmma::matrix_b, 16, 16, k_step, wmma::precision::tf32, wmma::col_major> fb[AHEAD];
#pragma unroll
      for (int u = 0; u < AHEAD; ++u)
        if (s0 + u < steps) wmma::load_matrix_sync(fb[u], wstrip + c0 + (s0 + u) * k_step, a.in);
#pragma unroll
      for (int u = 0; u < AHEAD; ++u) {
        if (s0 + u >= steps) break;
#pragma unroll
        for (int t = 0; t < fb[u].num_elements; ++t) fb[u].x[t] = wmma::__float_to_tf32(fb[u].x[t]);
        wmma::fragment<wmma::matrix_a, 16, 16, k_step, wmma::precision::tf32, wmma::row_major> fa;
        wmma::load_matrix_sync(fa, xs + (s0 + u) * k_step, x_ld);
        wmma::mma_sync(acc, fa, fb[u], acc);
      }
    }
  }
  if (!live) return;
  float* scratch = scratch_all + warp * 256;
  wmma::store_matrix_sync(scratch, acc, 16, wmma::mem_row_major);
  __syncwarp();
  for (int e = lane; e < 256; e += 32) {
    const int32_t row = e / 16, out = out0 + e % 16;
    if (row < a.rows) {
      float* y = a.y + static_cast<int64_t>(row) * a.ldy + out;
      *y = a.accumulate ? *y + scratch[e] : scratch[e];
    }
  }
}

template <int BM, int BN, int WARPS_M, int WARPS_N, int DEPTH>
void launch(const matmul_args& a, hipStream_t stream) {
  const bool vec = a.in % 4 == 0 && a.ldx % 4 == 0 && reinterpret_cast<uintptr_t>(a.x) % 16 == 0 &&
                   reinterpret_cast<uintptr_t>(a.w) % 16 == 0;
  const dim3 grid((a.out + BN - 1) / BN, (a.rows + BM - 1) / BM);
  matmul_tf32_kernel<BM, BN, WARPS_M, WARPS_N, DEPTH><<<grid, WARPS_M * WARPS_N * 32, 0, stream>>>(a, vec);
  ORDO_HIP_LAUNCHED();
}

} // namespace

bool has_tf32_matmul() { return true; }

void matmul_tf32(const matmul_args& a, hipStream_t stream) {
  if (a.rows <= 0 || a.out <= 0) return;
  // The tile shape follows the row count (decode: small tiles, more blocks); the per-element
  // sequence of matrix ops does not depend on it.
  if (a.rows <= 16 && a.in % k_step == 0 && a.out % 16 == 0 && reinterpret_cast<uintptr_t>(a.w) % 32 == 0) {
    matmul_tf32_strip_kernel<1, 16><<<a.out / 16, 32, 0, stream>>>(a);
    ORDO_HIP_LAUNCHED();
  } else if (a.rows <= 16)
    launch<16, 16, 1, 1, 4>(a, stream); // one warp per block: out / 16 blocks for a decode step
  else if (a.rows <= 64)
    launch<32, 64, 2, 2, 2>(a, stream);
  else
    launch<64, 128, 2, 4, 2>(a, stream);
}

#else

bool has_tf32_matmul() { return false; }

void matmul_tf32(const matmul_args&, hipStream_t) {
  throw std::invalid_argument("device.matmul = \"tf32\": no TF32 matrix units in this GPU build");
}

#endif

} // namespace ordo::hip
