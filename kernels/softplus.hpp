// softplus(x) = log(1 + e^x) with torch's threshold (x > 20: x), for the Qwen GDN's decay
// exp(−exp(A_log) · softplus(a + dt_bias)). The caller passes e = e^x from its glibc-equal expf
// (std::exp on the CPU, gpu::expf_glibc in a HIP kernel); the log is taken in double with +, −, ×
// and ÷ alone, each correctly rounded on both, so the CPU reference and its HIP twin agree bitwise.
// Accuracy: within 1 ulp of float's log1p over the range used. Host and GPU code.
#pragma once

#include <cstdint>

#include "kernels/kernel_args.hpp"

namespace ordo {

ORDO_ARGS_HD inline float softplus_of(float x, float e) {
  if (x > 20.0f) return x;
  if (x < -20.0f) return e; // log1p(e) = e − e²/2 + …, e < 2.1e-9: e is within 1e-9 relatively
  // u = 1 + e is exact in double here: e ≥ e^-20 > 2^-29, and e carries 24 significant bits.
  const double u = 1.0 + static_cast<double>(e);
  uint64_t bits;
  __builtin_memcpy(&bits, &u, 8);
  int32_t k = static_cast<int32_t>((bits >> 52) & 0x7ff) - 1023;
  bits = (bits & 0x000fffffffffffffull) | 0x3ff0000000000000ull; // u = m · 2^k, m in [1, 2)
  double m;
  __builtin_memcpy(&m, &bits, 8);
  if (m > 1.4142135623730951) { // m in [√½, √2): the series below converges fast
    m = m * 0.5;
    k += 1;
  }
  // log m = 2 atanh(s) = 2 (s + s³/3 + s⁵/5 + …), s = (m − 1)/(m + 1), |s| ≤ 0.172.
  const double s = (m - 1.0) / (m + 1.0), s2 = s * s;
  double p = 1.0 / 17.0;
  p = p * s2 + 1.0 / 15.0;
  p = p * s2 + 1.0 / 13.0;
  p = p * s2 + 1.0 / 11.0;
  p = p * s2 + 1.0 / 9.0;
  p = p * s2 + 1.0 / 7.0;
  p = p * s2 + 1.0 / 5.0;
  p = p * s2 + 1.0 / 3.0;
  p = p * s2 + 1.0;
  const double log_m = 2.0 * s * p;
  return static_cast<float>(static_cast<double>(k) * 0.6931471805599453 + log_m);
}

} // namespace ordo
