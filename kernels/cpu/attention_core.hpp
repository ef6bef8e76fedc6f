// The attention inner loop shared by dense and sparse attention: one query row against an
// explicit ascending list of its request's positions, read from the arena. Fixed formulation:
// s_j = q·k_j / sqrt(d), m = max s, o = (Σ_j e^{s_j − m} v_j) / Σ_j e^{s_j − m}, sums in list order.
#pragma once

#include <cstdint>
#include <vector>

#include "kernels/kernel_args.hpp"

namespace ordo::cpu {

struct attention_scratch {
  std::vector<float> scores, kv, acc;
  std::vector<int64_t> slots;
};

void attend_positions(const paged_attention_args& a, int32_t req, const float* q_row, const int32_t* positions,
                      int32_t count, float* out_row, attention_scratch& s);

} // namespace ordo::cpu
