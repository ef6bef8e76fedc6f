// Sizes of each preset (DESIGN §3): `tiny` for tests on the CPU device, `b1` (~1B parameters) for
// GPU benchmarks. Pure data: describing a preset allocates nothing.
#pragma once

#include <cstdint>
#include <vector>

#include "runtime/model.hpp"

namespace ordo {

// Which forward the dims describe: the seeded presets', or a Hugging Face family's (the ops it
// adds: GDN key heads ≠ value heads with Qwen's decay and gated output norm, per-head q/k norms,
// partial RoPE, the sigmoid output gate).
enum class model_family : uint8_t { seeded, qwen3_5 };
const char* to_string(model_family f);

struct model_dims {
  model_family family = model_family::seeded;
  uint64_t checkpoint_digest = 0; // hf_checkpoint::digest; 0 for the presets
  int32_t vocab = 258;
  int32_t d_model = 0, mlp_dim = 0;
  std::vector<layer_kind> layers;
  // attention and sparse attention (GQA, RoPE)
  int32_t num_q_heads = 0, num_kv_heads = 0, head_dim = 0;
  int32_t rotary_dim = 0; // rotated dims of a head; 0: all of them
  float rope_base = 10000.0f;
  int32_t max_context = 0;
  // sparse attention: per-token index key, compressed per group of index_group tokens
  int32_t index_dim = 8, index_group = 4, sparse_window = 64, sparse_top_k = 4;
  // gated delta net
  int32_t gdn_heads = 0, gdn_dk = 0, gdn_dv = 0, conv_width = 4; // gdn_heads: the value heads
  int32_t gdn_key_heads = 0; // 0: gdn_heads (the presets have one GDN head count)
  // per-layer embeddings of hashed n-grams
  bool ple = false;
  int32_t ple_dim = 0, ple_buckets = 0, ple_n = 3;
  float norm_eps = 1e-6f;

  int32_t q_dim() const { return num_q_heads * head_dim; }
  int32_t kv_dim() const { return num_kv_heads * head_dim; }
  int32_t gdn_k_heads() const { return gdn_key_heads > 0 ? gdn_key_heads : gdn_heads; }
  int32_t gdn_conv_channels() const { return 2 * gdn_k_heads() * gdn_dk + gdn_heads * gdn_dv; }
  int32_t gdn_abg_dim() const { return gdn_heads * (2 + gdn_dv); }
  int32_t gdn_out_dim() const { return gdn_heads * gdn_dv; }
};

model_dims dims_of(model_preset preset, model_size size);

// The dims of a loaded checkpoint's family; max_context is the smaller of the config's
// max_position_embeddings and `arena_tokens` (what the KV arena holds).
model_dims dims_of(const hf_checkpoint& checkpoint, int32_t arena_tokens);

// options.checkpoint's dims when set, else the preset's.
model_dims dims_of(const model_options& options);

// Number of weight elements the model generates for these dims.
uint64_t parameter_count(const model_dims& d);

} // namespace ordo
