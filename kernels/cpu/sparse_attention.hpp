// Sparse attention of qsa layers: group index compression and window + top-k group attention.
#pragma once

#include <cstdint>
#include <vector>

#include "kernels/kernel_args.hpp"

namespace ordo::cpu {

void index_compress(const index_compress_args& a);
void sparse_attention(const sparse_attention_args& a);

// Positions a query at `position` attends to, ascending: the top_k groups by score among groups
// entirely before the window (ties: earlier group first), then the window. group_scores[g] is the
// index score of group g (at least position / group entries).
std::vector<int32_t> sparse_positions(int32_t position, const float* group_scores, int32_t window,
                                      int32_t top_k, int32_t group);

} // namespace ordo::cpu
