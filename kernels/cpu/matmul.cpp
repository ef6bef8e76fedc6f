#include "kernels/cpu/matmul.hpp"

#include "kernels/cpu/dot.hpp"

namespace ordo::cpu {

void matmul(const matmul_args& a) {
  for (int32_t r = 0; r < a.rows; ++r) {
    const float* x = a.x + r * a.ldx;
    float* y = a.y + r * a.ldy;
    for (int32_t o = 0; o < a.out; ++o) {
      const float d = dot(x, a.w + static_cast<int64_t>(o) * a.in, a.in);
      y[o] = a.accumulate ? y[o] + d : d;
    }
  }
}

} // namespace ordo::cpu
