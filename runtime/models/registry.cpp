// The family registry and the loader that applies a family's tensor table (runtime/models/hf_model.hpp).
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <optional>
#include <set>
#include <utility>

#include <nlohmann/json.hpp>
#include <xxhash.h>

#include "runtime/models/config_reader.hpp"
#include "runtime/models/hf_model.hpp"
#include "runtime/models/qwen3_5.hpp"
#include "runtime/safetensors.hpp"

namespace ordo {

namespace {

using json = nlohmann::json;

constexpr uint64_t max_config_bytes = 16u << 20;

std::string shape_text(const std::vector<int64_t>& shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + "]";
}

json read_config_json(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw model_load_error(path + ": cannot be opened (a Hugging Face directory has a config.json)");
  in.seekg(0, std::ios::end);
  const auto size = static_cast<uint64_t>(in.tellg());
  if (size > max_config_bytes)
    throw model_load_error(path + ": is " + std::to_string(size) + " bytes, more than " + std::to_string(max_config_bytes));
  in.seekg(0);
  std::string text(size, '\0');
  in.read(text.data(), static_cast<std::streamsize>(size));
  try {
    return json::parse(text);
  } catch (const json::exception& e) {
    throw model_load_error(path + ": is not valid JSON (" + e.what() + ")");
  }
}

const hf_family& family_of(const json& config, const std::string& path) {
  std::string architecture, model_type;
  if (config.is_object() && config.contains("architectures") && config["architectures"].is_array() &&
      !config["architectures"].empty() && config["architectures"][0].is_string())
    architecture = config["architectures"][0].get<std::string>();
  if (config.is_object() && config.contains("model_type") && config["model_type"].is_string())
    model_type = config["model_type"].get<std::string>();
  for (const hf_family* f : hf_families()) {
    const auto& a = f->architectures;
    const auto& m = f->model_types;
    if (!architecture.empty() ? std::find(a.begin(), a.end(), architecture) != a.end()
                              : std::find(m.begin(), m.end(), model_type) != m.end())
      return *f;
  }
  std::string known;
  for (const hf_family* f : hf_families())
    for (const auto& a : f->architectures) known += (known.empty() ? "" : ", ") + a;
  throw model_load_error(path + ": architecture \"" + architecture + "\" (model_type \"" + model_type +
                         "\") is not a family ordo loads (known: " + known + ")");
}

// Applies `rule` to the tensor's fp32 values, filling its slots.
void apply(const hf_tensor_rule& rule, const hf_dims& d, std::vector<float> v, std::map<std::string, host_tensor>& slots) {
  const auto out = [&](size_t i) -> host_tensor& {
    host_tensor& t = slots[rule.slots[i].name];
    t.shape = rule.slots[i].shape;
    int64_t n = 1;
    for (int64_t x : t.shape) n *= x;
    t.data.assign(static_cast<size_t>(n), 0.0f);
    return t;
  };
  const int64_t cols = rule.hf_shape.size() == 2 ? rule.hf_shape[1] : 1;
  // Copies `rows` rows from v at row `from` to t at row `to`.
  const auto rows = [&](host_tensor& t, int64_t to, int64_t from, int64_t count) {
    std::copy(v.begin() + from * cols, v.begin() + (from + count) * cols, t.data.begin() + to * cols);
  };
  switch (rule.transform) {
  case hf_transform::copy:
    out(0).data = std::move(v);
    return;
  case hf_transform::duplicate:
    for (size_t i = 0; i < rule.slots.size(); ++i) out(i).data = v;
    return;
  case hf_transform::one_plus: {
    host_tensor& t = out(0);
    for (size_t i = 0; i < v.size(); ++i) t.data[i] = 1.0f + v[i];
    return;
  }
  case hf_transform::neg_exp: {
    host_tensor& t = out(0);
    for (size_t i = 0; i < v.size(); ++i) t.data[i] = -std::exp(v[i]);
    return;
  }
  case hf_transform::split_q_gate: {
    host_tensor& q = out(0);
    host_tensor& gate = out(1);
    const int64_t hd = d.head_dim;
    for (int64_t h = 0; h < d.num_heads; ++h) {
      rows(q, h * hd, h * 2 * hd, hd);
      rows(gate, h * hd, h * 2 * hd + hd, hd);
    }
    return;
  }
  case hf_transform::deinterleave_qkvz: {
    host_tensor& qkv = out(0);
    host_tensor& z = out(1);
    const int64_t nk = d.gdn_key_heads, dk = d.gdn_key_dim, dv = d.gdn_value_dim;
    const int64_t r = d.gdn_value_heads / nk;
    const int64_t group = 2 * dk + 2 * r * dv; // rows per key head: q(dk) k(dk) v(r dv) z(r dv)
    for (int64_t g = 0; g < nk; ++g) {
      const int64_t at = g * group;
      rows(qkv, g * dk, at, dk);                                  // q
      rows(qkv, nk * dk + g * dk, at + dk, dk);                   // k
      rows(qkv, 2 * nk * dk + g * r * dv, at + 2 * dk, r * dv);   // v
      rows(z, g * r * dv, at + 2 * dk + r * dv, r * dv);          // z
    }
    return;
  }
  case hf_transform::deinterleave_ba: {
    host_tensor& b = out(0);
    host_tensor& a = out(1);
    const int64_t r = d.gdn_value_heads / d.gdn_key_heads;
    for (int64_t g = 0; g < d.gdn_key_heads; ++g) {
      rows(b, g * r, g * 2 * r, r);
      rows(a, g * r, g * 2 * r + r, r);
    }
    return;
  }
  }
}

} // namespace

const char* to_string(hf_transform t) {
  switch (t) {
  case hf_transform::copy: return "copy";
  case hf_transform::one_plus: return "1+w";
  case hf_transform::neg_exp: return "-exp";
  case hf_transform::split_q_gate: return "split q|gate";
  case hf_transform::deinterleave_qkvz: return "de-interleave qkvz";
  case hf_transform::deinterleave_ba: return "de-interleave ba";
  case hf_transform::duplicate: return "duplicate";
  }
  return "?";
}

std::string describe(const hf_dims& d) {
  std::string kinds;
  for (auto k : d.layer_kinds) kinds += k == hf_layer_kind::full_attention ? 'F' : 'L';
  std::string eos;
  for (auto id : d.eos_token_ids) eos += (eos.empty() ? "" : ",") + std::to_string(id);
  char theta[32];
  std::snprintf(theta, sizeof theta, "%.17g", d.rope_theta);
  char eps[32];
  std::snprintf(eps, sizeof eps, "%.9g", static_cast<double>(d.rms_norm_eps));
  return "architecture=" + d.architecture + " model_type=" + d.model_type + " prefix=" + d.tensor_prefix +
         " gdn_packing=" + (d.gdn_packing == hf_gdn_packing::split ? "split" : "interleaved") +
         " vocab=" + std::to_string(d.vocab_size) + " hidden=" + std::to_string(d.hidden_size) +
         " intermediate=" + std::to_string(d.intermediate_size) + " layers=" + kinds +
         " heads=" + std::to_string(d.num_heads) + " kv_heads=" + std::to_string(d.num_kv_heads) +
         " head_dim=" + std::to_string(d.head_dim) + " rotary_dim=" + std::to_string(d.rotary_dim) + " rope_theta=" + theta +
         " gdn_key_heads=" + std::to_string(d.gdn_key_heads) + " gdn_value_heads=" + std::to_string(d.gdn_value_heads) +
         " gdn_key_dim=" + std::to_string(d.gdn_key_dim) + " gdn_value_dim=" + std::to_string(d.gdn_value_dim) +
         " gdn_conv_kernel=" + std::to_string(d.gdn_conv_kernel) + " rms_norm_eps=" + eps +
         " max_position_embeddings=" + std::to_string(d.max_position_embeddings) +
         " tied=" + (d.tie_word_embeddings ? "true" : "false") + " eos=" + eos + " bos=" + std::to_string(d.bos_token_id);
}

const std::vector<const hf_family*>& hf_families() {
  static const std::vector<const hf_family*> families = {&qwen3_5_family()};
  return families;
}

hf_checkpoint read_hf_config(const std::string& dir) {
  const std::string path = dir + "/config.json";
  const json config = read_config_json(path);
  hf_checkpoint ck;
  ck.family = &family_of(config, path);
  ck.dims = ck.family->parse_config(config, path);
  const std::string generation = dir + "/generation_config.json";
  if (std::ifstream(generation).good()) {
    const json g = read_config_json(generation);
    if (!g.is_object()) throw model_load_error(generation + ": is not a JSON object");
    const auto eos = hf_config_reader(g, generation).ids("eos_token_id", ck.dims.vocab_size);
    if (!eos.empty()) ck.dims.eos_token_ids = eos;
  }
  return ck;
}

namespace {

// A checkpoint checked against its family's table, nothing converted yet.
struct checked_checkpoint {
  hf_checkpoint ck;
  std::optional<safetensors_checkpoint> st;
  std::vector<hf_tensor_rule> rules;
  std::set<std::string> named;
};

checked_checkpoint check(const std::string& dir) {
  checked_checkpoint c;
  c.ck = read_hf_config(dir);
  hf_checkpoint& ck = c.ck;
  const hf_family& family = *ck.family;
  try {
    c.st.emplace(safetensors_checkpoint::open(dir));
  } catch (const safetensors_error& e) {
    throw model_load_error(e.what());
  }
  const auto& st = c.st;
  c.rules = family.tensor_table(ck.dims);
  const auto& rules = c.rules;
  const auto skip = family.skip_prefixes(ck.dims);
  auto& named = c.named;
  for (const auto& rule : rules) {
    const auto* e = st->find(rule.hf_name);
    if (!e)
      throw model_load_error(dir + ": tensor " + rule.hf_name + ": missing (the " + family.name + " table needs it, shape " +
                             shape_text(rule.hf_shape) + ")");
    if (e->tensor->shape != rule.hf_shape)
      throw model_load_error(e->file->path() + ": tensor " + rule.hf_name + ": shape " + shape_text(e->tensor->shape) +
                             ", but config.json gives " + shape_text(rule.hf_shape));
    if (e->tensor->dtype != st_dtype::F32 && e->tensor->dtype != st_dtype::BF16 && e->tensor->dtype != st_dtype::F16)
      throw model_load_error(e->file->path() + ": tensor " + rule.hf_name + ": dtype " + to_string(e->tensor->dtype) +
                             " (allowed: F32, BF16, F16)");
    if (!named.insert(rule.hf_name).second)
      throw std::logic_error(std::string(family.name) + " table names " + rule.hf_name + " twice");
  }
  for (const auto& [name, e] : st->tensors()) {
    if (named.count(name)) continue;
    const bool skipped = std::any_of(skip.begin(), skip.end(), [&](const std::string& p) { return name.rfind(p, 0) == 0; });
    if (!skipped)
      throw model_load_error(e.file->path() + ": tensor " + name + ": unknown to the " + family.name +
                             " table for " + ck.dims.architecture + " (neither loaded nor skipped)");
    ck.skipped.push_back(name);
  }
  return c;
}

} // namespace

hf_checkpoint check_hf_checkpoint(const std::string& dir) { return check(dir).ck; }

hf_checkpoint load_hf_checkpoint(const std::string& dir) {
  checked_checkpoint c = check(dir); // every check first: a refusal costs no conversion
  hf_checkpoint& ck = c.ck;
  const hf_family& family = *ck.family;
  const auto& st = c.st;
  const auto& named = c.named;
  for (const auto& rule : c.rules) {
    const auto* e = st->find(rule.hf_name);
    apply(rule, ck.dims, e->file->to_f32(*e->tensor), ck.slots);
  }

  XXH64_state_t* h = XXH64_createState();
  XXH64_reset(h, 0);
  const auto text = [&](const std::string& s) {
    const uint64_t n = s.size();
    XXH64_update(h, &n, sizeof n);
    XXH64_update(h, s.data(), s.size());
  };
  text(family.name);
  text(describe(ck.dims));
  for (const auto& [name, e] : st->tensors()) { // name order, whatever the shards
    if (!named.count(name)) continue;
    text(name);
    text(to_string(e.tensor->dtype));
    for (int64_t d : e.tensor->shape) XXH64_update(h, &d, sizeof d);
    XXH64_update(h, e.file->bytes(*e.tensor), e.tensor->end - e.tensor->begin);
  }
  ck.digest = XXH64_digest(h);
  XXH64_freeState(h);
  return std::move(ck);
}

} // namespace ordo
