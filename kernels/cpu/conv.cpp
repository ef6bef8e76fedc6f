#include "kernels/cpu/conv.hpp"

#include <cmath>
#include <vector>

#include "kernels/cpu/paging.hpp"

namespace ordo::cpu {

void causal_conv(const causal_conv_args& a) {
  const int32_t w = a.width, c = a.channels;
  for (int32_t r = 0; r < a.batch.num_reqs; ++r) {
    float* st = reinterpret_cast<float*>(state_slot(a.batch, r, a.state_base, a.slot_bytes, a.num_slots) + a.state_offset);
    for (int32_t row = a.batch.req_token_start[r]; row < a.batch.req_token_start[r + 1]; ++row) {
      const float* x = a.x + row * a.ldx;
      float* y = a.y + row * a.ldy;
      for (int32_t ch = 0; ch < c; ++ch) {
        const float* wc = a.w + static_cast<int64_t>(ch) * w;
        float acc = 0.0f;
        for (int32_t j = 0; j < w - 1; ++j) acc += wc[j] * st[j * c + ch];
        acc += wc[w - 1] * x[ch];
        for (int32_t j = 0; j + 1 < w - 1; ++j) st[j * c + ch] = st[(j + 1) * c + ch];
        if (w > 1) st[(w - 2) * c + ch] = x[ch];
        y[ch] = a.silu ? acc / (1.0f + std::exp(-acc)) : acc;
      }
    }
  }
}

} // namespace ordo::cpu
