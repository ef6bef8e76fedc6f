// Hugging Face checkpoints: the family registry, the dims a family's config parser yields, its tensor
// table, and the loader that applies the table to a directory.
//
// One family per file under runtime/models/ (qwen3_5.cpp: qwen3_5, qwen3_5_text, qwen3_next with
// num_experts 0). A family is data: architectures / model_types it answers to, a config.json parser,
// a tensor table (HF name, its shape from the config, an exact load-time transform, the ordo slots it
// fills) and the HF name prefixes it skips (vision tower, MTP head).
//
//   | event                                   | load_hf_checkpoint                                  |
//   | config names no registered architecture | refused: config.json, the architecture, the known   |
//   | a config value is missing or out of     | refused: config.json, the key, the value, allowed   |
//   |   range                                 |                                                     |
//   | a table tensor is absent                | refused: the directory, the tensor, "missing"       |
//   | a tensor neither in the table nor       | refused: its file, the tensor, "unknown"            |
//   |   skipped                               |                                                     |
//   | shape differs from the config's         | refused: its file, the tensor, both shapes          |
//   | otherwise                               | every table tensor read once, transformed to fp32   |
//   |                                         | slots; skipped tensors are never read               |
// NOTE(exact): every transform is exact in fp32 given the stored values (dtype widening, 1 + w,
// row permutations), except neg_exp, which is glibc's expf, computed once on the host.
// Runs on: the node's startup thread (or a tool's); no shared state.
#pragma once

#include <cstdint>
#include <map>
#include <stdexcept>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

namespace ordo {

struct model_load_error : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// fp32 values in ordo's layout, row-major.
struct host_tensor {
  std::vector<int64_t> shape;
  std::vector<float> data;
};

enum class hf_layer_kind : uint8_t { linear_attention, full_attention };

// How a GDN layer's input projections are packed in the checkpoint.
enum class hf_gdn_packing : uint8_t {
  split,      // Qwen3.5: in_proj_qkv (q|k|v), in_proj_z, in_proj_b, in_proj_a
  interleaved // Qwen3-Next: in_proj_qkvz = [q k v z] per key head, in_proj_ba = [b a] per key head
};

// What a family's config parser yields: every size the tensor table and the forward need.
struct hf_dims {
  std::string architecture; // architectures[0], or model_type when there is none
  std::string model_type;
  std::string tensor_prefix; // "model." or "model.language_model."
  hf_gdn_packing gdn_packing = hf_gdn_packing::split;
  int32_t vocab_size = 0;
  int32_t hidden_size = 0;
  int32_t intermediate_size = 0;
  int32_t num_layers = 0;
  std::vector<hf_layer_kind> layer_kinds;
  // full attention
  int32_t num_heads = 0;
  int32_t num_kv_heads = 0;
  int32_t head_dim = 0;
  int32_t rotary_dim = 0; // int(head_dim * partial_rotary_factor), even
  double rope_theta = 10000.0;
  // Gated DeltaNet
  int32_t gdn_key_heads = 0;   // nk
  int32_t gdn_value_heads = 0; // nv, a multiple of nk
  int32_t gdn_key_dim = 0;     // dk
  int32_t gdn_value_dim = 0;   // dv
  int32_t gdn_conv_kernel = 0;
  float rms_norm_eps = 1e-6f;
  int32_t max_position_embeddings = 32768;
  bool tie_word_embeddings = false;
  // generation_config.json's eos_token_id when it has one (what transformers' generate stops on),
  // else config.json's.
  std::vector<int32_t> eos_token_ids;
  int32_t bos_token_id = -1; // -1: none

  int32_t gdn_conv_dim() const { return 2 * gdn_key_heads * gdn_key_dim + gdn_value_heads * gdn_value_dim; }
};

// The exact load-time transforms.
enum class hf_transform : uint8_t {
  copy,              // widened to fp32 (shape may be reshaped, e.g. conv [C, 1, K] -> [C, K])
  one_plus,          // zero-centred RMSNorm weight folded: 1 + w
  neg_exp,           // A_log -> -exp(A_log)
  split_q_gate,      // q_proj [nh * 2hd, H], [q gate] per head -> q [nh * hd, H], gate [nh * hd, H]
  deinterleave_qkvz, // in_proj_qkvz, [q k v z] per key head -> qkv (q | k | v) [conv_dim, H], z [nv * dv, H]
  deinterleave_ba,   // in_proj_ba, [b a] per key head -> b [nv, H], a [nv, H]
  duplicate          // tied embeddings: one tensor fills several slots with the same values
};
const char* to_string(hf_transform t);

struct hf_slot {
  std::string name; // e.g. "layers.0.gdn.w_qkv"
  std::vector<int64_t> shape;
};

struct hf_tensor_rule {
  std::string hf_name;
  std::vector<int64_t> hf_shape;
  hf_transform transform = hf_transform::copy;
  std::vector<hf_slot> slots;
};

struct hf_family {
  const char* name;
  std::vector<std::string> architectures;
  std::vector<std::string> model_types;
  // Reads config.json (already parsed); throws model_load_error naming `config_path`, the key and the value.
  hf_dims (*parse_config)(const nlohmann::json& config, const std::string& config_path);
  std::vector<hf_tensor_rule> (*tensor_table)(const hf_dims& dims);
  std::vector<std::string> (*skip_prefixes)(const hf_dims& dims);
};

// Every registered family, in a fixed order.
const std::vector<const hf_family*>& hf_families();

// Every dim in a fixed order, "key=value" separated by spaces (logs, and the checkpoint digest).
std::string describe(const hf_dims& dims);

struct hf_checkpoint {
  const hf_family* family = nullptr;
  hf_dims dims;
  std::map<std::string, host_tensor> slots;
  std::vector<std::string> skipped; // checkpoint tensors the family skips (never read)
  // XXH64 over the family, describe(dims), then each loaded tensor in name order: name, dtype, shape,
  // stored bytes. Sharding does not change it; any byte of a loaded tensor or any dim that the
  // forward reads does (issue 37 item 7: the identity a prefix-cache namespace is to include).
  uint64_t digest = 0;
};

// config.json of `dir` -> its family and dims (no tensor is read); generation_config.json's
// eos_token_id, when the file is there, replaces config.json's.
hf_checkpoint read_hf_config(const std::string& dir);
// Every check load_hf_checkpoint makes (config, safetensors headers and tiling, the table both ways),
// nothing converted: slots stay empty, digest 0. For refusing a bad checkpoint before a node serves.
hf_checkpoint check_hf_checkpoint(const std::string& dir);
// The whole checkpoint: the checks, then every table tensor through its transform, and the digest.
hf_checkpoint load_hf_checkpoint(const std::string& dir);

} // namespace ordo
