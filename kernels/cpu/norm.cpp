#include "kernels/cpu/norm.hpp"

#include <cmath>

#include "kernels/cpu/dot.hpp"

namespace ordo::cpu {

void rmsnorm(const rmsnorm_args& a) {
  for (int32_t r = 0; r < a.rows; ++r)
    for (int32_t h = 0; h < a.heads; ++h) {
      const float* x = a.x + r * a.ldx + h * a.dim;
      float* y = a.y + r * a.ldy + h * a.dim;
      const float inv = 1.0f / std::sqrt(dot(x, x, a.dim) / static_cast<float>(a.dim) + a.eps);
      if (a.gate == nullptr) {
        for (int32_t i = 0; i < a.dim; ++i) y[i] = x[i] * inv * a.w[i];
        continue;
      }
      const float* g = a.gate + r * a.ldg + h * a.dim;
      for (int32_t i = 0; i < a.dim; ++i) y[i] = x[i] * inv * a.w[i] * (g[i] / (1.0f + std::exp(-g[i])));
    }
}

} // namespace ordo::cpu
