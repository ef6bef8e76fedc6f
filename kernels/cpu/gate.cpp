#include "kernels/cpu/gate.hpp"

#include <cmath>

namespace ordo::cpu {

void output_gate(const output_gate_args& a) {
  for (int32_t r = 0; r < a.rows; ++r) {
    float* x = a.x + r * a.ldx;
    const float* g = a.gate + r * a.ldg;
    for (int32_t i = 0; i < a.dim; ++i) x[i] = x[i] * (1.0f / (1.0f + std::exp(-g[i])));
  }
}

} // namespace ordo::cpu
