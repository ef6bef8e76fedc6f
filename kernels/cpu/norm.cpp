#include "kernels/cpu/norm.hpp"

#include <cmath>

#include "kernels/cpu/dot.hpp"

namespace ordo::cpu {

void rmsnorm(const rmsnorm_args& a) {
  for (int32_t r = 0; r < a.rows; ++r) {
    const float* x = a.x + r * a.ldx;
    float* y = a.y + r * a.ldy;
    const float inv = 1.0f / std::sqrt(dot(x, x, a.dim) / static_cast<float>(a.dim) + a.eps);
    for (int32_t i = 0; i < a.dim; ++i) y[i] = x[i] * inv * a.w[i];
  }
}

} // namespace ordo::cpu
