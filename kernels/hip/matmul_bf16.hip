// y (+)= x · Wᵀ with bf16 weights on the matrix units (model.weight_dtype = "bf16"): 16×16×16
// bf16 tiles with fp32 accumulators. W is stored as bf16 (a.w_bf16); x is rounded to bf16 (to
// nearest even) as it is staged. k runs in steps of 16 in ascending order from a zero accumulator,
// with no split-K, so every output element takes the same sequence of matrix ops whatever the row
// count, the tile shape or the row's place in its tile: the result is batch-invariant and
// deterministic, though not equal to the CPU reference (gpu_check reports the error against the
// CPU on the same bf16 operands and checks the invariance). The tail of the last step is
// zero-padded, the same way for every tile shape. The structure follows matmul_tf32.hip.
#include <cstring>
#include <stdexcept>

#include "kernels/hip/launch.hpp"
#include "kernels/hip/paging.hpp"

namespace ordo::hip {

#if ORDO_HAS_BF16_MMA
namespace {

namespace wmma = nvcuda::wmma;
using bf16 = __nv_bfloat16;

constexpr int k_step = 16;     // k per matrix op
constexpr int k_tile = 64;     // k staged per pass
constexpr int ld = k_tile + 8; // shared row stride in bf16 (144 B: 16-byte rows, 32-byte fragments)

__device__ inline uint32_t bf16_pair(float lo, float hi) {
  const bf16 l = __float2bfloat16_rn(lo), h = __float2bfloat16_rn(hi);
  uint16_t lb, hb;
  memcpy(&lb, &l, 2);
  memcpy(&hb, &h, 2);
  return uint32_t(lb) | (uint32_t(hb) << 16);
}

// Four consecutive x of one row from k (a multiple of 4) as bf16 bits, zero past `limit`.
// `vec`: the rows are 16-byte aligned, so in-range quads load as one float4.
__device__ inline uint2 load_x4(const float* row, int32_t k, int32_t limit, bool vec) {
  float4 v;
  if (vec && k + 3 < limit) {
    v = *reinterpret_cast<const float4*>(row + k);
  } else {
    v.x = k < limit ? row[k] : 0.0f;
    v.y = k + 1 < limit ? row[k + 1] : 0.0f;
    v.z = k + 2 < limit ? row[k + 2] : 0.0f;
    v.w = k + 3 < limit ? row[k + 3] : 0.0f;
  }
  return make_uint2(bf16_pair(v.x, v.y), bf16_pair(v.z, v.w));
}

// Eight consecutive weights of one row from k (a multiple of 8), zero past `limit`. `vec`: the
// rows are 16-byte aligned (in % 8 == 0 and an aligned W), so in-range octets load as one uint4.
__device__ inline uint4 load_w8(const uint16_t* row, int32_t k, int32_t limit, bool vec) {
  if (vec && k + 7 < limit) return *reinterpret_cast<const uint4*>(row + k);
  uint32_t p[4];
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    const uint32_t lo = k + 2 * i < limit ? row[k + 2 * i] : 0u;
    const uint32_t hi = k + 2 * i + 1 < limit ? row[k + 2 * i + 1] : 0u;
    p[i] = lo | (hi << 16);
  }
  return make_uint4(p[0], p[1], p[2], p[3]);
}

// Writes a warp's 16×16 accumulator to y through its own scratch, per element, so edges and
// `accumulate` are handled as in the exact kernel (y = y + s).
__device__ inline void write_fragment(const matmul_args& a, const wmma::fragment<wmma::accumulator, 16, 16, k_step, float>& acc,
                                      float* scratch, int32_t row0, int32_t out0, int lane) {
  wmma::store_matrix_sync(scratch, acc, 16, wmma::mem_row_major);
  __syncwarp();
  for (int e = lane; e < 256; e += 32) {
    const int32_t row = row0 + e / 16, out = out0 + e % 16;
    if (row < a.rows && out < a.out) {
      float* y = a.y + static_cast<int64_t>(row) * a.ldy + out;
      *y = a.accumulate ? *y + scratch[e] : scratch[e];
    }
  }
  __syncwarp();
}

// A block computes BM rows × BN outputs with WARPS_M × WARPS_N warps, each FM × FN fragments.
// The k tiles are fetched DEPTH tiles ahead into registers, so their global loads overlap the
// matrix ops of the tiles before them; x is rounded to bf16 as it is staged in shared memory.
template <int BM, int BN, int WARPS_M, int WARPS_N, int DEPTH>
__global__ void __launch_bounds__(WARPS_M * WARPS_N * 32) matmul_bf16_kernel(matmul_args a, bool xvec, bool wvec) {
  constexpr int threads = WARPS_M * WARPS_N * 32;
  constexpr int FM = BM / WARPS_M / 16, FN = BN / WARPS_N / 16;
  constexpr int xq = k_tile / 4, wq = k_tile / 8; // float4 per x row, uint4 per W row
  constexpr int XN = (BM * xq + threads - 1) / threads, WN = (BN * wq + threads - 1) / threads;
  static_assert(FM * WARPS_M * 16 == BM && FN * WARPS_N * 16 == BN, "tile must split into 16×16 fragments");
  __shared__ __align__(128) bf16 xs[BM * ld];
  __shared__ __align__(128) bf16 ws[BN * ld];
  __shared__ __align__(128) float scratch_all[WARPS_M * WARPS_N * 256];
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int wm = warp / WARPS_N, wn = warp % WARPS_N;
  const int32_t r0 = blockIdx.y * BM, n0 = blockIdx.x * BN;
  const int32_t tiles = (a.in + k_tile - 1) / k_tile;

  uint2 xr[DEPTH][XN];
  uint4 wr[DEPTH][WN];
  const auto fetch = [&](uint2 (&xv)[XN], uint4 (&wv)[WN], int32_t tile) {
    const int32_t k0 = tile * k_tile;
#pragma unroll
    for (int i = 0; i < XN; ++i) {
      const int e = threadIdx.x + i * threads;
      const int32_t row = r0 + e / xq;
      xv[i] = tile < tiles && e < BM * xq && row < a.rows
                  ? load_x4(a.x + static_cast<int64_t>(row) * a.ldx, k0 + (e % xq) * 4, a.in, xvec)
                  : make_uint2(0u, 0u);
    }
#pragma unroll
    for (int i = 0; i < WN; ++i) {
      const int e = threadIdx.x + i * threads;
      const int32_t out = n0 + e / wq;
      wv[i] = tile < tiles && e < BN * wq && out < a.out
                  ? load_w8(a.w_bf16 + static_cast<int64_t>(out) * a.in, k0 + (e % wq) * 8, a.in, wvec)
                  : make_uint4(0u, 0u, 0u, 0u);
    }
  };
  const auto stage = [&](const uint2 (&xv)[XN], const uint4 (&wv)[WN]) {
#pragma unroll
    for (int i = 0; i < XN; ++i) {
      const int e = threadIdx.x + i * threads;
      if (e < BM * xq) *reinterpret_cast<uint2*>(xs + (e / xq) * ld + (e % xq) * 4) = xv[i];
    }
#pragma unroll
    for (int i = 0; i < WN; ++i) {
      const int e = threadIdx.x + i * threads;
      if (e < BN * wq) *reinterpret_cast<uint4*>(ws + (e / wq) * ld + (e % wq) * 8) = wv[i];
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
        wmma::fragment<wmma::matrix_a, 16, 16, k_step, bf16, wmma::row_major> fa[FM];
        wmma::fragment<wmma::matrix_b, 16, 16, k_step, bf16, wmma::col_major> fb[FN];
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

  float* scratch = scratch_all + warp * 256;
#pragma unroll
  for (int i = 0; i < FM; ++i)
#pragma unroll
    for (int j = 0; j < FN; ++j)
      write_fragment(a, acc[i][j], scratch, r0 + (wm * FM + i) * 16, n0 + (wn * FN + j) * 16, lane);
}

// Decode (at most 16 rows) where the weights allow it (in % 16 == 0, out % 16 == 0, W 32-byte
// aligned): each warp streams its 16-output strip of W from global memory straight into B
// fragments, AHEAD k-steps in flight; x is staged in shared memory x_chunk k at a time as bf16
// (rows past a.rows stay zero). The fragments hold the same values in the same order as the staged
// kernel's, so the bits agree.
constexpr int x_chunk = 512, x_ld = x_chunk + 8;

template <int WARPS, int AHEAD>
__global__ void __launch_bounds__(WARPS * 32) matmul_bf16_strip_kernel(matmul_args a) {
  __shared__ __align__(128) bf16 xs[16 * x_ld];
  __shared__ __align__(128) float scratch_all[WARPS * 256];
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int32_t out0 = (blockIdx.x * WARPS + warp) * 16;
  const bool live = out0 < a.out;
  const bf16* wstrip = reinterpret_cast<const bf16*>(a.w_bf16) + static_cast<int64_t>(live ? out0 : 0) * a.in;
  const bf16 zero = __float2bfloat16_rn(0.0f);
  for (int e = threadIdx.x; e < 16 * x_ld; e += WARPS * 32) xs[e] = zero;

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
        if (e < a.rows * x_chunk && k < cn) xs[r * x_ld + k] = __float2bfloat16_rn(v[u]);
      }
    }
    __syncthreads();
    if (!live) continue;
    const int steps = cn / k_step;
    for (int s0 = 0; s0 < steps; s0 += AHEAD) {
      wmma::fragment<wmma::matrix_b, 16, 16, k_step, bf16, wmma::col_major> fb[AHEAD];
#pragma unroll
      for (int u = 0; u < AHEAD; ++u)
        if (s0 + u < steps) wmma::load_matrix_sync(fb[u], wstrip + c0 + (s0 + u) * k_step, a.in);
#pragma unroll
      for (int u = 0; u < AHEAD; ++u) {
        if (s0 + u >= steps) break;
        wmma::fragment<wmma::matrix_a, 16, 16, k_step, bf16, wmma::row_major> fa;
        wmma::load_matrix_sync(fa, xs + (s0 + u) * k_step, x_ld);
        wmma::mma_sync(acc, fa, fb[u], acc);
      }
    }
  }
  if (!live) return;
  write_fragment(a, acc, scratch_all + warp * 256, 0, out0, lane);
}

template <int BM, int BN, int WARPS_M, int WARPS_N, int DEPTH>
void launch(const matmul_args& a, hipStream_t stream) {
  const bool xvec = a.in % 4 == 0 && a.ldx % 4 == 0 && reinterpret_cast<uintptr_t>(a.x) % 16 == 0;
  const bool wvec = a.in % 8 == 0 && reinterpret_cast<uintptr_t>(a.w_bf16) % 16 == 0;
  const dim3 grid((a.out + BN - 1) / BN, (a.rows + BM - 1) / BM);
  matmul_bf16_kernel<BM, BN, WARPS_M, WARPS_N, DEPTH><<<grid, WARPS_M * WARPS_N * 32, 0, stream>>>(a, xvec, wvec);
  ORDO_HIP_LAUNCHED();
}

} // namespace

bool has_bf16_matmul() { return true; }

void matmul_bf16(const matmul_args& a, hipStream_t stream) {
  if (a.rows <= 0 || a.out <= 0) return;
  if (a.w_bf16 == nullptr) throw std::invalid_argument("matmul_bf16: no bf16 weights (w_bf16 is null)");
  // The tile shape follows the row count (decode: small tiles, more blocks); the per-element
  // sequence of matrix ops does not depend on it.
  if (a.rows <= 16 && a.in % k_step == 0 && a.out % 16 == 0 && reinterpret_cast<uintptr_t>(a.w_bf16) % 32 == 0) {
    matmul_bf16_strip_kernel<1, 16><<<a.out / 16, 32, 0, stream>>>(a);
    ORDO_HIP_LAUNCHED();
  } else if (a.rows <= 16)
    launch<16, 16, 1, 1, 4>(a, stream);
  else if (a.rows <= 64)
    launch<32, 64, 2, 2, 2>(a, stream);
  else
    launch<64, 128, 2, 4, 2>(a, stream);
}

#else

bool has_bf16_matmul() { return false; }

void matmul_bf16(const matmul_args&, hipStream_t) {
  throw std::invalid_argument("model.weight_dtype = \"bf16\": no bf16 matrix units in this GPU build");
}

#endif

} // namespace ordo::hip
