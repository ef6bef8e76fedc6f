#include "kernels/cpu/mlp.hpp"

#include <cmath>

namespace ordo::cpu {

void swiglu(const swiglu_args& a) {
  for (int32_t r = 0; r < a.rows; ++r) {
    const float* g = a.gate_up + static_cast<int64_t>(r) * 2 * a.dim;
    float* o = a.out + static_cast<int64_t>(r) * a.dim;
    for (int32_t i = 0; i < a.dim; ++i) {
      const float gate = g[swiglu_gate_at(i, a.group)], up = g[swiglu_up_at(i, a.dim, a.group)];
      o[i] = gate / (1.0f + std::exp(-gate)) * up;
    }
  }
}

} // namespace ordo::cpu
