// The attention kernel shared by dense and sparse attention (twin of kernels/cpu/attention_core):
// one block per (row, query head). Each score is one dot in the CPU's lane order, taken by a group
// of 8 threads (one lane each, then the same tree through shuffles). Pass 1 takes the max score
// (fmax: order-free, exact) and keeps the scores in shared memory when they fit; pass 2 walks the
// positions in list order in tiles, thread i summing output element i sequentially, as the CPU
// does, so the result is bitwise equal. Sparse rows first pick their top-k groups.
#pragma once

#include "kernels/hip/device_math.hpp"
#include "kernels/hip/paging.hpp"
#include "kernels/kernel_args.hpp"

namespace ordo::hip {

inline constexpr int attention_max_top_k = 32;
inline constexpr int attention_score_cache = 2048; // scores kept between the passes (8 KiB)

__device__ inline float load_kv(const void* region, elem_dtype dt, size_t index, float scale) {
  switch (dt) {
  case elem_dtype::fp32: return static_cast<const float*>(region)[index];
  case elem_dtype::bf16: return gpu::bf16_to_float(static_cast<const uint16_t*>(region)[index]);
  case elem_dtype::fp8_e4m3: return gpu::fp8_e4m3_to_float(static_cast<const uint8_t*>(region)[index]) * scale;
  default: kernel_fail("load_kv: unsupported dtype", static_cast<int>(dt));
  }
  return 0.0f;
}

// Dynamic shared memory: blockDim.x floats (tile weights) then blockDim.x int64 (tile slots).
template <bool sparse>
__global__ void attention_kernel(sparse_attention_args sa) {
  const paged_attention_args& a = sa.attn;
  extern __shared__ unsigned char attention_smem[];
  float* tile_e = reinterpret_cast<float*>(attention_smem);
  int64_t* tile_slot = reinterpret_cast<int64_t*>(attention_smem + blockDim.x * sizeof(float) +
                                                  (blockDim.x * sizeof(float)) % 8);
  __shared__ float red_s[256];
  __shared__ int32_t red_g[256];
  __shared__ int32_t chosen[attention_max_top_k];
  __shared__ int32_t num_chosen;
  __shared__ float q_s[256];
  __shared__ float score_cache[attention_score_cache];

  const int32_t row = blockIdx.x, h = blockIdx.y, tid = threadIdx.x, bd = blockDim.x;
  const int32_t req = a.batch.token_req[row], p = a.batch.positions[row];
  const int32_t hd = a.head_dim, kvh = h / (a.num_q_heads / a.num_kv_heads);
  const int32_t row_elems = a.num_kv_heads * hd;
  const float scale = 1.0f / sqrtf(static_cast<float>(hd));
  const float* q = a.q + row * a.ldq + h * hd;

  int32_t win_start = 0, nsel = 0;
  if (sparse) {
    win_start = p - sa.window + 1 > 0 ? p - sa.window + 1 : 0;
    const int32_t eligible = win_start / sa.group;
    const int32_t groups_per_block = a.block_size / sa.group;
    const float* iq = sa.index_q + row * sa.ld_index_q;
    if (tid == 0) num_chosen = 0;
    __syncthreads();
    for (int32_t k = 0; k < sa.top_k && k < eligible; ++k) {
      // Best unused group by (score desc, group asc), the CPU's sequential scan as a reduction.
      float best_s = 0.0f;
      int32_t best_g = -1;
      for (int32_t g = tid; g < eligible; g += bd) {
        bool used = false;
        for (int32_t c = 0; c < k; ++c) used = used || chosen[c] == g;
        if (used) continue;
        const int64_t slot = slot_of(a.batch, req, g * sa.group, a.block_size);
        const int64_t crow = slot / a.block_size * groups_per_block + (slot % a.block_size) / sa.group;
        const float s = gpu::dot8(iq, sa.compressed + crow * sa.index_dim, sa.index_dim);
        if (best_g < 0 || s > best_s) { best_s = s; best_g = g; } // g ascends per thread
      }
      red_s[tid] = best_s;
      red_g[tid] = best_g;
      __syncthreads();
      for (int32_t stride = bd / 2; stride > 0; stride /= 2) {
        if (tid < stride) {
          const float s2 = red_s[tid + stride];
          const int32_t g2 = red_g[tid + stride];
          const bool take = g2 >= 0 && (red_g[tid] < 0 || s2 > red_s[tid] || (s2 == red_s[tid] && g2 < red_g[tid]));
          if (take) { red_s[tid] = s2; red_g[tid] = g2; }
        }
        __syncthreads();
      }
      if (tid == 0) chosen[num_chosen++] = red_g[0];
      __syncthreads();
    }
    if (tid == 0) // ascending, as the CPU sorts them
      for (int32_t i = 1; i < num_chosen; ++i)
        for (int32_t j = i; j > 0 && chosen[j - 1] > chosen[j]; --j) {
          const int32_t t = chosen[j]; chosen[j] = chosen[j - 1]; chosen[j - 1] = t;
        }
    __syncthreads();
    nsel = num_chosen;
  }
  const int32_t group = sparse ? sa.group : 1;
  const int32_t selected = nsel * group;
  const int32_t count = selected + (p - win_start + 1);
  const auto position_at = [&](int32_t j) {
    return j < selected ? chosen[j / group] * group + j % group : win_start + (j - selected);
  };
  for (int32_t i = tid; i < hd; i += bd) q_s[i] = q[i];
  __syncthreads();
  // Score of list entry j, by the 8 lanes of this thread's group (grp) (all of them must call it, with
  // the same j: the shuffles span the warp). dot8's lanes, tree and tail, then × scale.
  const int32_t lane = tid & 7, grp = tid >> 3, groups = bd >> 3;
  const auto group_score = [&](int32_t j, bool valid) {
    float s = 0.0f;
    int64_t slot = 0;
    float ks = 1.0f;
    if (valid) {
      slot = slot_of(a.batch, req, position_at(j), a.block_size);
      ks = a.k_scale ? a.k_scale[slot * a.num_kv_heads + kvh] : 1.0f;
    }
    const size_t base = static_cast<size_t>(slot) * row_elems + kvh * hd;
    int32_t i = 0;
    if (valid) {
      for (; i + 64 <= hd; i += 64) { // eight loads ahead of their adds
        float kv[8];
#pragma unroll
        for (int u = 0; u < 8; ++u) kv[u] = load_kv(a.k, a.dtype, base + i + 8 * u + lane, ks);
#pragma unroll
        for (int u = 0; u < 8; ++u) s += q_s[i + 8 * u + lane] * kv[u];
      }
      for (; i + 8 <= hd; i += 8) s += q_s[i + lane] * load_kv(a.k, a.dtype, base + i + lane, ks);
    }
    s = gpu::lane_tree8(s);
    if (valid)
      for (i = hd / 8 * 8; i < hd; ++i) s += q_s[i] * load_kv(a.k, a.dtype, base + i, ks);
    return s * scale;
  };
  const bool cached = count <= attention_score_cache;

  float m = -INFINITY;
  for (int32_t j0 = 0; j0 < count; j0 += groups) {
    const int32_t j = j0 + grp;
    const float s = group_score(j, j < count);
    if (j < count) {
      m = fmaxf(m, s);
      if (cached && lane == 0) score_cache[j] = s;
    }
  }
  red_s[tid] = m;
  __syncthreads();
  for (int32_t stride = bd / 2; stride > 0; stride /= 2) {
    if (tid < stride) red_s[tid] = fmaxf(red_s[tid], red_s[tid + stride]);
    __syncthreads();
  }
  m = red_s[0];

  float l = 0.0f, acc = 0.0f;
  for (int32_t t0 = 0; t0 < count; t0 += bd) {
    __syncthreads(); // the previous tile is consumed
    if (cached) {
      if (t0 + tid < count) {
        tile_slot[tid] = slot_of(a.batch, req, position_at(t0 + tid), a.block_size);
        tile_e[tid] = gpu::expf_glibc(score_cache[t0 + tid] - m);
      }
    } else {
      for (int32_t g0 = 0; g0 < bd; g0 += groups) {
        const int32_t t = g0 + grp, j = t0 + t;
        const float s = group_score(j, j < count);
        if (j < count && lane == 0) {
          tile_slot[t] = slot_of(a.batch, req, position_at(j), a.block_size);
          tile_e[t] = gpu::expf_glibc(s - m);
        }
      }
    }
    __syncthreads();
    const int32_t n = count - t0 < bd ? count - t0 : bd;
    if (tid < hd) {
      // Eight positions' values are loaded before they are added, in order.
      int32_t t = 0;
      for (; t + 8 <= n; t += 8) {
        float vv[8];
#pragma unroll
        for (int u = 0; u < 8; ++u) {
          const int64_t slot = tile_slot[t + u];
          const float vs = a.v_scale ? a.v_scale[slot * a.num_kv_heads + kvh] : 1.0f;
          vv[u] = load_kv(a.v, a.dtype, static_cast<size_t>(slot) * row_elems + kvh * hd + tid, vs);
        }
#pragma unroll
        for (int u = 0; u < 8; ++u) {
          const float e = tile_e[t + u];
          l += e;
          acc += e * vv[u];
        }
      }
      for (; t < n; ++t) {
        const int64_t slot = tile_slot[t];
        const float e = tile_e[t];
        l += e;
        const float vs = a.v_scale ? a.v_scale[slot * a.num_kv_heads + kvh] : 1.0f;
        acc += e * load_kv(a.v, a.dtype, static_cast<size_t>(slot) * row_elems + kvh * hd + tid, vs);
      }
    }
  }
  if (tid < hd) a.out[row * a.ldo + h * hd + tid] = acc / l;
}

// Threads per block for head_dim; the kernel needs head_dim <= threads.
inline int attention_threads(int32_t head_dim) { return head_dim <= 128 ? 128 : 256; }
inline size_t attention_smem_bytes(int threads) { return threads * (sizeof(float) + sizeof(int64_t)) + 8; }

} // namespace ordo::hip
