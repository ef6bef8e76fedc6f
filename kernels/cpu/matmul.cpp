#include "kernels/cpu/matmul.hpp"

#include <cmath>

#include "kernels/cpu/dot.hpp"
#include "kernels/cpu/dtype.hpp"

namespace ordo::cpu {
namespace {

// dot.hpp's lanes, tree and tail with each step a fused multiply-add (one rounding), as the
// GPU's fmaf. fma is exactly rounded, so any hardware or libm that implements it gives the same
// bits.
template <class Fma>
inline void matmul_with(const matmul_args& a, Fma fma) {
  for (int32_t r = 0; r < a.rows; ++r) {
    const float* x = a.x + r * a.ldx;
    float* y = a.y + r * a.ldy;
    for (int32_t o = 0; o < a.out; ++o) {
      const float d = dot_lanes(x, a.w + static_cast<int64_t>(o) * a.in, a.in, fma);
      y[o] = a.accumulate ? y[o] + d : d;
    }
  }
}

__attribute__((target("fma"))) void matmul_fma_unit(const matmul_args& a) {
  matmul_with(a, [](float x, float y, float z) { return __builtin_fmaf(x, y, z); });
}

void matmul_libm(const matmul_args& a) {
  matmul_with(a, [](float x, float y, float z) { return std::fma(x, y, z); });
}

} // namespace

void matmul(const matmul_args& a) {
  // bf16 weights are refused by make_kernel_table on the CPU; a call that gets here is a bug.
  if (a.w_bf16 != nullptr) kernel_fail("matmul: bf16 weights on the CPU device, rows", a.rows);
  static const bool has_fma = __builtin_cpu_supports("fma");
  if (has_fma)
    matmul_fma_unit(a);
  else
    matmul_libm(a);
}

} // namespace ordo::cpu
