// Layout identities and contracts (DESIGN §4):
// - the state image layout id: a stable, human-readable string of the image's segments;
// - the namespace of cache keys: a digest of everything that changes KV or state bytes;
// - the region contract: the page fields an arena must publish, derived by byte arithmetic from
//   the model's dimensions and compared at startup with what the model actually published.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "kernels/kv_layout.hpp"
#include "runtime/model.hpp"
#include "runtime/model_presets.hpp"

namespace ordo {

// Bumped whenever the image byte order or the page field order changes.
inline constexpr int layout_version = 1;

// "state-v1;gdn_conv[0]:fp32:2304@0;gdn_ssm[0]:fp32:4096@2304;...": segments in image order,
// each with its layer ("*" when shared), dtype, byte size and byte offset in the image.
// "none" for a model without recurrent state.
std::string state_layout_id(const state_layout& layout);

// The canonical description of every byte-changing choice, and its digest. For a checkpoint
// (dims.family != seeded) the digest of its tensors and config (dims.checkpoint_digest) stands in
// place of preset, size and seed, so two checkpoints never share a page or an object.
struct namespace_inputs {
  model_preset preset = model_preset::dense;
  model_size size = model_size::tiny;
  uint64_t seed = 0;
  kv_dtype kv = kv_dtype::fp32;
  int32_t block_size = 16;
  int32_t chunk_size = 256;
  int32_t tensor_parallel = 1;
  bool image_input = false;
  int32_t draft_rows = 0;
  // Empty for exact matmuls (bitwise equal on every device); otherwise the mode and the device
  // whose matrix units produced the bytes, e.g. "tf32@NVIDIA H200": such pages are never shared
  // with exact ones or another kind of GPU.
  std::string matmul_numerics;
};
std::string canonical_namespace(const namespace_inputs& in, const model_dims& dims, const std::string& layout_id);
uint64_t namespace_digest(const namespace_inputs& in, const model_dims& dims, const std::string& layout_id);

// One page field as the contract expects it.
struct region_spec {
  int32_t layer = 0;
  std::string name;
  elem_dtype dtype = elem_dtype::fp32;
  size_t row_bytes = 0;
  int32_t rows_per_block = 0;
  size_t offset_in_unit = 0; // bytes before this field within a page unit
};

// The fields an arena of this geometry must publish, in page-unit order, from the dimensions
// alone: per attention layer k, v (+ k_scale, v_scale for fp8), then index_raw and
// index_compressed for sparse layers.
std::vector<region_spec> region_layout(const model_dims& dims, kv_dtype kv, int32_t block_size);

// "" when `published` matches `expected` field for field (name, layer, dtype, row bytes, rows per
// block, offset in the unit, and a region large enough for `num_blocks`); else the first mismatch.
std::string check_regions(const std::vector<region_spec>& expected, const std::vector<kv_field>& published);

} // namespace ordo
