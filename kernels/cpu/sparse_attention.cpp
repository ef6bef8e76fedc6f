#include "kernels/cpu/sparse_attention.hpp"

#include <algorithm>

#include "kernels/cpu/attention_core.hpp"
#include "kernels/cpu/dot.hpp"
#include "kernels/cpu/paging.hpp"

namespace ordo::cpu {

void index_compress(const index_compress_args& a) {
  const float inv = 1.0f / static_cast<float>(a.group);
  const int32_t groups_per_block = a.block_size / a.group;
  for (int32_t r = 0; r < a.batch.num_reqs; ++r) {
    for (int32_t row = a.batch.req_token_start[r]; row < a.batch.req_token_start[r + 1]; ++row) {
      const int32_t p = a.batch.positions[row];
      if (p % a.group != a.group - 1) continue;
      const int32_t first = p - (a.group - 1);
      const int64_t first_slot = slot_of(a.batch, r, first, a.block_size);
      const int64_t out_row = first_slot / a.block_size * groups_per_block + (first_slot % a.block_size) / a.group;
      float* out = a.compressed + out_row * a.dim;
      for (int32_t i = 0; i < a.dim; ++i) out[i] = 0.0f;
      for (int32_t t = first; t <= p; ++t) {
        const float* raw = a.raw + slot_of(a.batch, r, t, a.block_size) * a.dim;
        for (int32_t i = 0; i < a.dim; ++i) out[i] += raw[i];
      }
      for (int32_t i = 0; i < a.dim; ++i) out[i] *= inv;
    }
  }
}

std::vector<int32_t> sparse_positions(int32_t position, const float* group_scores, int32_t window, int32_t top_k,
                                      int32_t group) {
  const int32_t win_start = std::max(0, position - window + 1);
  const int32_t eligible = win_start / group; // groups [0, eligible) end before the window
  std::vector<int32_t> chosen;
  chosen.reserve(top_k);
  // Selection by (score desc, group asc); top_k is small, so repeated scans are cheap and exact.
  std::vector<char> used(eligible, 0);
  for (int32_t k = 0; k < top_k && k < eligible; ++k) {
    int32_t best = -1;
    for (int32_t g = 0; g < eligible; ++g)
      if (!used[g] && (best < 0 || group_scores[g] > group_scores[best])) best = g;
    used[best] = 1;
    chosen.push_back(best);
  }
  std::sort(chosen.begin(), chosen.end());
  std::vector<int32_t> positions;
  positions.reserve(chosen.size() * group + (position - win_start + 1));
  for (int32_t g : chosen)
    for (int32_t t = 0; t < group; ++t) positions.push_back(g * group + t);
  for (int32_t t = win_start; t <= position; ++t) positions.push_back(t);
  return positions;
}

void sparse_attention(const sparse_attention_args& a) {
  const paged_attention_args& at = a.attn;
  const int32_t groups_per_block = at.block_size / a.group;
  attention_scratch s;
  std::vector<float> scores;
  for (int32_t r = 0; r < at.batch.num_reqs; ++r) {
    for (int32_t row = at.batch.req_token_start[r]; row < at.batch.req_token_start[r + 1]; ++row) {
      const int32_t p = at.batch.positions[row];
      const int32_t eligible = std::max(0, p - a.window + 1) / a.group;
      scores.resize(eligible);
      const float* iq = a.index_q + row * a.ld_index_q;
      for (int32_t g = 0; g < eligible; ++g) {
        const int64_t slot = slot_of(at.batch, r, g * a.group, at.block_size);
        const int64_t crow = slot / at.block_size * groups_per_block + (slot % at.block_size) / a.group;
        scores[g] = dot(iq, a.compressed + crow * a.index_dim, a.index_dim);
      }
      const std::vector<int32_t> positions = sparse_positions(p, scores.data(), a.window, a.top_k, a.group);
      attend_positions(at, r, at.q + row * at.ldq, positions.data(), static_cast<int32_t>(positions.size()),
                       at.out + row * at.ldo, s);
    }
  }
}

} // namespace ordo::cpu
