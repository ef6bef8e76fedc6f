#include "runtime/models/qwen3_5.hpp"

#include <cmath>

#include <nlohmann/json.hpp>

#include "runtime/models/config_reader.hpp"

namespace ordo {

namespace {

using json = nlohmann::json;

constexpr int64_t max_dim = int64_t{1} << 20;
constexpr int64_t max_vocab = int64_t{1} << 24;

enum class variant { nested, text, next };

variant variant_of(const std::string& architecture, const std::string& model_type) {
  if (architecture == "Qwen3_5ForConditionalGeneration" || (architecture.empty() && model_type == "qwen3_5"))
    return variant::nested;
  if (architecture == "Qwen3NextForCausalLM" || (architecture.empty() && model_type == "qwen3_next")) return variant::next;
  return variant::text;
}

// partial_rotary_factor and rope_theta: in rope_parameters (transformers v5) or at the top level (before);
// when both say something they must agree.
double rope_value(const hf_config_reader& r, const std::string& key, double fallback, double hi) {
  const bool nested = r.has("rope_parameters") && r.at("rope_parameters").contains(key);
  const bool top = r.has(key);
  double value = fallback;
  if (nested) {
    const json& v = r.at("rope_parameters").at(key);
    if (!v.is_number() || !(v.get<double>() > 0.0) || !(v.get<double>() <= hi))
      r.bad_value("rope_parameters." + key, v, "a number in (0, " + json(hi).dump() + "]");
    value = v.get<double>();
  }
  if (top) {
    const double t = r.positive(key, fallback, hi);
    if (nested && t != value)
      r.bad_value(key, r.at(key), "the value rope_parameters." + key + " gives, " + json(value).dump());
    value = t;
  }
  return value;
}

hf_dims parse(const json& config, const std::string& path) {
  if (!config.is_object()) throw model_load_error(path + ": is not a JSON object");
  hf_dims d;
  const hf_config_reader top(config, path);
  d.model_type = top.string_or("model_type", "");
  if (top.has("architectures") && config["architectures"].is_array() && !config["architectures"].empty() &&
      config["architectures"][0].is_string())
    d.architecture = config["architectures"][0].get<std::string>();
  const variant v = variant_of(d.architecture, d.model_type);
  if (d.architecture.empty()) d.architecture = d.model_type;

  const json* text = &config;
  std::string where;
  if (v == variant::nested) {
    if (!top.has("text_config") || !config["text_config"].is_object())
      top.fail("text_config", "missing (a qwen3_5 config holds its text model there)");
    text = &config["text_config"];
    where = "text_config.";
    d.tensor_prefix = "model.language_model.";
  } else {
    d.tensor_prefix = "model.";
  }
  d.gdn_packing = v == variant::next ? hf_gdn_packing::interleaved : hf_gdn_packing::split;
  const hf_config_reader r(*text, path, where);

  d.vocab_size = r.integer("vocab_size", 1, max_vocab);
  d.hidden_size = r.integer("hidden_size", 1, max_dim);
  d.intermediate_size = r.integer("intermediate_size", 1, max_dim);
  d.num_layers = r.integer("num_hidden_layers", 1, 4096);
  d.num_heads = r.integer("num_attention_heads", 1, 4096);
  d.num_kv_heads = r.integer("num_key_value_heads", 1, 4096);
  if (d.num_heads % d.num_kv_heads != 0)
    r.bad_value("num_key_value_heads", d.num_kv_heads, "a divisor of num_attention_heads = " + std::to_string(d.num_heads));
  d.head_dim = r.integer_or("head_dim", 1, 65536, 256);
  d.gdn_key_heads = r.integer_or("linear_num_key_heads", 1, 4096, 16);
  d.gdn_value_heads = r.integer_or("linear_num_value_heads", 1, 4096, 32);
  if (d.gdn_value_heads % d.gdn_key_heads != 0)
    r.bad_value("linear_num_value_heads", d.gdn_value_heads,
                "a multiple of linear_num_key_heads = " + std::to_string(d.gdn_key_heads));
  d.gdn_key_dim = r.integer_or("linear_key_head_dim", 1, 65536, 128);
  d.gdn_value_dim = r.integer_or("linear_value_head_dim", 1, 65536, 128);
  d.gdn_conv_kernel = r.integer_or("linear_conv_kernel_dim", 1, 64, 4);
  d.rms_norm_eps = static_cast<float>(r.positive("rms_norm_eps", 1e-6, 1.0));
  d.max_position_embeddings = r.integer_or("max_position_embeddings", 1, int64_t{1} << 24, 32768);

  if (r.has("layer_types")) {
    const json& lt = r.at("layer_types");
    if (!lt.is_array() || lt.size() != static_cast<size_t>(d.num_layers))
      r.bad_value("layer_types", lt, "a list of num_hidden_layers = " + std::to_string(d.num_layers) + " layer types");
    for (const auto& t : lt) {
      if (t == "linear_attention") {
        d.layer_kinds.push_back(hf_layer_kind::linear_attention);
      } else if (t == "full_attention") {
        d.layer_kinds.push_back(hf_layer_kind::full_attention);
      } else {
        r.bad_value("layer_types", t, "\"linear_attention\" or \"full_attention\"");
      }
    }
  } else { // as transformers derives it: layer i is full iff (i + 1) % interval == 0
    const int32_t interval = r.integer_or("full_attention_interval", 1, 4096, 4);
    for (int32_t i = 0; i < d.num_layers; ++i)
      d.layer_kinds.push_back((i + 1) % interval ? hf_layer_kind::linear_attention : hf_layer_kind::full_attention);
  }

  if (r.has("rope_parameters")) {
    const json& rp = r.at("rope_parameters");
    if (!rp.is_object()) r.bad_value("rope_parameters", rp, "an object");
    const std::string type = rp.value("rope_type", std::string("default"));
    if (type != "default") r.bad_value("rope_parameters.rope_type", rp["rope_type"], "\"default\"");
  }
  if (r.has("rope_scaling")) r.bad_value("rope_scaling", r.at("rope_scaling"), "null (no rope scaling is supported)");
  d.rope_theta = rope_value(r, "rope_theta", 10000.0, 1e300);
  const double partial = rope_value(r, "partial_rotary_factor", 0.25, 1.0);
  d.rotary_dim = static_cast<int32_t>(d.head_dim * partial); // int() as transformers takes it
  if (d.rotary_dim < 2 || d.rotary_dim % 2 != 0)
    r.fail("partial_rotary_factor", "gives " + std::to_string(d.rotary_dim) + " rotary dims of head_dim " +
                                        std::to_string(d.head_dim) + " (allowed: an even number >= 2)");

  const std::string act = r.string_or("hidden_act", "silu");
  if (act != "silu") r.bad_value("hidden_act", r.at("hidden_act"), "\"silu\"");
  if (r.boolean("attention_bias", false)) r.bad_value("attention_bias", true, "false");
  if (!r.boolean("attn_output_gate", true)) r.bad_value("attn_output_gate", false, "true");
  if (r.has("num_experts") && r.integer("num_experts", 0, 1 << 20) != 0)
    r.bad_value("num_experts", r.at("num_experts"), "0 (the dense MLP; MoE is not loaded yet)");

  d.tie_word_embeddings = r.boolean("tie_word_embeddings", false);
  if (v == variant::nested && top.has("tie_word_embeddings")) {
    const bool outer = top.boolean("tie_word_embeddings", false);
    if (r.has("tie_word_embeddings") && outer != d.tie_word_embeddings)
      top.bad_value("tie_word_embeddings", outer, "text_config.tie_word_embeddings's value");
    d.tie_word_embeddings = outer;
  }
  d.eos_token_ids = r.ids("eos_token_id", d.vocab_size);
  const auto bos = r.ids("bos_token_id", d.vocab_size);
  if (bos.size() > 1) r.bad_value("bos_token_id", r.at("bos_token_id"), "one token id or null");
  d.bos_token_id = bos.empty() ? -1 : bos[0];
  return d;
}

std::vector<hf_tensor_rule> table(const hf_dims& d) {
  const int64_t H = d.hidden_size, V = d.vocab_size, I = d.intermediate_size;
  const int64_t nv = d.gdn_value_heads, dv = d.gdn_value_dim;
  const int64_t conv = d.gdn_conv_dim(), K = d.gdn_conv_kernel;
  const int64_t nh = d.num_heads, nkv = d.num_kv_heads, hd = d.head_dim;
  const std::string& P = d.tensor_prefix;
  std::vector<hf_tensor_rule> t;
  const auto add = [&](std::string name, std::vector<int64_t> shape, hf_transform tr, std::vector<hf_slot> slots) {
    t.push_back(hf_tensor_rule{std::move(name), std::move(shape), tr, std::move(slots)});
  };
  if (d.tie_word_embeddings) {
    add(P + "embed_tokens.weight", {V, H}, hf_transform::duplicate, {{"embed", {V, H}}, {"lm_head", {V, H}}});
  } else {
    add(P + "embed_tokens.weight", {V, H}, hf_transform::copy, {{"embed", {V, H}}});
    add("lm_head.weight", {V, H}, hf_transform::copy, {{"lm_head", {V, H}}});
  }
  add(P + "norm.weight", {H}, hf_transform::one_plus, {{"final_norm", {H}}});
  for (int32_t i = 0; i < d.num_layers; ++i) {
    const std::string hf = P + "layers." + std::to_string(i) + ".";
    const std::string s = "layers." + std::to_string(i) + ".";
    add(hf + "input_layernorm.weight", {H}, hf_transform::one_plus, {{s + "ln1", {H}}});
    add(hf + "post_attention_layernorm.weight", {H}, hf_transform::one_plus, {{s + "ln2", {H}}});
    add(hf + "mlp.gate_proj.weight", {I, H}, hf_transform::copy, {{s + "mlp.w_gate", {I, H}}});
    add(hf + "mlp.up_proj.weight", {I, H}, hf_transform::copy, {{s + "mlp.w_up", {I, H}}});
    add(hf + "mlp.down_proj.weight", {H, I}, hf_transform::copy, {{s + "mlp.w_down", {H, I}}});
    if (d.layer_kinds[i] == hf_layer_kind::linear_attention) {
      const std::string la = hf + "linear_attn.";
      if (d.gdn_packing == hf_gdn_packing::split) {
        add(la + "in_proj_qkv.weight", {conv, H}, hf_transform::copy, {{s + "gdn.w_qkv", {conv, H}}});
        add(la + "in_proj_z.weight", {nv * dv, H}, hf_transform::copy, {{s + "gdn.w_z", {nv * dv, H}}});
        add(la + "in_proj_b.weight", {nv, H}, hf_transform::copy, {{s + "gdn.w_b", {nv, H}}});
        add(la + "in_proj_a.weight", {nv, H}, hf_transform::copy, {{s + "gdn.w_a", {nv, H}}});
      } else {
        add(la + "in_proj_qkvz.weight", {conv + nv * dv, H}, hf_transform::deinterleave_qkvz,
            {{s + "gdn.w_qkv", {conv, H}}, {s + "gdn.w_z", {nv * dv, H}}});
        add(la + "in_proj_ba.weight", {2 * nv, H}, hf_transform::deinterleave_ba,
            {{s + "gdn.w_b", {nv, H}}, {s + "gdn.w_a", {nv, H}}});
      }
      add(la + "conv1d.weight", {conv, 1, K}, hf_transform::copy, {{s + "gdn.conv", {conv, K}}});
      add(la + "A_log", {nv}, hf_transform::neg_exp, {{s + "gdn.neg_exp_a", {nv}}});
      add(la + "dt_bias", {nv}, hf_transform::copy, {{s + "gdn.dt_bias", {nv}}});
      add(la + "norm.weight", {dv}, hf_transform::copy, {{s + "gdn.norm", {dv}}});
      add(la + "out_proj.weight", {H, nv * dv}, hf_transform::copy, {{s + "gdn.w_out", {H, nv * dv}}});
    } else {
      const std::string at = hf + "self_attn.";
      add(at + "q_proj.weight", {nh * 2 * hd, H}, hf_transform::split_q_gate,
          {{s + "attn.w_q", {nh * hd, H}}, {s + "attn.w_gate", {nh * hd, H}}});
      add(at + "k_proj.weight", {nkv * hd, H}, hf_transform::copy, {{s + "attn.w_k", {nkv * hd, H}}});
      add(at + "v_proj.weight", {nkv * hd, H}, hf_transform::copy, {{s + "attn.w_v", {nkv * hd, H}}});
      add(at + "o_proj.weight", {H, nh * hd}, hf_transform::copy, {{s + "attn.w_o", {H, nh * hd}}});
      add(at + "q_norm.weight", {hd}, hf_transform::one_plus, {{s + "attn.q_norm", {hd}}});
      add(at + "k_norm.weight", {hd}, hf_transform::one_plus, {{s + "attn.k_norm", {hd}}});
    }
  }
  return t;
}

std::vector<std::string> skips(const hf_dims& d) {
  std::vector<std::string> s = {"mtp."}; // the multi-token-prediction head: not run
  if (d.tensor_prefix == "model.language_model.") s.push_back("model.visual."); // text only
  if (d.tie_word_embeddings) s.push_back("lm_head.weight"); // tied: transformers ties it to the embedding too
  return s;
}

} // namespace

const hf_family& qwen3_5_family() {
  static const hf_family family{
      "qwen3_5",
      {"Qwen3_5ForConditionalGeneration", "Qwen3_5ForCausalLM", "Qwen3NextForCausalLM"},
      {"qwen3_5", "qwen3_5_text", "qwen3_next"},
      parse,
      table,
      skips,
  };
  return family;
}

} // namespace ordo
