#include "runtime/layouts.hpp"

#include <cstdio>

#include "kernels/kernel_args.hpp"
#include "runtime/prefix_hash.hpp"

namespace ordo {

std::string state_layout_id(const state_layout& layout) {
  if (layout.segments.empty())
    return "none";
  std::string id = "state-v" + std::to_string(layout_version);
  for (const auto& s : layout.segments)
    id += ";" + s.name + "[" + (s.layer < 0 ? std::string("*") : std::to_string(s.layer)) + "]:" +
          to_string(s.dtype) + ":" + std::to_string(s.bytes) + "@" + std::to_string(s.offset);
  return id;
}

std::string canonical_namespace(const namespace_inputs& in, const model_dims& d, const std::string& layout_id) {
  std::string layers;
  for (auto k : d.layers)
    layers += k == layer_kind::gdn ? 'G' : k == layer_kind::sparse_attention ? 'S' : 'A';
  // A checkpoint's digest (its tensors' names, shapes, dtypes and bytes, and its config's dims)
  // stands where a preset's name, size and seed do; the family's extra dims follow the preset's.
  char digest[17];
  std::snprintf(digest, sizeof digest, "%016llx", static_cast<unsigned long long>(d.checkpoint_digest));
  const std::string weights =
      d.family == model_family::seeded
          ? "|preset=" + std::string(to_string(in.preset)) + "|size=" + to_string(in.size) +
                "|seed=" + std::to_string(in.seed)
          : "|family=" + std::string(to_string(d.family)) + "|checkpoint=" + digest;
  const std::string family_dims =
      d.family == model_family::seeded
          ? std::string()
          : "|gdn_key_heads=" + std::to_string(d.gdn_k_heads()) + "|rotary=" + std::to_string(d.rotary_dim) +
                "|vocab=" + std::to_string(d.vocab);
  return "ordo-ns-v" + std::to_string(layout_version) + weights + "|kv=" + to_string(in.kv) +
         "|block=" + std::to_string(in.block_size) + "|chunk=" + std::to_string(in.chunk_size) +
         "|tp=" + std::to_string(in.tensor_parallel) + "|image_input=" + (in.image_input ? "1" : "0") +
         "|draft_rows=" + std::to_string(in.draft_rows) + "|layers=" + layers +
         "|d_model=" + std::to_string(d.d_model) + "|mlp=" + std::to_string(d.mlp_dim) +
         "|heads=" + std::to_string(d.num_q_heads) + "/" + std::to_string(d.num_kv_heads) + "x" +
         std::to_string(d.head_dim) + "|attn_split=" + std::to_string(attention_chunk) + "|index=" + std::to_string(d.index_dim) + "/" + std::to_string(d.index_group) +
         "/" + std::to_string(d.sparse_window) + "/" + std::to_string(d.sparse_top_k) +
         "|gdn=" + std::to_string(d.gdn_heads) + "x" + std::to_string(d.gdn_dk) + "x" + std::to_string(d.gdn_dv) +
         "/" + std::to_string(d.conv_width) + "|ple=" + (d.ple ? std::to_string(d.ple_dim) + "/" +
                                                                      std::to_string(d.ple_buckets) + "/" +
                                                                      std::to_string(d.ple_n)
                                                                : std::string("0")) +
         family_dims + "|state=" + layout_id + (in.matmul_numerics.empty() ? "" : "|matmul=" + in.matmul_numerics);
}

uint64_t namespace_digest(const namespace_inputs& in, const model_dims& dims, const std::string& layout_id) {
  return digest_of(canonical_namespace(in, dims, layout_id));
}

std::vector<region_spec> region_layout(const model_dims& d, kv_dtype kv, int32_t block_size) {
  std::vector<region_spec> out;
  size_t offset = 0;
  auto add = [&](int32_t layer, const char* name, elem_dtype dt, size_t elems_per_row, int32_t rows) {
    region_spec r{layer, name, dt, elems_per_row * elem_bytes(dt), rows, offset};
    offset += r.row_bytes * static_cast<size_t>(rows);
    out.push_back(r);
  };
  elem_dtype kv_elem = kv == kv_dtype::fp32 ? elem_dtype::fp32 : kv == kv_dtype::bf16 ? elem_dtype::bf16
                                                                                      : elem_dtype::fp8_e4m3;
  for (size_t i = 0; i < d.layers.size(); ++i) {
    auto kind = d.layers[i];
    if (kind == layer_kind::gdn)
      continue;
    auto l = static_cast<int32_t>(i);
    auto kv_elems = static_cast<size_t>(d.num_kv_heads) * static_cast<size_t>(d.head_dim);
    add(l, "k", kv_elem, kv_elems, block_size);
    add(l, "v", kv_elem, kv_elems, block_size);
    if (kv == kv_dtype::fp8) {
      add(l, "k_scale", elem_dtype::fp32, static_cast<size_t>(d.num_kv_heads), block_size);
      add(l, "v_scale", elem_dtype::fp32, static_cast<size_t>(d.num_kv_heads), block_size);
    }
    if (kind == layer_kind::sparse_attention) {
      add(l, "index_raw", elem_dtype::fp32, static_cast<size_t>(d.index_dim), block_size);
      add(l, "index_compressed", elem_dtype::fp32, static_cast<size_t>(d.index_dim), block_size / d.index_group);
    }
  }
  return out;
}

std::string check_regions(const std::vector<region_spec>& expected, const std::vector<kv_field>& published) {
  size_t offset = 0;
  for (size_t i = 0; i < std::max(expected.size(), published.size()); ++i) {
    if (i >= published.size())
      return "field " + expected[i].name + " of layer " + std::to_string(expected[i].layer) + " is not published";
    const auto& p = published[i];
    std::string where = "published field " + std::to_string(i) + " (" + p.name + " of layer " +
                        std::to_string(p.layer) + ")";
    if (i >= expected.size())
      return where + " is not in the region layout";
    const auto& e = expected[i];
    if (p.name != e.name || p.layer != e.layer)
      return where + " where the layout has " + e.name + " of layer " + std::to_string(e.layer);
    if (p.dtype != e.dtype)
      return where + " has dtype " + to_string(p.dtype) + ", the layout " + to_string(e.dtype);
    if (p.row_bytes != e.row_bytes || p.rows_per_block != e.rows_per_block)
      return where + " has " + std::to_string(p.rows_per_block) + " rows of " + std::to_string(p.row_bytes) +
             " bytes per block, the layout " + std::to_string(e.rows_per_block) + " of " +
             std::to_string(e.row_bytes);
    if (offset != e.offset_in_unit)
      return where + " starts at byte " + std::to_string(offset) + " of a unit, the layout at " +
             std::to_string(e.offset_in_unit);
    if (p.region == nullptr)
      return where + " has no region";
    offset += p.block_bytes();
  }
  return {};
}

} // namespace ordo
