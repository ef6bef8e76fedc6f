// y (+)= x · Wᵀ with bf16 weights on the matrix units (model.weight_dtype = "bf16"): 16×16×16
// bf16 tiles with fp32 accumulators. W is stored as bf16 (a.w_bf16); x is rounded to bf16 (to
// nearest even) as it is staged. k is cut into fixed segments of k_seg (a function of k alone,
// never of the rows): each segment's partial runs its k in steps of 16, ascending, from a zero
// accumulator, and each output adds its partials to a zero total in segment order. So every
// output element takes the same sequence of matrix ops and adds whatever the row count, the
// tile shape, the kernel or the row's place in its tile: the result is batch-invariant and
// deterministic, though not equal to the CPU reference (gpu_check reports the error against the
// CPU on the same bf16 operands and checks the invariance). The tail of the last step is
// zero-padded, the same way for every tile shape. The segments let a decode matmul spread one
// output strip's k over several warps. Three kernels follow that sequence: the decode strip kernel
// (at most 16 rows), the pipelined kernel (more rows: x rounded to bf16 once, then both operands
// copied global → shared by cp.async, three k tiles in flight) and the register-staged kernel
// (shapes the other two do not take).
#include <cstdlib>
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
constexpr int k_seg = 256;     // k per segment (see the top)
static_assert(k_seg % k_tile == 0, "a segment is whole k tiles");

using acc_fragment = wmma::fragment<wmma::accumulator, 16, 16, k_step, float>;

// total += partial, element by element (the two fragments share one layout).
__device__ inline void fold(acc_fragment& total, const acc_fragment& partial) {
#pragma unroll
  for (int e = 0; e < total.num_elements; ++e) total.x[e] += partial.x[e];
}

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
__device__ inline void write_fragment(const matmul_args& a, const acc_fragment& acc,
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

  acc_fragment acc[FM][FN], total[FM][FN];
#pragma unroll
  for (int i = 0; i < FM; ++i)
#pragma unroll
    for (int j = 0; j < FN; ++j) wmma::fill_fragment(acc[i][j], 0.0f), wmma::fill_fragment(total[i][j], 0.0f);

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
      if ((t + 1) % (k_seg / k_tile) == 0 || t + 1 == tiles) { // a segment ends: fold its partial
#pragma unroll
        for (int i = 0; i < FM; ++i)
#pragma unroll
          for (int j = 0; j < FN; ++j) fold(total[i][j], acc[i][j]), wmma::fill_fragment(acc[i][j], 0.0f);
      }
      __syncthreads();
    }
  }

  float* scratch = scratch_all + warp * 256;
#pragma unroll
  for (int i = 0; i < FM; ++i)
#pragma unroll
    for (int j = 0; j < FN; ++j)
      write_fragment(a, total[i][j], scratch, r0 + (wm * FM + i) * 16, n0 + (wn * FN + j) * 16, lane);
}

// Decode (at most 16 rows) where the weights allow it (in % 16 == 0, out % 16 == 0, W 32-byte
// aligned): a block owns one 16-output strip and its SEGW warps take its k segments in rounds,
// warp w segment round + w. A warp issues all of its segment's W fragment loads (straight from
// global memory) before its first matrix op, then stages x 64 k at a time in its own shared tile
// as bf16 (rows past a.rows stay zero). After each round the block adds the round's partials to
// each element's total in segment order. The fragments hold the same values in the same order as
// the staged kernel's, so the bits agree.
template <int SEGW>
__global__ void __launch_bounds__(SEGW * 32) matmul_bf16_strip_kernel(matmul_args a, bool xvec) {
  constexpr int seg_steps = k_seg / k_step, sub_steps = k_tile / k_step, threads = SEGW * 32;
  constexpr int per_thread = (256 + threads - 1) / threads; // elements of the strip's 16×16 each thread folds
  __shared__ __align__(128) bf16 xs_all[SEGW][16 * ld];
  __shared__ __align__(128) float part[SEGW][256];
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int32_t out0 = blockIdx.x * 16;
  const bf16* wstrip = reinterpret_cast<const bf16*>(a.w_bf16) + static_cast<int64_t>(out0) * a.in;
  bf16* xs = xs_all[warp];
  const bf16 zero = __float2bfloat16_rn(0.0f);
  for (int e = lane; e < 16 * ld; e += 32) xs[e] = zero;
  float total[per_thread];
#pragma unroll
  for (int i = 0; i < per_thread; ++i) total[i] = 0.0f;

  const int32_t segs = (a.in + k_seg - 1) / k_seg;
  for (int32_t round = 0; round < segs; round += SEGW) {
    const int32_t seg = round + warp;
    if (seg < segs) {
      const int32_t k0 = seg * k_seg;
      const int steps = (a.in - k0 < k_seg ? a.in - k0 : k_seg) / k_step;
      wmma::fragment<wmma::matrix_b, 16, 16, k_step, bf16, wmma::col_major> fb[seg_steps];
#pragma unroll
      for (int u = 0; u < seg_steps; ++u)
        if (u < steps) wmma::load_matrix_sync(fb[u], wstrip + k0 + u * k_step, a.in);
      acc_fragment acc;
      wmma::fill_fragment(acc, 0.0f);
#pragma unroll
      for (int c = 0; c < seg_steps; c += sub_steps) {
        if (c >= steps) break;
        const int32_t kc = k0 + c * k_step;
        __syncwarp(); // the previous sub-tile consumed
        for (int e = lane; e < a.rows * (k_tile / 4); e += 32) {
          const int r = e / (k_tile / 4), q = e % (k_tile / 4);
          const int32_t limit = kc + k_tile < a.in ? kc + k_tile : a.in;
          *reinterpret_cast<uint2*>(xs + r * ld + q * 4) =
              load_x4(a.x + static_cast<int64_t>(r) * a.ldx, kc + q * 4, limit, xvec);
        }
        __syncwarp();
#pragma unroll
        for (int u = 0; u < sub_steps; ++u) {
          if (c + u >= steps) break;
          wmma::fragment<wmma::matrix_a, 16, 16, k_step, bf16, wmma::row_major> fa;
          wmma::load_matrix_sync(fa, xs + u * k_step, ld);
          wmma::mma_sync(acc, fa, fb[c + u], acc);
        }
      }
      wmma::store_matrix_sync(part[warp], acc, 16, wmma::mem_row_major);
    }
    __syncthreads();
    const int in_round = segs - round < SEGW ? segs - round : SEGW;
#pragma unroll
    for (int i = 0; i < per_thread; ++i) {
      const int e = threadIdx.x + i * threads;
      if (e < 256)
        for (int w = 0; w < in_round; ++w) total[i] += part[w][e];
    }
    __syncthreads();
  }
#pragma unroll
  for (int i = 0; i < per_thread; ++i) {
    const int e = threadIdx.x + i * threads;
    const int32_t row = e / 16, out = out0 + e % 16;
    if (e < 256 && row < a.rows) {
      float* y = a.y + static_cast<int64_t>(row) * a.ldy + out;
      *y = a.accumulate ? *y + total[i] : total[i];
    }
  }
}

// x (rows × in, in % 8 == 0) rounded to bf16 to nearest even, as load_x4 rounds it, into xb
// (rows × in, packed). One thread per 8 values.
__global__ void x_to_bf16_kernel(const float* x, int64_t ldx, int32_t rows, int32_t in, bool xvec, uint16_t* xb) {
  const int32_t per_row = in / 8;
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= static_cast<int64_t>(rows) * per_row) return;
  const int32_t row = static_cast<int32_t>(i / per_row), k = static_cast<int32_t>(i % per_row) * 8;
  const float* src = x + static_cast<int64_t>(row) * ldx;
  const uint2 lo = load_x4(src, k, in, xvec), hi = load_x4(src, k + 4, in, xvec);
  *reinterpret_cast<uint4*>(xb + static_cast<int64_t>(row) * in + k) = make_uint4(lo.x, lo.y, hi.x, hi.y);
}

// 16 bytes global → shared without passing through registers; `valid` false writes 16 zeros
// (src-size 0: nothing is read from `src`).
__device__ inline void copy16_async(bf16* dst, const void* src, bool valid) {
  const unsigned d = static_cast<unsigned>(__cvta_generic_to_shared(dst));
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(d), "l"(src), "r"(valid ? 16 : 0));
}
__device__ inline void async_commit() { asm volatile("cp.async.commit_group;\n" ::); }
template <int N> __device__ inline void async_wait() { asm volatile("cp.async.wait_group %0;\n" ::"n"(N)); }

// Many rows (in % 8 == 0, W 16-byte aligned, x already bf16 in xb): a block computes BM rows ×
// BN outputs with WARPS_M × WARPS_N warps, each FM × FN fragments, the k tiles of x and W copied
// straight into a ring of STAGES shared buffers (dynamic shared memory), STAGES − 1 tiles ahead
// of the matrix ops. Rows and outputs past the edges, and k past `in`, are copied as zeros. Each
// tile runs the same k steps, segment folds and fragment writes as matmul_bf16_kernel, so the
// bits agree with it and with the strip kernel.
template <int BM, int BN, int WARPS_M, int WARPS_N, int STAGES>
__global__ void __launch_bounds__(WARPS_M * WARPS_N * 32)
    matmul_bf16_async_kernel(matmul_args a, const uint16_t* xb) {
  constexpr int threads = WARPS_M * WARPS_N * 32;
  constexpr int FM = BM / WARPS_M / 16, FN = BN / WARPS_N / 16;
  constexpr int chunks = k_tile / 8;          // 16-byte pieces of one row of a tile
  constexpr int stage_elems = (BM + BN) * ld; // x rows, then W rows
  constexpr int per_thread = (BM + BN) * chunks / threads;
  static_assert(FM * WARPS_M * 16 == BM && FN * WARPS_N * 16 == BN, "tile must split into 16×16 fragments");
  static_assert(per_thread * threads == (BM + BN) * chunks, "a tile's pieces must split evenly");
  static_assert(WARPS_M * WARPS_N * 256 * sizeof(float) <= stage_elems * sizeof(bf16), "scratch fits a stage");
  extern __shared__ __align__(128) unsigned char smem_raw[];
  bf16* smem = reinterpret_cast<bf16*>(smem_raw);
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int wm = warp / WARPS_N, wn = warp % WARPS_N;
  const int32_t r0 = blockIdx.y * BM, n0 = blockIdx.x * BN;
  const int32_t tiles = (a.in + k_tile - 1) / k_tile;

  const auto load_tile = [&](int32_t tile) {
    if (tile < tiles) {
      bf16* stage = smem + (tile % STAGES) * stage_elems;
      const int32_t k0 = tile * k_tile;
#pragma unroll
      for (int i = 0; i < per_thread; ++i) {
        const int e = threadIdx.x + i * threads;
        const int r = e / chunks;
        const int32_t k = k0 + (e % chunks) * 8;
        const uint16_t* src;
        bool ok;
        if (r < BM) {
          const int32_t row = r0 + r;
          ok = row < a.rows && k < a.in;
          src = ok ? xb + static_cast<int64_t>(row) * a.in + k : xb;
        } else {
          const int32_t out = n0 + (r - BM);
          ok = out < a.out && k < a.in;
          src = ok ? a.w_bf16 + static_cast<int64_t>(out) * a.in + k : a.w_bf16;
        }
        copy16_async(stage + r * ld + (e % chunks) * 8, src, ok);
      }
    }
    async_commit(); // one group per tile, empty past the end, so the waits count tiles
  };

  acc_fragment acc[FM][FN], total[FM][FN];
#pragma unroll
  for (int i = 0; i < FM; ++i)
#pragma unroll
    for (int j = 0; j < FN; ++j) wmma::fill_fragment(acc[i][j], 0.0f), wmma::fill_fragment(total[i][j], 0.0f);

#pragma unroll
  for (int s = 0; s < STAGES - 1; ++s) load_tile(s);
  for (int32_t t = 0; t < tiles; ++t) {
    async_wait<STAGES - 2>(); // tile t has landed (this thread's pieces) …
    __syncthreads();          // … everyone's, and every warp is done with tile t − 1's buffer
    load_tile(t + STAGES - 1);
    const bf16* xs = smem + (t % STAGES) * stage_elems;
    const bf16* ws = xs + BM * ld;
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
    if ((t + 1) % (k_seg / k_tile) == 0 || t + 1 == tiles) { // a segment ends: fold its partial
#pragma unroll
      for (int i = 0; i < FM; ++i)
#pragma unroll
        for (int j = 0; j < FN; ++j) fold(total[i][j], acc[i][j]), wmma::fill_fragment(acc[i][j], 0.0f);
    }
  }
  async_wait<0>();
  __syncthreads(); // the ring is free: each warp's write scratch reuses it
  float* scratch = reinterpret_cast<float*>(smem_raw) + warp * 256;
#pragma unroll
  for (int i = 0; i < FM; ++i)
#pragma unroll
    for (int j = 0; j < FN; ++j)
      write_fragment(a, total[i][j], scratch, r0 + (wm * FM + i) * 16, n0 + (wn * FN + j) * 16, lane);
}

template <int BM, int BN, int WARPS_M, int WARPS_N, int STAGES>
void launch_async(const matmul_args& a, hipStream_t stream, device_scratch& x_bf16) {
  const size_t xb_bytes = static_cast<size_t>(a.rows) * a.in * sizeof(uint16_t);
  auto* xb = static_cast<uint16_t*>(x_bf16.reserve(xb_bytes, stream));
  const bool xvec = a.ldx % 4 == 0 && reinterpret_cast<uintptr_t>(a.x) % 16 == 0;
  const int64_t pieces = static_cast<int64_t>(a.rows) * (a.in / 8);
  x_to_bf16_kernel<<<static_cast<unsigned>((pieces + 255) / 256), 256, 0, stream>>>(a.x, a.ldx, a.rows, a.in, xvec, xb);
  ORDO_HIP_LAUNCHED();
  constexpr size_t smem = static_cast<size_t>(STAGES) * (BM + BN) * ld * sizeof(bf16);
  static const bool sized = [] { // once per instantiation: above 48 KiB needs the opt-in
    ORDO_HIP_CHECK(hipFuncSetAttribute(reinterpret_cast<const void*>(&matmul_bf16_async_kernel<BM, BN, WARPS_M, WARPS_N, STAGES>),
                                       hipFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(smem)));
    return true;
  }();
  (void)sized;
  const dim3 grid((a.out + BN - 1) / BN, (a.rows + BM - 1) / BM);
  matmul_bf16_async_kernel<BM, BN, WARPS_M, WARPS_N, STAGES><<<grid, WARPS_M * WARPS_N * 32, smem, stream>>>(a, xb);
  ORDO_HIP_LAUNCHED();
}

// ORDO_BF16_MATMUL=staged sends many-row calls to the register-staged kernel instead of the
// pipelined one (an A/B switch for `ordo bench matmul`; the bits are the same either way).
bool staged_only() {
  static const bool staged = [] {
    const char* v = std::getenv("ORDO_BF16_MATMUL");
    return v != nullptr && std::strcmp(v, "staged") == 0;
  }();
  return staged;
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

void matmul_bf16(const matmul_args& a, hipStream_t stream, device_scratch& x_bf16) {
  if (a.rows <= 0 || a.out <= 0) return;
  if (a.w_bf16 == nullptr) throw std::invalid_argument("matmul_bf16: no bf16 weights (w_bf16 is null)");
  // The tile shape follows the row count (decode: small tiles, more blocks); the per-element
  // sequence of matrix ops does not depend on it.
  if (a.rows <= 16 && a.in % k_step == 0 && a.out % 16 == 0 && reinterpret_cast<uintptr_t>(a.w_bf16) % 32 == 0) {
    const bool xvec = a.ldx % 4 == 0 && reinterpret_cast<uintptr_t>(a.x) % 16 == 0;
    matmul_bf16_strip_kernel<8><<<a.out / 16, 8 * 32, 0, stream>>>(a, xvec);
    ORDO_HIP_LAUNCHED();
  } else if (a.rows <= 16)
    launch<16, 16, 1, 1, 4>(a, stream);
  else if (a.in % 8 == 0 && reinterpret_cast<uintptr_t>(a.w_bf16) % 16 == 0 && !staged_only())
    launch_async<64, 64, 2, 2, 3>(a, stream, x_bf16);
  else if (a.rows <= 64)
    launch<32, 64, 2, 2, 2>(a, stream);
  else
    launch<64, 128, 2, 4, 2>(a, stream);
}

#else

bool has_bf16_matmul() { return false; }

void matmul_bf16(const matmul_args&, hipStream_t, device_scratch&) {
  throw std::invalid_argument("model.weight_dtype = \"bf16\": no bf16 matrix units in this GPU build");
}

#endif

} // namespace ordo::hip
