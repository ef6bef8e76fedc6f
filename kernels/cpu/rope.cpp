#include "kernels/cpu/rope.hpp"

#include "kernels/cpu/dtype.hpp"

namespace ordo::cpu {

void rope(const rope_args& a) {
  const int32_t half = rotary_half(a);
  for (int32_t r = 0; r < a.rows; ++r) {
    const int32_t p = a.positions[r];
    if (p < 0 || p >= a.max_positions) kernel_fail("rope: position beyond max_context", p);
    const float* cs = a.cos_sin + static_cast<int64_t>(p) * half * 2;
    for (int32_t h = 0; h < a.heads; ++h) {
      float* x = a.x + r * a.ldx + h * a.head_dim;
      for (int32_t i = 0; i < half; ++i) {
        const float c = cs[2 * i], s = cs[2 * i + 1];
        const float x0 = x[i], x1 = x[i + half];
        x[i] = x0 * c - x1 * s;
        x[i + half] = x0 * s + x1 * c;
      }
    }
  }
}

} // namespace ordo::cpu
