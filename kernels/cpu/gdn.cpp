#include "kernels/cpu/gdn.hpp"

#include <cmath>
#include <vector>

#include "kernels/cpu/dot.hpp"
#include "kernels/cpu/paging.hpp"

namespace ordo::cpu {
namespace {
float sigmoid(float x) { return 1.0f / (1.0f + std::exp(-x)); }
} // namespace

void gdn(const gdn_args& a) {
  const int32_t H = a.heads, dk = a.dk, dv = a.dv;
  std::vector<float> q(dk), k(dk);
  const float q_scale = 1.0f / std::sqrt(static_cast<float>(dk));
  for (int32_t r = 0; r < a.batch.num_reqs; ++r) {
    float* state = reinterpret_cast<float*>(state_slot(a.batch, r, a.state_base, a.slot_bytes, a.num_slots) + a.state_offset);
    for (int32_t row = a.batch.req_token_start[r]; row < a.batch.req_token_start[r + 1]; ++row) {
      const float* x = a.qkv + row * a.ld_qkv;
      const float* abg = a.abg + row * a.ld_abg;
      float* out = a.out + row * a.ldo;
      for (int32_t h = 0; h < H; ++h) {
        const float* qr = x + h * dk;
        const float* kr = x + H * dk + h * dk;
        const float* v = x + 2 * H * dk + h * dv;
        const float qn = 1.0f / std::sqrt(dot(qr, qr, dk) + 1e-6f);
        const float kn = 1.0f / std::sqrt(dot(kr, kr, dk) + 1e-6f);
        for (int32_t j = 0; j < dk; ++j) {
          q[j] = qr[j] * qn * q_scale;
          k[j] = kr[j] * kn;
        }
        const float decay = sigmoid(abg[h] + a.a_bias[h]);
        const float beta = sigmoid(abg[H + h]);
        const float* gate = abg + 2 * H + h * dv;
        float* S = state + static_cast<int64_t>(h) * dv * dk;
        // S = a·S·(I − b·k·kᵀ) + b·v·kᵀ, row by row: S_i ← a·S_i + b·(v_i − a·S_i·k)·kᵀ
        for (int32_t i = 0; i < dv; ++i) {
          float* Si = S + static_cast<int64_t>(i) * dk;
          for (int32_t j = 0; j < dk; ++j) Si[j] *= decay;
          const float delta = beta * (v[i] - dot(Si, k.data(), dk));
          for (int32_t j = 0; j < dk; ++j) Si[j] += delta * k[j];
          const float o = dot(Si, q.data(), dk);
          out[h * dv + i] = o * (gate[i] / (1.0f + std::exp(-gate[i])));
        }
      }
    }
  }
}

} // namespace ordo::cpu
