#include "runtime/model_presets.hpp"

namespace ordo {

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

uint64_t parameter_count(const model_dims& d) {
  const uint64_t dm = d.d_model;
  uint64_t n = 2 * d.vocab * dm + dm; // embedding, LM head, final norm
  for (layer_kind kind : d.layers) {
    n += 2 * dm + 3 * dm * d.mlp_dim; // two norms, SwiGLU MLP
    if (kind == layer_kind::gdn) {
      n += dm * d.gdn_conv_channels() + dm * d.gdn_abg_dim() + uint64_t(d.gdn_conv_channels()) * d.conv_width +
           d.gdn_heads + uint64_t(d.gdn_out_dim()) * dm;
    } else {
      n += dm * (d.q_dim() + 2 * d.kv_dim()) + uint64_t(d.q_dim()) * dm;
      if (kind == layer_kind::sparse_attention) n += dm * 2 * d.index_dim;
    }
    if (d.ple) n += uint64_t(d.ple_buckets) * d.ple_dim + uint64_t(d.ple_dim) * d.conv_width + uint64_t(d.ple_dim) * dm;
  }
  return n;
}

} // namespace ordo
