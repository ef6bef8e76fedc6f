#include "runtime/model_presets.hpp"

#include <algorithm>

#include "runtime/models/hf_model.hpp"

namespace ordo {

const char* to_string(model_family f) {
  switch (f) {
  case model_family::seeded: return "seeded";
  case model_family::qwen3_5: return "qwen3_5";
  }
  return "?";
}

model_dims dims_of(model_preset preset, model_size size) {
  model_dims d;
  int32_t num_layers = 0;
  if (size == model_size::tiny) {
    d.d_model = 64, d.mlp_dim = 128, num_layers = 4;
    d.num_q_heads = 4, d.num_kv_heads = 2, d.head_dim = 16, d.max_context = 4096;
    d.gdn_heads = 4, d.gdn_dk = 16, d.gdn_dv = 16;
    d.ple_dim = 16, d.ple_buckets = 512;
  } else {
    d.d_model = 2048, d.mlp_dim = 5632, num_layers = 16;
    d.num_q_heads = 16, d.num_kv_heads = 4, d.head_dim = 128, d.max_context = 32768;
    d.gdn_heads = 16, d.gdn_dk = 128, d.gdn_dv = 128;
    d.ple_dim = 128, d.ple_buckets = 8192;
  }
  for (int32_t l = 0; l < num_layers; ++l) {
    const bool every_fourth = l % 4 == 3;
    switch (preset) {
    case model_preset::dense: d.layers.push_back(layer_kind::attention); break;
    case model_preset::gdn_hybrid: d.layers.push_back(every_fourth ? layer_kind::attention : layer_kind::gdn); break;
    case model_preset::qsa_gdn_ple: d.layers.push_back(every_fourth ? layer_kind::sparse_attention : layer_kind::gdn); break;
    }
  }
  d.ple = preset == model_preset::qsa_gdn_ple;
  return d;
}

model_dims dims_of(const hf_checkpoint& ck, int32_t arena_tokens) {
  const hf_dims& h = ck.dims;
  model_dims d;
  d.family = model_family::qwen3_5; // the one family registered (runtime/models/registry.cpp)
  d.checkpoint_digest = ck.digest;
  d.vocab = h.vocab_size;
  d.d_model = h.hidden_size;
  d.mlp_dim = h.intermediate_size;
  for (hf_layer_kind k : h.layer_kinds)
    d.layers.push_back(k == hf_layer_kind::full_attention ? layer_kind::attention : layer_kind::gdn);
  d.num_q_heads = h.num_heads;
  d.num_kv_heads = h.num_kv_heads;
  d.head_dim = h.head_dim;
  d.rotary_dim = h.rotary_dim;
  d.rope_base = static_cast<float>(h.rope_theta);
  d.max_context = std::min(h.max_position_embeddings, arena_tokens);
  d.gdn_heads = h.gdn_value_heads;
  d.gdn_key_heads = h.gdn_key_heads;
  d.gdn_dk = h.gdn_key_dim;
  d.gdn_dv = h.gdn_value_dim;
  d.conv_width = h.gdn_conv_kernel;
  d.norm_eps = h.rms_norm_eps;
  return d;
}

model_dims dims_of(const model_options& o) {
  if (o.checkpoint)
    return dims_of(*o.checkpoint, static_cast<int32_t>(std::min<int64_t>(int64_t{o.num_blocks} * o.block_size, INT32_MAX)));
  return dims_of(o.preset, o.size);
}

uint64_t parameter_count(const model_dims& d) {
  const uint64_t dm = d.d_model;
  uint64_t n = 2 * d.vocab * dm + dm; // embedding, LM head, final norm
  for (layer_kind kind : d.layers) {
    n += 2 * dm + 3 * dm * d.mlp_dim; // two norms, SwiGLU MLP
    const bool qwen = d.family == model_family::qwen3_5;
    if (kind == layer_kind::gdn) {
      n += dm * d.gdn_conv_channels() + dm * d.gdn_abg_dim() + uint64_t(d.gdn_conv_channels()) * d.conv_width +
           d.gdn_heads + uint64_t(d.gdn_out_dim()) * dm;
      if (qwen) n += d.gdn_heads + d.gdn_dv; // −exp(A_log), the output norm
    } else {
      n += dm * (d.q_dim() + 2 * d.kv_dim()) + uint64_t(d.q_dim()) * dm;
      if (qwen) n += dm * d.q_dim() + 2 * d.head_dim; // the output gate's rows, q/k norms
      if (kind == layer_kind::sparse_attention) n += dm * 2 * d.index_dim;
    }
    if (d.ple) n += uint64_t(d.ple_buckets) * d.ple_dim + uint64_t(d.ple_dim) * d.conv_width + uint64_t(d.ple_dim) * dm;
  }
  return n;
}

} // namespace ordo
