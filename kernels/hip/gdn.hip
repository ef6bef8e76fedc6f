// Gated delta rule, token by token: one block per (request, head), thread i owning state row
// S_i (dk floats) and running the CPU reference's per-row update in the same order. For the
// usual head sizes (dk = 16, 32, 64, 128) the row stays in registers for the whole request and
// the q / k norms are taken by 8 lanes in the CPU dot's lane order; other sizes run the row in
// global memory.
#include <stdexcept>
#include <string>

#include "kernels/hip/device_math.hpp"
#include "kernels/hip/launch.hpp"
#include "kernels/hip/paging.hpp"
#include "kernels/softplus.hpp"

namespace ordo::hip {
namespace {

constexpr int max_dk = 256;

// The decay of value head h: the presets' sigmoid(a + a_bias), or Qwen's
// exp(−exp(A_log) · softplus(a + dt_bias)), as kernels/cpu/gdn.cpp writes them.
__device__ inline float gdn_decay(const gdn_args& a, const float* abg, int32_t h) {
  if (a.neg_exp_a == nullptr) return gpu::sigmoid(abg[h] + a.a_bias[h]);
  const float x = abg[h] + a.a_bias[h];
  return gpu::expf_glibc(a.neg_exp_a[h] * softplus_of(x, gpu::expf_glibc(x)));
}

// The output of row i of value head h: o, or the presets' o · silu(gate).
__device__ inline float gdn_output(const gdn_args& a, float o, const float* abg, int32_t h, int32_t i) {
  if (a.neg_exp_a != nullptr) return o;
  const float gate = abg[2 * a.heads + h * a.dv + i];
  return o * (gate / (1.0f + gpu::expf_glibc(-gate)));
}

__global__ void gdn_kernel(gdn_args a) {
  __shared__ float q[max_dk], k[max_dk];
  __shared__ float coef[4]; // qn, kn, decay, beta
  const int32_t r = blockIdx.x, h = blockIdx.y, i = threadIdx.x;
  const int32_t H = a.heads, dk = a.dk, dv = a.dv;
  const int32_t Hk = a.key_heads > 0 ? a.key_heads : H, kh = h / (H / Hk);
  const float q_scale = 1.0f / sqrtf(static_cast<float>(dk));
  float* state = reinterpret_cast<float*>(state_slot(a.batch, r, a.state_base, a.slot_bytes, a.num_slots) + a.state_offset);
  float* Si = state + (static_cast<int64_t>(h) * dv + i) * dk;
  for (int32_t row = a.batch.req_token_start[r]; row < a.batch.req_token_start[r + 1]; ++row) {
    const float* x = a.qkv + row * a.ld_qkv;
    const float* abg = a.abg + row * a.ld_abg;
    const float* qr = x + kh * dk;
    const float* kr = x + Hk * dk + kh * dk;
    if (i == 0) {
      coef[0] = 1.0f / sqrtf(gpu::dot8(qr, qr, dk) + 1e-6f);
      coef[1] = 1.0f / sqrtf(gpu::dot8(kr, kr, dk) + 1e-6f);
      coef[2] = gdn_decay(a, abg, h);
      coef[3] = gpu::sigmoid(abg[H + h]);
    }
    __syncthreads();
    for (int32_t j = i; j < dk; j += blockDim.x) {
      q[j] = qr[j] * coef[0] * q_scale;
      k[j] = kr[j] * coef[1];
    }
    __syncthreads();
    if (i < dv) {
      const float decay = coef[2], beta = coef[3];
      const float v = x[2 * Hk * dk + h * dv + i];
      for (int32_t j = 0; j < dk; ++j) Si[j] *= decay;
      const float delta = beta * (v - gpu::dot8(Si, k, dk));
      for (int32_t j = 0; j < dk; ++j) Si[j] += delta * k[j];
      const float o = gpu::dot8(Si, q, dk);
      a.out[row * a.ldo + h * dv + i] = gdn_output(a, o, abg, h, i);
    }
    __syncthreads(); // q, k and coef are rewritten for the next row
  }
}

// dot8 over a register row and a shared vector: the CPU dot's lanes and tree, fully unrolled.
template <int DK>
__device__ inline float dot_rows(const float (&s)[DK], const float* v) {
  static_assert(DK % 8 == 0, "no tail");
  float lane[8] = {0, 0, 0, 0, 0, 0, 0, 0};
#pragma unroll
  for (int i = 0; i < DK; i += 8)
#pragma unroll
    for (int j = 0; j < 8; ++j) lane[j] += s[i + j] * v[i + j];
  return ((lane[0] + lane[1]) + (lane[2] + lane[3])) + ((lane[4] + lane[5]) + (lane[6] + lane[7]));
}

template <int DK>
__global__ void gdn_rows_kernel(gdn_args a) {
  __shared__ float q[DK], k[DK];
  __shared__ float coef[4]; // qn, kn, decay, beta
  const int32_t r = blockIdx.x, h = blockIdx.y, i = threadIdx.x;
  const int32_t H = a.heads, dv = a.dv;
  const int32_t Hk = a.key_heads > 0 ? a.key_heads : H, kh = h / (H / Hk);
  const bool live = i < dv;
  const float q_scale = 1.0f / sqrtf(static_cast<float>(DK));
  float* state = reinterpret_cast<float*>(state_slot(a.batch, r, a.state_base, a.slot_bytes, a.num_slots) + a.state_offset);
  float* Si = state + (static_cast<int64_t>(h) * dv + (live ? i : 0)) * DK;
  float S[DK];
#pragma unroll
  for (int j = 0; j < DK; ++j) S[j] = live ? Si[j] : 0.0f;
  for (int32_t row = a.batch.req_token_start[r]; row < a.batch.req_token_start[r + 1]; ++row) {
    const float* x = a.qkv + row * a.ld_qkv;
    const float* abg = a.abg + row * a.ld_abg;
    const float* qr = x + kh * DK;
    const float* kr = x + Hk * DK + kh * DK;
    if (i < 32) { // warp 0: lanes 0-7 sum q·q, lanes 8-15 k·k (lanes 16-31 shadow them)
      const float* src = (i & 8) ? kr : qr;
      const int lane = i & 7;
      float sum = 0.0f;
#pragma unroll
      for (int t = 0; t < DK; t += 8) sum += src[t + lane] * src[t + lane];
      sum = gpu::lane_tree8(sum);
      if (i == 0 || i == 8) coef[i / 8] = 1.0f / sqrtf(sum + 1e-6f);
      if (i == 16) coef[2] = gdn_decay(a, abg, h);
      if (i == 17) coef[3] = gpu::sigmoid(abg[H + h]);
    }
    __syncthreads();
    for (int32_t j = i; j < DK; j += blockDim.x) {
      q[j] = qr[j] * coef[0] * q_scale;
      k[j] = kr[j] * coef[1];
    }
    __syncthreads();
    if (live) {
      const float decay = coef[2], beta = coef[3];
      const float v = x[2 * Hk * DK + h * dv + i];
#pragma unroll
      for (int j = 0; j < DK; ++j) S[j] *= decay;
      const float delta = beta * (v - dot_rows<DK>(S, k));
#pragma unroll
      for (int j = 0; j < DK; ++j) S[j] += delta * k[j];
      const float o = dot_rows<DK>(S, q);
      a.out[row * a.ldo + h * dv + i] = gdn_output(a, o, abg, h, i);
    }
    __syncthreads(); // q, k and coef are rewritten for the next row
  }
  if (live)
#pragma unroll
    for (int j = 0; j < DK; ++j) Si[j] = S[j];
}

} // namespace

void gdn(const gdn_args& a, hipStream_t stream) {
  if (a.batch.num_reqs <= 0 || a.heads <= 0) return;
  if (a.dk <= 0 || a.dk > max_dk || a.dv <= 0 || a.dv > 1024)
    throw std::invalid_argument("hip gdn: needs dk in [1, 256] and dv in [1, 1024], got dk " + std::to_string(a.dk) +
                                ", dv " + std::to_string(a.dv));
  if (a.key_heads < 0 || (a.key_heads > 0 && a.heads % a.key_heads != 0))
    throw std::invalid_argument("hip gdn: key_heads " + std::to_string(a.key_heads) + " does not divide heads " +
                                std::to_string(a.heads));
  const int threads = (a.dv + 31) / 32 * 32;
  const dim3 grid(a.batch.num_reqs, a.heads);
  switch (a.dk) {
  case 16: gdn_rows_kernel<16><<<grid, threads, 0, stream>>>(a); break;
  case 32: gdn_rows_kernel<32><<<grid, threads, 0, stream>>>(a); break;
  case 64: gdn_rows_kernel<64><<<grid, threads, 0, stream>>>(a); break;
  case 128: gdn_rows_kernel<128><<<grid, threads, 0, stream>>>(a); break;
  default: gdn_kernel<<<grid, threads, 0, stream>>>(a);
  }
  ORDO_HIP_LAUNCHED();
}

} // namespace ordo::hip
