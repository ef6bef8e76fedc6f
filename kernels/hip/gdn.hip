// Gated delta rule, token by token: one block per (request, head), thread i owning state row
// S_i (dk floats) and running the CPU reference's per-row update in the same order.
#include <stdexcept>
#include <string>

#include "kernels/hip/device_math.hpp"
#include "kernels/hip/launch.hpp"
#include "kernels/hip/paging.hpp"

namespace ordo::hip {
namespace {

constexpr int max_dk = 256;

__global__ void gdn_kernel(gdn_args a) {
  __shared__ float q[max_dk], k[max_dk];
  __shared__ float coef[4]; // qn, kn, decay, beta
  const int32_t r = blockIdx.x, h = blockIdx.y, i = threadIdx.x;
  const int32_t H = a.heads, dk = a.dk, dv = a.dv;
  const float q_scale = 1.0f / sqrtf(static_cast<float>(dk));
  float* state = reinterpret_cast<float*>(state_slot(a.batch, r, a.state_base, a.slot_bytes, a.num_slots) + a.state_offset);
  float* Si = state + (static_cast<int64_t>(h) * dv + i) * dk;
  for (int32_t row = a.batch.req_token_start[r]; row < a.batch.req_token_start[r + 1]; ++row) {
    const float* x = a.qkv + row * a.ld_qkv;
    const float* abg = a.abg + row * a.ld_abg;
    const float* qr = x + h * dk;
    const float* kr = x + H * dk + h * dk;
    if (i == 0) {
      coef[0] = 1.0f / sqrtf(gpu::dot8(qr, qr, dk) + 1e-6f);
      coef[1] = 1.0f / sqrtf(gpu::dot8(kr, kr, dk) + 1e-6f);
      coef[2] = gpu::sigmoid(abg[h] + a.a_bias[h]);
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
      const float v = x[2 * H * dk + h * dv + i];
      const float gate = abg[2 * H + h * dv + i];
      for (int32_t j = 0; j < dk; ++j) Si[j] *= decay;
      const float delta = beta * (v - gpu::dot8(Si, k, dk));
      for (int32_t j = 0; j < dk; ++j) Si[j] += delta * k[j];
      const float o = gpu::dot8(Si, q, dk);
      a.out[row * a.ldo + h * dv + i] = o * (gate / (1.0f + gpu::expf_glibc(-gate)));
    }
    __syncthreads(); // q, k and coef are rewritten for the next row
  }
}

} // namespace

void gdn(const gdn_args& a, hipStream_t stream) {
  if (a.batch.num_reqs <= 0 || a.heads <= 0) return;
  if (a.dk <= 0 || a.dk > max_dk || a.dv <= 0 || a.dv > 1024)
    throw std::invalid_argument("hip gdn: needs dk in [1, 256] and dv in [1, 1024], got dk " + std::to_string(a.dk) +
                                ", dv " + std::to_string(a.dv));
  const int threads = (a.dv + 31) / 32 * 32;
  gdn_kernel<<<dim3(a.batch.num_reqs, a.heads), threads, 0, stream>>>(a);
  ORDO_HIP_LAUNCHED();
}

} // namespace ordo::hip
