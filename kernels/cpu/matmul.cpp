#include "kernels/cpu/matmul.hpp"

#include <cmath>

namespace ordo::cpu {
namespace {

// The matmul's dot: kernels/cpu/dot.hpp's 8 interleaved lanes and tree, but each lane step and
// each tail step is a fused multiply-add (one rounding), as the GPU's fmaf. The order depends
// only on `in`, so the result is batch-invariant; fma is exactly rounded, so any hardware or
// libm that implements it gives the same bits.
template <class Fma>
inline float fused_dot(const float* a, const float* b, int32_t n, Fma fma) {
  float lane[8] = {0, 0, 0, 0, 0, 0, 0, 0};
  int32_t i = 0;
  for (; i + 8 <= n; i += 8)
    for (int j = 0; j < 8; ++j) lane[j] = fma(a[i + j], b[i + j], lane[j]);
  float acc = ((lane[0] + lane[1]) + (lane[2] + lane[3])) + ((lane[4] + lane[5]) + (lane[6] + lane[7]));
  for (; i < n; ++i) acc = fma(a[i], b[i], acc);
  return acc;
}

template <class Fma>
inline void matmul_with(const matmul_args& a, Fma fma) {
  for (int32_t r = 0; r < a.rows; ++r) {
    const float* x = a.x + r * a.ldx;
    float* y = a.y + r * a.ldy;
    for (int32_t o = 0; o < a.out; ++o) {
      const float d = fused_dot(x, a.w + static_cast<int64_t>(o) * a.in, a.in, fma);
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
  static const bool has_fma = __builtin_cpu_supports("fma");
  if (has_fma)
    matmul_fma_unit(a);
  else
    matmul_libm(a);
}

} // namespace ordo::cpu
