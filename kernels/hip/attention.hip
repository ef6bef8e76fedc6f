// Paged causal attention over the KV arena (fp32 / bf16 / fp8 with per-(token, head) scales) and
// the store of K/V rows into their slots.
#include <stdexcept>
#include <string>

#include "kernels/hip/attention_core.hpp"
#include "kernels/hip/launch.hpp"

namespace ordo::hip {
namespace {

// One block per (row, head). fp8: the head's amax (fmax: exact in any order) sets its scale.
__global__ void kv_store_kernel(kv_store_args a) {
  __shared__ float red[128];
  const int32_t r = blockIdx.x, h = blockIdx.y, tid = threadIdx.x;
  const int64_t slot = a.slot_mapping[r];
  if (slot < 0) return;
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
    const float scale = amax > 0.0f ? amax / gpu::fp8_e4m3_max : 1.0f;
    for (int32_t i = tid; i < a.head_dim; i += blockDim.x)
      static_cast<uint8_t*>(a.region)[base + i] = gpu::float_to_fp8_e4m3(x[i] / scale);
    if (tid == 0) a.scale_region[slot * a.heads + h] = scale;
    return;
  }
  default: kernel_fail("kv_store: unsupported dtype", static_cast<int>(a.dtype));
  }
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

void paged_attention(const paged_attention_args& a, hipStream_t stream) {
  if (a.batch.num_tokens <= 0) return;
  check_attention_shape(a);
  sparse_attention_args sa;
  sa.attn = a;
  const int threads = attention_threads(a.head_dim);
  attention_kernel<false><<<dim3(a.batch.num_tokens, a.num_q_heads), threads, attention_smem_bytes(threads), stream>>>(sa);
  ORDO_HIP_LAUNCHED();
}

} // namespace ordo::hip
