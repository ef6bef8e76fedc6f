// Paged causal attention over the KV arena (fp32 / bf16 / fp8 with per-(token, head) scales) and
// the store of K/V rows into their slots. Decode-sized batches run each row's chunks in parallel
// (attention_chunk_kernel writes a chunk's a_c, m_c, l_c to scratch; the row's last chunk folds);
// larger batches run tiles of rows (kernels/hip/attention_tile.hip).
#include <stdexcept>
#include <string>

#include "kernels/hip/attention_core.hpp"
#include "kernels/hip/launch.hpp"
#include "kernels/hip/rope_row.hpp"

namespace ordo::hip {
namespace {

// One (row, head) of K or V into its slot, by the whole block (every thread must call it).
// fp8: the head's amax (fmax: exact in any order) sets its scale.
__device__ void store_kv_head(const kv_store_args& a, int32_t r, int32_t h, float* red) {
  const int32_t tid = threadIdx.x;
  const int64_t slot = a.slot_mapping[r];
  if (slot < 0) return; // the same for the whole block
  const float* x = a.src + r * a.ld + h * a.head_dim;
  const size_t base = static_cast<size_t>(slot) * a.heads * a.head_dim + static_cast<size_t>(h) * a.head_dim;
  switch (a.dtype) {
  case elem_dtype::fp32:
    for (int32_t i = tid; i < a.head_dim; i += blockDim.x) static_cast<float*>(a.region)[base + i] = x[i];
    return;
  case elem_dtype::bf16:
    for (int32_t i = tid; i < a.head_dim; i += blockDim.x)
      static_cast<uint16_t*>(a.region)[base + i] = gpu::float_to_bf16(x[i]);
    return;
  case elem_dtype::fp8_e4m3: {
    float amax = 0.0f;
    for (int32_t i = tid; i < a.head_dim; i += blockDim.x) amax = fmaxf(amax, fabsf(x[i]));
    red[tid] = amax;
    __syncthreads();
    for (int32_t stride = blockDim.x / 2; stride > 0; stride /= 2) {
      if (tid < stride) red[tid] = fmaxf(red[tid], red[tid + stride]);
      __syncthreads();
    }
    amax = red[0];
    __syncthreads(); // red is free again for the next head
    const float scale = amax > 0.0f ? amax / gpu::fp8_e4m3_max : 1.0f;
    for (int32_t i = tid; i < a.head_dim; i += blockDim.x)
      static_cast<uint8_t*>(a.region)[base + i] = gpu::float_to_fp8_e4m3(x[i] / scale);
    if (tid == 0) a.scale_region[slot * a.heads + h] = scale;
    return;
  }
  default: kernel_fail("kv_store: unsupported dtype", static_cast<int>(a.dtype));
  }
}

// One block per (row, head).
__global__ void kv_store_kernel(kv_store_args a) {
  __shared__ float red[128];
  store_kv_head(a, blockIdx.x, blockIdx.y, red);
}

// fp32 / bf16: the row's K and V elements to their slots, each element on its own (a thread's
// loads issued before its stores; no head-wide step as fp8's scale needs).
__device__ void store_kv_row(const kv_store_args& k, const kv_store_args& v, int32_t r) {
  const int64_t k_slot = k.slot_mapping[r], v_slot = v.slot_mapping[r];
  const int32_t nk = k_slot < 0 ? 0 : k.heads * k.head_dim, n = nk + (v_slot < 0 ? 0 : v.heads * v.head_dim);
  constexpr int per_thread = 4;
  for (int32_t i0 = threadIdx.x; i0 < n; i0 += per_thread * blockDim.x) {
    float x[per_thread];
#pragma unroll
    for (int u = 0; u < per_thread; ++u) {
      const int32_t i = i0 + u * blockDim.x;
      x[u] = i >= n ? 0.0f : i < nk ? k.src[r * k.ld + i] : v.src[r * v.ld + (i - nk)];
    }
#pragma unroll
    for (int u = 0; u < per_thread; ++u) {
      const int32_t i = i0 + u * blockDim.x;
      if (i >= n) break;
      const kv_store_args& a = i < nk ? k : v;
      const size_t at = static_cast<size_t>(i < nk ? k_slot : v_slot) * a.heads * a.head_dim + (i < nk ? i : i - nk);
      if (a.dtype == elem_dtype::fp32) static_cast<float*>(a.region)[at] = x[u];
      else static_cast<uint16_t*>(a.region)[at] = gpu::float_to_bf16(x[u]);
    }
  }
}

// One block per row: the row's rope, then its K and V heads (rope, kv_store k, kv_store v in
// order, as one launch; the barrier makes the rotated K visible to the stores).
constexpr int rope_kv_threads = 512;

__global__ void __launch_bounds__(rope_kv_threads) rope_kv_store_kernel(rope_kv_store_args a) {
  __shared__ float red[rope_kv_threads];
  const int32_t r = blockIdx.x;
  rope_row(a.rope, r);
  __syncthreads();
  const auto plain = [](elem_dtype d) { return d == elem_dtype::fp32 || d == elem_dtype::bf16; };
  if (plain(a.k.dtype) && plain(a.v.dtype)) {
    store_kv_row(a.k, a.v, r);
    return;
  }
  for (int32_t h = 0; h < a.k.heads; ++h) store_kv_head(a.k, r, h, red);
  for (int32_t h = 0; h < a.v.heads; ++h) store_kv_head(a.v, r, h, red);
}

// Dense rows, one block per (row, head, chunk): the chunk's scores, max, weights and sums, written
// to a.partials as [a_c (head_dim floats), m_c, l_c] at record ((row · heads + head) · chunks_cap + c);
// the block that finishes the row's last chunk folds them in ascending order (no second launch).
// 128 threads: 16 groups of 8, each taking 4 of the chunk's 64 scores with their loads in flight
// together.
constexpr int chunk_threads = 128;
constexpr int chunk_scores_per_group = attention_chunk / (chunk_threads / 8);

template <elem_dtype dt>
__global__ void __launch_bounds__(chunk_threads) attention_chunk_kernel(paged_attention_args a, int32_t chunks_cap) {
  __shared__ float q_s[256];
  __shared__ float w_e[attention_chunk];
  __shared__ int64_t slot_s[attention_chunk];
  __shared__ float red[chunk_threads];
  const int32_t row = blockIdx.x, h = blockIdx.y, c = blockIdx.z, tid = threadIdx.x;
  const int32_t req = a.batch.token_req[row], count = a.batch.positions[row] + 1, j0 = c * attention_chunk;
  if (j0 >= count) return; // the same for every thread of the block
  const int32_t n = count - j0 < attention_chunk ? count - j0 : attention_chunk;
  const int32_t hd = a.head_dim, kvh = h / (a.num_q_heads / a.num_kv_heads);
  const float scale = 1.0f / sqrtf(static_cast<float>(hd));
  for (int32_t i = tid; i < hd; i += chunk_threads) q_s[i] = a.q[row * a.ldq + h * hd + i];
  if (tid < n) slot_s[tid] = slot_of(a.batch, req, j0 + tid, a.block_size);
  __syncthreads();
  const int32_t lane = tid & 7, grp = tid >> 3;
  int64_t slot[chunk_scores_per_group];
  bool valid[chunk_scores_per_group];
  float score[chunk_scores_per_group];
#pragma unroll
  for (int k = 0; k < chunk_scores_per_group; ++k) {
    const int32_t t = grp + k * (chunk_threads / 8);
    valid[k] = t < n;
    slot[k] = valid[k] ? slot_s[t] : 0;
  }
  group_scores<chunk_scores_per_group, dt>(a, q_s, slot, valid, kvh, lane, scale, score);
#pragma unroll
  for (int k = 0; k < chunk_scores_per_group; ++k)
    if (valid[k] && lane == 0) w_e[grp + k * (chunk_threads / 8)] = score[k];
  __syncthreads();
  red[tid] = tid < n ? w_e[tid] : -INFINITY;
  __syncthreads();
  chunk_max(red);
  const float m_c = red[0];
  if (tid < n) w_e[tid] = gpu::expf_glibc(w_e[tid] - m_c);
  __syncthreads();
  float* rec = a.partials + ((static_cast<int64_t>(row) * a.num_q_heads + h) * chunks_cap + c) * (hd + 2);
  for (int32_t e = tid; e < hd; e += chunk_threads) {
    float l_c, a_c;
    sum_chunk<32, dt>(a, w_e, slot_s, n, kvh, e, l_c, a_c);
    rec[e] = a_c;
    if (e == 0) {
      rec[hd] = m_c;
      rec[hd + 1] = l_c;
    }
  }
  // The row's last chunk to finish folds them all (which block that is does not change the order).
  uint32_t* count_at = a.partial_counts + static_cast<int64_t>(row) * a.num_q_heads + h;
  const int32_t chunks = (count + attention_chunk - 1) / attention_chunk;
  if (!last_to_finish(count_at, chunks)) return;
  const volatile float* recs =
      a.partials + (static_cast<int64_t>(row) * a.num_q_heads + h) * chunks_cap * (hd + 2);
  for (int32_t e = tid; e < hd; e += chunk_threads) {
    float l = 0.0f, acc[1] = {0.0f};
    fold_chunks<1>(recs, chunks, hd, {e}, l, acc);
    a.out[row * a.ldo + h * hd + e] = acc[0] / l;
  }
  if (tid == 0) *count_at = 0; // ready for the next launch (stream order)
}

} // namespace

void check_attention_shape(const paged_attention_args& a) {
  if (a.head_dim <= 0 || a.head_dim > 256)
    throw std::invalid_argument("hip attention: head_dim must be in [1, 256], got " + std::to_string(a.head_dim));
  if (a.num_kv_heads <= 0 || a.num_q_heads % a.num_kv_heads != 0)
    throw std::invalid_argument("hip attention: num_q_heads must be a multiple of num_kv_heads");
}

void kv_store(const kv_store_args& a, hipStream_t stream) {
  if (a.rows <= 0 || a.heads <= 0) return;
  kv_store_kernel<<<dim3(a.rows, a.heads), 128, 0, stream>>>(a);
  ORDO_HIP_LAUNCHED();
}

void rope_kv_store(const rope_kv_store_args& a, hipStream_t stream) {
  if (a.rope.rows <= 0) return;
  if (a.k.rows != a.rope.rows || a.v.rows != a.rope.rows)
    throw std::invalid_argument("hip rope_kv_store: rope, k and v must cover the same rows");
  rope_kv_store_kernel<<<a.rope.rows, rope_kv_threads, 0, stream>>>(a);
  ORDO_HIP_LAUNCHED();
}

void paged_attention(const paged_attention_args& a, hipStream_t stream) {
  if (a.batch.num_tokens <= 0) return;
  check_attention_shape(a);
  const int threads = attention_threads(a.head_dim);
  // Decode-sized batches split each row into its chunks, one block each, when the scratch holds
  // them; a prefill's rows are many blocks already.
  const int64_t chunks = split_chunks(a);
  if (a.batch.num_tokens <= attention_split_rows && partials_fit(a, chunks)) {
    const int32_t cap = static_cast<int32_t>(chunks);
    with_kv_dtype(a.dtype, [&](auto dt) {
      attention_chunk_kernel<decltype(dt)::value>
          <<<dim3(a.batch.num_tokens, a.num_q_heads, cap), chunk_threads, 0, stream>>>(a, cap);
    });
    ORDO_HIP_LAUNCHED();
    return;
  }
  if (a.head_dim <= attention_tile_max_head_dim) {
    attention_tiles(a, stream);
    return;
  }
  sparse_attention_args sa;
  sa.attn = a;
  with_kv_dtype(a.dtype, [&](auto dt) {
    attention_kernel<false, decltype(dt)::value>
        <<<dim3(a.batch.num_tokens, a.num_q_heads), threads, attention_smem_bytes(threads), stream>>>(sa);
  });
  ORDO_HIP_LAUNCHED();
}

} // namespace ordo::hip
