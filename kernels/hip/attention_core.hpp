// The attention kernels shared by dense and sparse attention (twins of kernels/cpu/attention_core):
// each score is one dot in the CPU's lane order, taken by a group of 8 threads (one lane each, then
// the same tree through shuffles); each chunk of attention_chunk entries (kernel_args.hpp) is summed
// against its own max, thread i summing output element i in list order, and the chunks are folded
// in ascending order, as the CPU does, so the result is bitwise equal.
// - attention_kernel: one block per (row, query head) walks every chunk and folds as it goes.
//   Pass 1 takes the max score (fmax: order-free, exact) and keeps the scores in shared memory
//   when they fit. Sparse rows first pick their top-k groups.
// Dense decode runs the chunks in parallel instead (kernels/hip/attention.hip), and dense prefill
// runs tiles of rows (attention_tiles).
#pragma once

#include <stdexcept>
#include <string>
#include <type_traits>

#include "kernels/hip/device_math.hpp"
#include "kernels/hip/paging.hpp"
#include "kernels/kernel_args.hpp"

namespace ordo::hip {

inline constexpr int attention_max_top_k = 32;
inline constexpr int attention_score_cache = 2048; // scores kept between the passes (8 KiB)
inline constexpr int attention_split_rows = 64;      // at most this many rows run chunk-parallel
inline constexpr int attention_tile_max_head_dim = 128; // attention_tiles' shared rows

// One KV element as float; the dtype is a template argument, so a kernel's inner loops hold one
// conversion (a runtime switch there was if-converted: every load ran all three paths).
template <elem_dtype dt>
__device__ inline float load_kv(const void* region, size_t index, float scale) {
  if constexpr (dt == elem_dtype::fp32) {
    return static_cast<const float*>(region)[index];
  } else if constexpr (dt == elem_dtype::bf16) {
    return gpu::bf16_to_float(static_cast<const uint16_t*>(region)[index]);
  } else {
    static_assert(dt == elem_dtype::fp8_e4m3, "load_kv: fp32, bf16 or fp8_e4m3");
    return gpu::fp8_e4m3_to_float(static_cast<const uint8_t*>(region)[index]) * scale;
  }
}

// The per-(token, head) scale of an fp8 entry; other dtypes have none.
template <elem_dtype dt>
__device__ inline float kv_scale(const float* scales, int64_t slot, int32_t heads, int32_t head) {
  if constexpr (dt == elem_dtype::fp8_e4m3) return scales ? scales[slot * heads + head] : 1.0f;
  return 1.0f;
}

// Runs f(std::integral_constant<elem_dtype, dt>{}) for the KV dtype dt, so a launch site picks the
// kernel instance once.
template <class F>
void with_kv_dtype(elem_dtype dt, F&& f) {
  switch (dt) {
  case elem_dtype::fp32: f(std::integral_constant<elem_dtype, elem_dtype::fp32>{}); return;
  case elem_dtype::bf16: f(std::integral_constant<elem_dtype, elem_dtype::bf16>{}); return;
  case elem_dtype::fp8_e4m3: f(std::integral_constant<elem_dtype, elem_dtype::fp8_e4m3>{}); return;
  default: throw std::invalid_argument(std::string("hip attention: unsupported KV dtype ") + to_string(dt));
  }
}

// Score of list entry `pos` against the query in q_s, by the 8 lanes of this thread's group (all
// of them must call it, with the same entry: the shuffles span the warp). dot8's lanes, tree and
// tail, then × scale.
template <elem_dtype dt>
__device__ inline float group_score(const paged_attention_args& a, const float* q_s, int64_t slot, bool valid,
                                    int32_t kvh, int32_t lane, float scale) {
  const int32_t hd = a.head_dim;
  float s = 0.0f;
  const float ks = valid ? kv_scale<dt>(a.k_scale, slot, a.num_kv_heads, kvh) : 1.0f;
  const size_t base = static_cast<size_t>(valid ? slot : 0) * a.num_kv_heads * hd + kvh * hd;
  int32_t i = 0;
  if (valid) {
    for (; i + 128 <= hd; i += 128) { // sixteen loads ahead of their adds
      float kv[16];
#pragma unroll
      for (int u = 0; u < 16; ++u) kv[u] = load_kv<dt>(a.k, base + i + 8 * u + lane, ks);
#pragma unroll
      for (int u = 0; u < 16; ++u) s += q_s[i + 8 * u + lane] * kv[u];
    }
    for (; i + 64 <= hd; i += 64) {
      float kv[8];
#pragma unroll
      for (int u = 0; u < 8; ++u) kv[u] = load_kv<dt>(a.k, base + i + 8 * u + lane, ks);
#pragma unroll
      for (int u = 0; u < 8; ++u) s += q_s[i + 8 * u + lane] * kv[u];
    }
    for (; i + 8 <= hd; i += 8) s += q_s[i + lane] * load_kv<dt>(a.k, base + i + lane, ks);
  }
  s = gpu::lane_tree8(s);
  if (valid)
    for (i = hd / 8 * 8; i < hd; ++i) s += q_s[i] * load_kv<dt>(a.k, base + i, ks);
  return s * scale;
}

// N entries' scores by one group at once, all their loads in flight together; each score is
// group_score's (same lanes, tree, tail and scale). Invalid entries give an unused value.
template <int N, elem_dtype dt>
__device__ inline void group_scores(const paged_attention_args& a, const float* q_s, const int64_t (&slot)[N],
                                    const bool (&valid)[N], int32_t kvh, int32_t lane, float scale, float (&out)[N]) {
  const int32_t hd = a.head_dim;
  float s[N], ks[N];
  size_t base[N];
#pragma unroll
  for (int n = 0; n < N; ++n) {
    s[n] = 0.0f;
    ks[n] = valid[n] ? kv_scale<dt>(a.k_scale, slot[n], a.num_kv_heads, kvh) : 1.0f;
    base[n] = static_cast<size_t>(valid[n] ? slot[n] : 0) * a.num_kv_heads * hd + kvh * hd;
  }
  int32_t i = 0;
  for (; i + 64 <= hd; i += 64) {
    float kv[N][8];
#pragma unroll
    for (int n = 0; n < N; ++n)
#pragma unroll
      for (int u = 0; u < 8; ++u) kv[n][u] = valid[n] ? load_kv<dt>(a.k, base[n] + i + 8 * u + lane, ks[n]) : 0.0f;
#pragma unroll
    for (int n = 0; n < N; ++n)
#pragma unroll
      for (int u = 0; u < 8; ++u)
        if (valid[n]) s[n] += q_s[i + 8 * u + lane] * kv[n][u];
  }
  for (; i + 8 <= hd; i += 8)
#pragma unroll
    for (int n = 0; n < N; ++n)
      if (valid[n]) s[n] += q_s[i + lane] * load_kv<dt>(a.k, base[n] + i + lane, ks[n]);
#pragma unroll
  for (int n = 0; n < N; ++n) {
    s[n] = gpu::lane_tree8(s[n]);
    if (valid[n])
      for (int32_t t = hd / 8 * 8; t < hd; ++t) s[n] += q_s[t] * load_kv<dt>(a.k, base[n] + t, ks[n]);
    out[n] = s[n] * scale;
  }
}

// One chunk's sums for output element `e` (< head_dim) over n entries with weights w_e[t] and
// slots slot_s[t]: l_c = Σ w, a_c = Σ w·v in order; `ahead` entries' values loaded before their adds.
template <int ahead, elem_dtype dt>
__device__ inline void sum_chunk(const paged_attention_args& a, const float* w_e, const int64_t* slot_s, int32_t n,
                                 int32_t kvh, int32_t e, float& l_c, float& a_c) {
  const int32_t row_elems = a.num_kv_heads * a.head_dim, off = kvh * a.head_dim + e;
  const auto value = [&](int32_t t) {
    const int64_t slot = slot_s[t];
    return load_kv<dt>(a.v, static_cast<size_t>(slot) * row_elems + off, kv_scale<dt>(a.v_scale, slot, a.num_kv_heads, kvh));
  };
  float l = 0.0f, acc = 0.0f;
  int32_t t = 0;
  for (; t + ahead <= n; t += ahead) {
    float vv[ahead];
#pragma unroll
    for (int u = 0; u < ahead; ++u) vv[u] = value(t + u);
#pragma unroll
    for (int u = 0; u < ahead; ++u) {
      l += w_e[t + u];
      acc += w_e[t + u] * vv[u];
    }
  }
  for (; t + 8 <= n; t += 8) {
    float vv[8];
#pragma unroll
    for (int u = 0; u < 8; ++u) vv[u] = value(t + u);
#pragma unroll
    for (int u = 0; u < 8; ++u) {
      l += w_e[t + u];
      acc += w_e[t + u] * vv[u];
    }
  }
  for (; t < n; ++t) {
    const float v = value(t);
    l += w_e[t];
    acc += w_e[t] * v;
  }
  l_c = l;
  a_c = acc;
}

// red[] holds one value per thread; afterwards red[c·attention_chunk] is the max of chunk c of the
// block's entries (fmax: any order gives the same bits). Every thread must call it.
__device__ inline void chunk_max(float* red) {
  for (int32_t stride = attention_chunk / 2; stride > 0; stride /= 2) {
    if ((threadIdx.x % attention_chunk) < stride) red[threadIdx.x] = fmaxf(red[threadIdx.x], red[threadIdx.x + stride]);
    __syncthreads();
  }
}

// Dynamic shared memory: blockDim.x floats (tile weights) then blockDim.x int64 (tile slots).
template <bool sparse, elem_dtype dt>
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
  const int32_t lane = tid & 7, grp = tid >> 3, groups = bd >> 3;
  const auto score_of = [&](int32_t j, bool valid) {
    const int64_t slot = valid ? slot_of(a.batch, req, position_at(j), a.block_size) : 0;
    return group_score<dt>(a, q_s, slot, valid, kvh, lane, scale);
  };
  const bool cached = count <= attention_score_cache;

  float m = -INFINITY;
  for (int32_t j0 = 0; j0 < count; j0 += groups) {
    const int32_t j = j0 + grp;
    const float s = score_of(j, j < count);
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

  // Tiles of bd entries (a multiple of attention_chunk): the tile's scores, each chunk's max, the
  // weights e^{s − m_c}; then each chunk is summed and folded with e^{m_c − m}, in order.
  float l = 0.0f, acc = 0.0f;
  for (int32_t t0 = 0; t0 < count; t0 += bd) {
    __syncthreads(); // the previous tile is consumed
    if (cached) {
      if (t0 + tid < count) {
        tile_slot[tid] = slot_of(a.batch, req, position_at(t0 + tid), a.block_size);
        tile_e[tid] = score_cache[t0 + tid];
      }
    } else {
      for (int32_t g0 = 0; g0 < bd; g0 += groups) {
        const int32_t t = g0 + grp, j = t0 + t;
        const float s = score_of(j, j < count);
        if (j < count && lane == 0) {
          tile_slot[t] = slot_of(a.batch, req, position_at(j), a.block_size);
          tile_e[t] = s;
        }
      }
    }
    __syncthreads();
    const int32_t n = count - t0 < bd ? count - t0 : bd;
    red_s[tid] = tid < n ? tile_e[tid] : -INFINITY;
    __syncthreads();
    chunk_max(red_s);
    if (tid < n) tile_e[tid] = gpu::expf_glibc(tile_e[tid] - red_s[tid / attention_chunk * attention_chunk]);
    __syncthreads();
    if (tid < hd)
      for (int32_t c0 = 0; c0 < n; c0 += attention_chunk) {
        float l_c, a_c;
        sum_chunk<16, dt>(a, tile_e + c0, tile_slot + c0, n - c0 < attention_chunk ? n - c0 : attention_chunk, kvh, tid, l_c,
                  a_c);
        const float w = gpu::expf_glibc(red_s[c0] - m);
        l += l_c * w;
        acc += a_c * w;
      }
  }
  if (tid < hd) a.out[row * a.ldo + h * hd + tid] = acc / l;
}

// The chunks of the batch's longest row, and whether a.partials holds a record of (head_dim + 2)
// floats per (row, head, chunk) of them: the chunk-parallel launches need both.
inline int64_t split_chunks(const paged_attention_args& a) {
  return (static_cast<int64_t>(a.batch.max_position) + attention_chunk) / attention_chunk;
}
inline bool partials_fit(const paged_attention_args& a, int64_t chunks) {
  const int64_t needed = static_cast<int64_t>(a.batch.num_tokens) * a.num_q_heads * chunks * (a.head_dim + 2);
  return a.partials && a.partial_counts && a.batch.max_position >= 0 && needed <= a.partials_floats;
}

// Called by every thread of a block once its chunk records are written: true in the block whose
// count at `count_at` reaches `chunks` (the last of them to finish), after a fence that makes the
// other blocks' records visible to it. That block folds and sets the count back to zero.
__device__ inline bool last_to_finish(uint32_t* count_at, int32_t chunks) {
  __shared__ bool last;
  __threadfence();
  __syncthreads();
  if (threadIdx.x == 0) last = atomicAdd(count_at, 1u) == static_cast<uint32_t>(chunks - 1);
  __syncthreads();
  if (last) __threadfence();
  return last;
}

// The CPU's fold of one (row, head)'s chunk records [a_c (head_dim floats), m_c, l_c]: M = the fmax
// of the m_c, then in ascending chunk order l += l_c·e^{m_c − M} and acc[y] += a_c[e[y]]·e^{m_c − M}
// for each element e[y] < head_dim. The records are other blocks' writes: volatile reads, past
// this multiprocessor's L1.
template <int E>
__device__ inline void fold_chunks(const volatile float* recs, int32_t chunks, int32_t hd, const int32_t (&e)[E],
                                   float& l, float (&acc)[E]) {
  float m = -INFINITY;
  for (int32_t k = 0; k < chunks; ++k) m = fmaxf(m, recs[k * (hd + 2) + hd]);
  for (int32_t k = 0; k < chunks; ++k) {
    const volatile float* r = recs + k * (hd + 2);
    const float w = gpu::expf_glibc(r[hd] - m);
    l += r[hd + 1] * w;
#pragma unroll
    for (int y = 0; y < E; ++y)
      if (e[y] < hd) acc[y] += r[e[y]] * w;
  }
}

// Dense attention by tiles of up to 32 rows of one request per (tile, head), sharing each staged K
// and V row (kernels/hip/attention_tile.hip); head_dim <= attention_tile_max_head_dim.
void attention_tiles(const paged_attention_args& a, hipStream_t stream);

// Threads per block for head_dim; the kernel needs head_dim <= threads.
inline int attention_threads(int32_t head_dim) { return head_dim <= 128 ? 128 : 256; }
inline size_t attention_smem_bytes(int threads) { return threads * (sizeof(float) + sizeof(int64_t)) + 8; }

} // namespace ordo::hip
