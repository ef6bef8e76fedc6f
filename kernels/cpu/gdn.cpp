#include "kernels/cpu/gdn.hpp"

#include <cmath>
#include <vector>

#include "kernels/cpu/dot.hpp"
#include "kernels/cpu/paging.hpp"
#include "kernels/softplus.hpp"

namespace ordo::cpu {
namespace {
float sigmoid(float x) { return 1.0f / (1.0f + std::exp(-x)); }
} // namespace

void gdn(const gdn_args& a) {
  const int32_t H = a.heads, dk = a.dk, dv = a.dv;
  const int32_t Hk = a.key_heads > 0 ? a.key_heads : H, per_key = H / Hk;
  std::vector<float> q(dk), k(dk);
  const float q_scale = 1.0f / std::sqrt(static_cast<float>(dk));
  for (int32_t r = 0; r < a.batch.num_reqs; ++r) {
    float* state = reinterpret_cast<float*>(state_slot(a.batch, r, a.state_base, a.slot_bytes, a.num_slots) + a.state_offset);
    for (int32_t row = a.batch.req_token_start[r]; row < a.batch.req_token_start[r + 1]; ++row) {
      const float* x = a.qkv + row * a.ld_qkv;
      const float* abg = a.abg + row * a.ld_abg;
      float* out = a.out + row * a.ldo;
      for (int32_t h = 0; h < H; ++h) {
        const int32_t kh = h / per_key;
        const float* qr = x + kh * dk;
        const float* kr = x + Hk * dk + kh * dk;
        const float* v = x + 2 * Hk * dk + h * dv;
        const float qn = 1.0f / std::sqrt(dot(qr, qr, dk) + 1e-6f);
        const float kn = 1.0f / std::sqrt(dot(kr, kr, dk) + 1e-6f);
        for (int32_t j = 0; j < dk; ++j) {
          q[j] = qr[j] * qn * q_scale;
          k[j] = kr[j] * kn;
        }
        float decay;
        if (a.neg_exp_a == nullptr) {
          decay = sigmoid(abg[h] + a.a_bias[h]);
        } else {
          const float x_dt = abg[h] + a.a_bias[h];
          decay = std::exp(a.neg_exp_a[h] * softplus_of(x_dt, std::exp(x_dt)));
        }
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
          out[h * dv + i] = a.neg_exp_a != nullptr ? o : o * (gate[i] / (1.0f + std::exp(-gate[i])));
        }
      }
    }
  }
}

} // namespace ordo::cpu
