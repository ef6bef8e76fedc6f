// The attention inner loop shared by dense and sparse attention: one query row against an
// explicit ascending list of its request's positions, read from the arena. Fixed formulation:
// s_j = q·k_j / sqrt(d), then per chunk c of attention_chunk entries (kernel_args.hpp)
// m_c = max s, l_c = Σ e^{s_j − m_c}, a_c = Σ e^{s_j − m_c} v_j in list order, and with M = max s
// and w_c = e^{m_c − M}: o = (Σ_c a_c w_c) / (Σ_c l_c w_c), folded in ascending c.
#pragma once

#include <cstdint>
#include <vector>

#include "kernels/kernel_args.hpp"

namespace ordo::cpu {

struct attention_scratch {
  std::vector<float> scores, kv, acc, chunk;
  std::vector<int64_t> slots;
};

void attend_positions(const paged_attention_args& a, int32_t req, const float* q_row, const int32_t* positions,
                      int32_t count, float* out_row, attention_scratch& s);

} // namespace ordo::cpu
