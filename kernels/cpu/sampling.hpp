// Sampling: gather of the sample rows' hidden states, greedy / seeded temperature sampling.
#pragma once

#include <cstdint>

#include "kernels/kernel_args.hpp"

namespace ordo::cpu {

void gather_rows(const gather_rows_args& a);
void sample(const sample_args& a);

// One draw: argmax (lowest id on ties) when temperature <= 0, else from softmax(logits / T)
// with the uniform hashed from (seed, position).
int32_t sample_one(const float* logits, int32_t vocab, float temperature, uint64_t seed, int32_t position);

} // namespace ordo::cpu
