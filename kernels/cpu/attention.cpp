#include "kernels/cpu/attention.hpp"

#include <algorithm>
#include <cmath>
#include <vector>

#include "kernels/cpu/attention_core.hpp"
#include "kernels/cpu/dot.hpp"
#include "kernels/cpu/paging.hpp"

namespace ordo::cpu {

void kv_store(const kv_store_args& a) {
  const int32_t row_elems = a.heads * a.head_dim;
  std::vector<float> scaled(a.head_dim);
  for (int32_t r = 0; r < a.rows; ++r) {
    const int64_t slot = a.slot_mapping[r];
    if (slot < 0) continue;
    const float* src = a.src + r * a.ld;
    if (a.dtype != elem_dtype::fp8_e4m3) {
      store_elems(a.region, a.dtype, static_cast<size_t>(slot) * row_elems, src, row_elems);
      continue;
    }
    // fp8: one scale per (token, head) so the head's largest magnitude maps to the fp8 maximum.
    for (int32_t h = 0; h < a.heads; ++h) {
      const float* x = src + h * a.head_dim;
      float amax = 0.0f;
      for (int32_t i = 0; i < a.head_dim; ++i) amax = std::fmax(amax, std::fabs(x[i]));
      const float scale = amax > 0.0f ? amax / fp8_e4m3_max : 1.0f;
      for (int32_t i = 0; i < a.head_dim; ++i) scaled[i] = x[i] / scale;
      store_elems(a.region, a.dtype, static_cast<size_t>(slot) * row_elems + h * a.head_dim, scaled.data(), a.head_dim);
      a.scale_region[slot * a.heads + h] = scale;
    }
  }
}

void attend_positions(const paged_attention_args& a, int32_t req, const float* q_row, const int32_t* positions,
                      int32_t count, float* out_row, attention_scratch& s) {
  const int32_t hd = a.head_dim, group = a.num_q_heads / a.num_kv_heads;
  const int32_t row_elems = a.num_kv_heads * hd;
  const float scale = 1.0f / std::sqrt(static_cast<float>(hd));
  s.scores.resize(count);
  s.slots.resize(count);
  s.kv.resize(hd);
  s.acc.resize(hd);
  s.chunk.resize(hd);
  for (int32_t j = 0; j < count; ++j) s.slots[j] = slot_of(a.batch, req, positions[j], a.block_size);
  for (int32_t h = 0; h < a.num_q_heads; ++h) {
    const int32_t kvh = h / group;
    const float* q = q_row + h * hd;
    float m = -INFINITY;
    for (int32_t j = 0; j < count; ++j) {
      const int64_t slot = s.slots[j];
      const float ks = a.k_scale ? a.k_scale[slot * a.num_kv_heads + kvh] : 1.0f;
      load_elems(a.k, a.dtype, static_cast<size_t>(slot) * row_elems + kvh * hd, s.kv.data(), hd, ks);
      s.scores[j] = dot(q, s.kv.data(), hd) * scale;
      m = std::fmax(m, s.scores[j]);
    }
    // Chunks of attention_chunk entries (kernel_args.hpp), each summed in list order against its
    // own max, folded in ascending order. One chunk: the weight is e^0 = 1 and the fold is exact.
    float l = 0.0f;
    for (int32_t i = 0; i < hd; ++i) s.acc[i] = 0.0f;
    for (int32_t c0 = 0; c0 < count; c0 += attention_chunk) {
      const int32_t c1 = std::min(count, c0 + attention_chunk);
      float mc = -INFINITY;
      for (int32_t j = c0; j < c1; ++j) mc = std::fmax(mc, s.scores[j]);
      float lc = 0.0f;
      for (int32_t i = 0; i < hd; ++i) s.chunk[i] = 0.0f;
      for (int32_t j = c0; j < c1; ++j) {
        const int64_t slot = s.slots[j];
        const float e = std::exp(s.scores[j] - mc);
        lc += e;
        const float vs = a.v_scale ? a.v_scale[slot * a.num_kv_heads + kvh] : 1.0f;
        load_elems(a.v, a.dtype, static_cast<size_t>(slot) * row_elems + kvh * hd, s.kv.data(), hd, vs);
        for (int32_t i = 0; i < hd; ++i) s.chunk[i] += e * s.kv[i];
      }
      const float w = std::exp(mc - m);
      l += lc * w;
      for (int32_t i = 0; i < hd; ++i) s.acc[i] += s.chunk[i] * w;
    }
    for (int32_t i = 0; i < hd; ++i) out_row[h * hd + i] = s.acc[i] / l;
  }
}

void paged_attention(const paged_attention_args& a) {
  attention_scratch s;
  std::vector<int32_t> positions;
  for (int32_t r = 0; r < a.batch.num_reqs; ++r) {
    for (int32_t row = a.batch.req_token_start[r]; row < a.batch.req_token_start[r + 1]; ++row) {
      const int32_t p = a.batch.positions[row];
      positions.resize(p + 1);
      for (int32_t j = 0; j <= p; ++j) positions[j] = j;
      attend_positions(a, r, a.q + row * a.ldq, positions.data(), p + 1, a.out + row * a.ldo, s);
    }
  }
}

} // namespace ordo::cpu
