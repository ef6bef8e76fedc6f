// Sparse attention of qsa layers: the group index compression, and attention over the local
// window plus the top-k groups by index score (kernels/hip/attention_core.hpp).
#include <stdexcept>
#include <string>

#include "kernels/hip/attention_core.hpp"
#include "kernels/hip/launch.hpp"

namespace ordo::hip {

void check_attention_shape(const paged_attention_args& a); // attention.hip

namespace {

// One block per row; thread i sums element i over the group's tokens in order, as the CPU does.
__global__ void index_compress_kernel(index_compress_args a) {
  const int32_t row = blockIdx.x;
  const int32_t p = a.batch.positions[row];
  if (p % a.group != a.group - 1) return;
  const int32_t r = a.batch.token_req[row];
  const float inv = 1.0f / static_cast<float>(a.group);
  const int32_t groups_per_block = a.block_size / a.group;
  const int32_t first = p - (a.group - 1);
  const int64_t first_slot = slot_of(a.batch, r, first, a.block_size);
  const int64_t out_row = first_slot / a.block_size * groups_per_block + (first_slot % a.block_size) / a.group;
  float* out = a.compressed + out_row * a.dim;
  for (int32_t i = threadIdx.x; i < a.dim; i += blockDim.x) {
    float sum = 0.0f;
    for (int32_t t = first; t <= p; ++t) sum += a.raw[slot_of(a.batch, r, t, a.block_size) * a.dim + i];
    out[i] = sum * inv;
  }
}

} // namespace

void index_compress(const index_compress_args& a, hipStream_t stream) {
  if (a.batch.num_tokens <= 0) return;
  index_compress_kernel<<<a.batch.num_tokens, 64, 0, stream>>>(a);
  ORDO_HIP_LAUNCHED();
}

void sparse_attention(const sparse_attention_args& a, hipStream_t stream) {
  if (a.attn.batch.num_tokens <= 0) return;
  check_attention_shape(a.attn);
  if (a.top_k > attention_max_top_k || a.group <= 0)
    throw std::invalid_argument("hip sparse attention: top_k must be <= " + std::to_string(attention_max_top_k));
  const int threads = attention_threads(a.attn.head_dim);
  with_kv_dtype(a.attn.dtype, [&](auto dt) {
    attention_kernel<true, decltype(dt)::value>
        <<<dim3(a.attn.batch.num_tokens, a.attn.num_q_heads), threads, attention_smem_bytes(threads), stream>>>(a);
  });
  ORDO_HIP_LAUNCHED();
}

} // namespace ordo::hip
