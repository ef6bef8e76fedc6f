#include "kernels/cpu/sampling.hpp"

#include <cmath>
#include <cstring>

#include "kernels/cpu/hash.hpp"

namespace ordo::cpu {

void gather_rows(const gather_rows_args& a) {
  for (int32_t i = 0; i < a.count; ++i)
    std::memcpy(a.out + static_cast<int64_t>(i) * a.dim, a.x + a.row_ids[i] * a.ldx, a.dim * sizeof(float));
}

int32_t sample_one(const float* logits, int32_t vocab, float temperature, uint64_t seed, int32_t position) {
  int32_t best = 0;
  for (int32_t j = 1; j < vocab; ++j)
    if (logits[j] > logits[best]) best = j;
  if (!(temperature > 0.0f)) return best;
  const float m = logits[best];
  float total = 0.0f;
  for (int32_t j = 0; j < vocab; ++j) total += std::exp((logits[j] - m) / temperature);
  const float u = uniform01(hash3(seed, static_cast<uint64_t>(static_cast<uint32_t>(position)), 0x73616d706c65ULL)) * total;
  float cum = 0.0f;
  int32_t last_nonzero = best;
  for (int32_t j = 0; j < vocab; ++j) {
    const float p = std::exp((logits[j] - m) / temperature);
    if (p > 0.0f) last_nonzero = j;
    cum += p;
    if (cum > u) return j;
  }
  return last_nonzero; // rounding left u at the very top of the sum
}

void sample(const sample_args& a) {
  for (int32_t i = 0; i < a.batch.num_samples; ++i) {
    const int32_t row = a.batch.sample_rows[i];
    a.sampled[i] = sample_one(a.logits + static_cast<int64_t>(i) * a.vocab, a.vocab, a.batch.sample_temperature[i],
                              a.batch.sample_seed[i], a.batch.positions[row]);
  }
}

} // namespace ordo::cpu
