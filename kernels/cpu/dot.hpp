// The one dot product every CPU kernel uses: 8 interleaved lanes (lane j sums elements
// j, j+8, ...), combined in a fixed tree, then the tail in order. The order depends only on n,
// never on batch shape, so results are batch-invariant; the lanes let the compiler vectorise.
#pragma once

#include <cstdint>

namespace ordo::cpu {

// The lanes, tree and tail with each step `acc = madd(a_i, b_i, acc)`: a separate multiply and
// add for dot(), a fused multiply-add for the matmul (kernels/cpu/matmul.cpp).
template <class MulAdd>
inline float dot_lanes(const float* a, const float* b, int32_t n, MulAdd madd) {
  float lane[8] = {0, 0, 0, 0, 0, 0, 0, 0};
  int32_t i = 0;
  for (; i + 8 <= n; i += 8)
    for (int j = 0; j < 8; ++j) lane[j] = madd(a[i + j], b[i + j], lane[j]);
  float acc = ((lane[0] + lane[1]) + (lane[2] + lane[3])) + ((lane[4] + lane[5]) + (lane[6] + lane[7]));
  for (; i < n; ++i) acc = madd(a[i], b[i], acc);
  return acc;
}

inline float dot(const float* a, const float* b, int32_t n) {
  return dot_lanes(a, b, n, [](float x, float y, float acc) { return acc + x * y; });
}

} // namespace ordo::cpu
