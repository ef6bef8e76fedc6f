// The one dot product every CPU kernel uses: 8 interleaved lanes (lane j sums elements
// j, j+8, ...), combined in a fixed tree, then the tail in order. The order depends only on n,
// never on batch shape, so results are batch-invariant; the lanes let the compiler vectorise.
#pragma once

#include <cstdint>

namespace ordo::cpu {

inline float dot(const float* a, const float* b, int32_t n) {
  float lane[8] = {0, 0, 0, 0, 0, 0, 0, 0};
  int32_t i = 0;
  for (; i + 8 <= n; i += 8)
    for (int j = 0; j < 8; ++j) lane[j] += a[i + j] * b[i + j];
  float acc = ((lane[0] + lane[1]) + (lane[2] + lane[3])) + ((lane[4] + lane[5]) + (lane[6] + lane[7]));
  for (; i < n; ++i) acc += a[i] * b[i];
  return acc;
}

} // namespace ordo::cpu
