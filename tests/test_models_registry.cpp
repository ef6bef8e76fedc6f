#include <catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "tests/scratch_dir.hpp"
#include "runtime/models/hf_model.hpp"
#include "runtime/safetensors.hpp"

using namespace ordo;
using json = nlohmann::json;
using Catch::Matchers::Contains;
namespace fs = std::filesystem;

namespace {


const std::string fixtures = "tests/data/hf/";

// A scratch copy of a fixture directory.
std::string copy_fixture(const std::string& name) {
  const std::string d = test::scratch_dir("ordo_hf");
  const std::string dir = std::string(d) + "/" + name;
  fs::copy(fixtures + name, dir, fs::copy_options::recursive);
  return dir;
}

json read_json(const std::string& path) {
  std::ifstream in(path);
  return json::parse(in);
}

void edit_config(const std::string& dir, const std::function<void(json&)>& fn) {
  json cfg = read_json(dir + "/config.json");
  fn(cfg);
  std::ofstream(dir + "/config.json") << cfg.dump(2);
}

// Rewrites dir/model.safetensors through `fn`, which may drop, add or change tensors.
void edit_tensors(const std::string& dir, const std::function<void(std::vector<st_write_tensor>&)>& fn) {
  std::vector<st_write_tensor> out;
  {
    const auto f = safetensors_file::open(dir + "/model.safetensors");
    for (const auto& t : f->tensors())
      out.push_back({t.name, t.dtype, t.shape, std::vector<uint8_t>(f->bytes(t), f->bytes(t) + (t.end - t.begin))});
  }
  fn(out);
  write_safetensors(dir + "/model.safetensors", out);
}

std::string load_refusal(const std::string& dir) {
  try {
    load_hf_checkpoint(dir);
  } catch (const model_load_error& e) {
    return e.what();
  }
  return "";
}

// The raw fp32 values of one checkpoint tensor.
std::vector<float> raw(const std::string& dir, const std::string& name) {
  const auto ck = safetensors_checkpoint::open(dir);
  const auto* e = ck.find(name);
  REQUIRE(e != nullptr);
  return e->file->to_f32(*e->tensor);
}

std::vector<float> row(const std::vector<float>& m, int64_t cols, int64_t r) {
  return std::vector<float>(m.begin() + r * cols, m.begin() + (r + 1) * cols);
}

} // namespace

TEST_CASE("the three fixtures load through the qwen3_5 family with the dims transformers used", "[models]") {
  for (const char* name : {"qwen3_5_text", "qwen3_5_vl_sharded", "qwen3_next_dense"}) {
    INFO(name);
    const std::string dir = fixtures + name;
    const json expected = read_json(dir + "/ordo_expected.json");
    const hf_checkpoint ck = load_hf_checkpoint(dir);
    CHECK(std::string(ck.family->name) == "qwen3_5");
    const hf_dims& d = ck.dims;
    CHECK(d.vocab_size == 384);
    CHECK(d.hidden_size == 64);
    CHECK(d.gdn_key_heads == 2);
    CHECK(d.gdn_value_heads == 4);
    CHECK(d.gdn_key_dim == 8);
    CHECK(d.gdn_value_dim == 12);
    CHECK(d.rotary_dim == d.head_dim / 4);
    CHECK(d.rope_theta == 50000.0);
    CHECK(d.eos_token_ids == std::vector<int32_t>{383});
    CHECK(d.bos_token_id == -1);
    std::vector<std::string> kinds;
    for (auto k : d.layer_kinds) kinds.push_back(k == hf_layer_kind::full_attention ? "full_attention" : "linear_attention");
    CHECK(kinds == expected["layer_types_as_loaded"].get<std::vector<std::string>>());
    int64_t gdn = 0, attn = 0;
    for (auto k : d.layer_kinds) (k == hf_layer_kind::full_attention ? attn : gdn) += 1;
    // embed, lm_head, final_norm; per layer ln1, ln2, 3 mlp; 9 per GDN layer, 7 per attention layer
    CHECK(ck.slots.size() == static_cast<size_t>(3 + 5 * d.num_layers + 9 * gdn + 7 * attn));
  }
  const hf_checkpoint vl = load_hf_checkpoint(fixtures + "qwen3_5_vl_sharded");
  CHECK(vl.dims.tensor_prefix == "model.language_model.");
  CHECK(vl.dims.head_dim == 256);
  CHECK(vl.dims.rotary_dim == 64);
  REQUIRE(!vl.skipped.empty());
  for (const auto& s : vl.skipped) CHECK_THAT(s, Catch::Matchers::StartsWith("model.visual."));
  CHECK(load_hf_checkpoint(fixtures + "qwen3_5_text").skipped.empty());
}

TEST_CASE("load-time transforms: 1 + w, -exp(A_log), q|gate split, as the raw tensors say", "[models]") {
  const std::string dir = fixtures + "qwen3_5_text";
  const hf_checkpoint ck = load_hf_checkpoint(dir);
  const auto ln = raw(dir, "model.layers.1.input_layernorm.weight");
  const auto& ln1 = ck.slots.at("layers.1.ln1").data;
  REQUIRE(ln1.size() == ln.size());
  for (size_t i = 0; i < ln.size(); ++i) CHECK(ln1[i] == 1.0f + ln[i]);
  const auto& norm = ck.slots.at("layers.0.gdn.norm").data; // the gated norm's w is plain
  CHECK(norm == raw(dir, "model.layers.0.linear_attn.norm.weight"));
  const auto a_log = raw(dir, "model.layers.2.linear_attn.A_log");
  const auto& neg = ck.slots.at("layers.2.gdn.neg_exp_a").data;
  for (size_t i = 0; i < a_log.size(); ++i) CHECK(neg[i] == -std::exp(a_log[i]));
  // q_proj [4 heads x (32 q + 32 gate), 64]: head 2's q is raw row 128, its gate raw row 160.
  const auto q_proj = raw(dir, "model.layers.3.self_attn.q_proj.weight");
  CHECK(row(ck.slots.at("layers.3.attn.w_q").data, 64, 64) == row(q_proj, 64, 128));
  CHECK(row(ck.slots.at("layers.3.attn.w_gate").data, 64, 64 + 31) == row(q_proj, 64, 160 + 31));
  CHECK(ck.slots.at("layers.0.gdn.conv").shape == std::vector<int64_t>{80, 4});
  CHECK(ck.slots.at("lm_head").data == raw(dir, "lm_head.weight"));
}

TEST_CASE("qwen3_next: in_proj_qkvz and in_proj_ba are de-interleaved per key head", "[models]") {
  // nk 2, r = nv / nk = 2, dk 8, dv 12: a key head's 64 rows are q 0..7, k 8..15, v 16..39, z 40..63.
  const std::string dir = fixtures + "qwen3_next_dense";
  const hf_checkpoint ck = load_hf_checkpoint(dir);
  const auto qkvz = raw(dir, "model.layers.0.linear_attn.in_proj_qkvz.weight");
  const auto ba = raw(dir, "model.layers.0.linear_attn.in_proj_ba.weight");
  const auto& qkv = ck.slots.at("layers.0.gdn.w_qkv").data;
  const auto& z = ck.slots.at("layers.0.gdn.w_z").data;
  CHECK(row(qkv, 64, 8) == row(qkvz, 64, 64));            // q of key head 1
  CHECK(row(qkv, 64, 16) == row(qkvz, 64, 8));            // k of key head 0
  CHECK(row(qkv, 64, 16 + 8) == row(qkvz, 64, 64 + 8));   // k of key head 1
  CHECK(row(qkv, 64, 32 + 12) == row(qkvz, 64, 16 + 12)); // v of value head 1 (key head 0)
  CHECK(row(qkv, 64, 32 + 36) == row(qkvz, 64, 64 + 28)); // v of value head 3, row 0 (key head 1)
  CHECK(row(z, 64, 24) == row(qkvz, 64, 64 + 40));        // z of value head 2 (key head 1)
  CHECK(row(z, 64, 47) == row(qkvz, 64, 127));            // z's last row
  CHECK(row(ck.slots.at("layers.0.gdn.w_b").data, 64, 3) == row(ba, 64, 5)); // b of value head 3
  CHECK(row(ck.slots.at("layers.0.gdn.w_a").data, 64, 2) == row(ba, 64, 6)); // a of value head 2
  CHECK(row(ck.slots.at("layers.0.gdn.w_a").data, 64, 0) == row(ba, 64, 2)); // a of value head 0
}

TEST_CASE("a malformed checkpoint is refused naming the file and the fault", "[models]") {
  const std::string dir = copy_fixture("qwen3_5_text");
  const std::string st = dir + "/model.safetensors";
  REQUIRE(load_refusal(dir).empty());

  SECTION("unknown architecture") {
    edit_config(dir, [](json& c) {
      c["architectures"] = {"LlamaForCausalLM"};
      c["model_type"] = "llama";
    });
    CHECK_THAT(load_refusal(dir), Contains(dir + "/config.json: architecture \"LlamaForCausalLM\" (model_type \"llama\") "
                                                 "is not a family ordo loads (known: Qwen3_5ForConditionalGeneration"));
  }
  SECTION("no config.json") {
    fs::remove(dir + "/config.json");
    CHECK_THAT(load_refusal(dir), Contains(dir + "/config.json: cannot be opened"));
  }
  SECTION("bad config values") {
    edit_config(dir, [](json& c) { c["linear_num_value_heads"] = 3; });
    CHECK_THAT(load_refusal(dir), Contains("config.json: linear_num_value_heads: bad value 3 (allowed: a multiple of linear_num_key_heads = 2)"));
    edit_config(dir, [](json& c) { c["linear_num_value_heads"] = 4; c["layer_types"][1] = "sliding_attention"; });
    CHECK_THAT(load_refusal(dir), Contains("config.json: layer_types: bad value \"sliding_attention\""));
    edit_config(dir, [](json& c) { c["layer_types"][1] = "linear_attention"; c["partial_rotary_factor"] = 0.5; });
    CHECK_THAT(load_refusal(dir), Contains("config.json: partial_rotary_factor: bad value 0.5 (allowed: the value rope_parameters.partial_rotary_factor gives, 0.25)"));
    edit_config(dir, [](json& c) { c["partial_rotary_factor"] = 0.25; c["hidden_size"] = -64; });
    CHECK_THAT(load_refusal(dir), Contains("config.json: hidden_size: bad value -64 (allowed: an integer in [1, 1048576])"));
    edit_config(dir, [](json& c) { c["hidden_size"] = 64; c["num_experts"] = 8; });
    CHECK_THAT(load_refusal(dir), Contains("config.json: num_experts: bad value 8"));
    edit_config(dir, [](json& c) { c.erase("num_experts"); c["rope_parameters"]["rope_type"] = "yarn"; });
    CHECK_THAT(load_refusal(dir), Contains("config.json: rope_parameters.rope_type: bad value \"yarn\""));
  }
  SECTION("a missing tensor") {
    edit_tensors(dir, [](auto& ts) {
      ts.erase(std::find_if(ts.begin(), ts.end(), [](auto& t) { return t.name == "model.layers.2.linear_attn.A_log"; }));
    });
    CHECK_THAT(load_refusal(dir), Contains(dir + ": tensor model.layers.2.linear_attn.A_log: missing (the qwen3_5 table needs it, shape [4])"));
  }
  SECTION("an unknown tensor") {
    edit_tensors(dir, [](auto& ts) { ts.push_back({"model.layers.0.linear_attn.extra", st_dtype::F32, {1}, {0, 0, 0, 0}}); });
    CHECK_THAT(load_refusal(dir), Contains(st + ": tensor model.layers.0.linear_attn.extra: unknown to the qwen3_5 table for "
                                                "Qwen3_5ForCausalLM (neither loaded nor skipped)"));
  }
  SECTION("a tensor of the wrong shape") {
    edit_tensors(dir, [](auto& ts) {
      for (auto& t : ts)
        if (t.name == "model.layers.1.linear_attn.conv1d.weight") t.shape = {80, 4};
    });
    CHECK_THAT(load_refusal(dir), Contains(st + ": tensor model.layers.1.linear_attn.conv1d.weight: shape [80, 4], but config.json gives [80, 1, 4]"));
  }
  SECTION("a config that disagrees with the tensors") {
    edit_config(dir, [](json& c) { c["intermediate_size"] = 128; });
    CHECK_THAT(load_refusal(dir), Contains("tensor model.layers.0.mlp.gate_proj.weight: shape [96, 64], but config.json gives [128, 64]"));
  }
  SECTION("a truncated safetensors file") {
    fs::resize_file(st, fs::file_size(st) - 100);
    CHECK_THAT(load_refusal(dir), Contains(st + ": tensor") && Contains("(truncated?)"));
  }
  SECTION("an MTP head is skipped, never read") {
    edit_tensors(dir, [](auto& ts) { ts.push_back({"mtp.fc.weight", st_dtype::I32, {1}, {0, 0, 0, 0}}); });
    const hf_checkpoint ck = load_hf_checkpoint(dir);
    CHECK(ck.skipped == std::vector<std::string>{"mtp.fc.weight"});
  }
  SECTION("tied embeddings: no lm_head tensor, the embedding fills both slots") {
    edit_config(dir, [](json& c) { c["tie_word_embeddings"] = true; });
    edit_tensors(dir, [](auto& ts) {
      ts.erase(std::find_if(ts.begin(), ts.end(), [](auto& t) { return t.name == "lm_head.weight"; }));
    });
    const hf_checkpoint ck = load_hf_checkpoint(dir);
    CHECK(ck.slots.at("lm_head").data == ck.slots.at("embed").data);
  }
}

TEST_CASE("qwen3_5 nested config: errors name text_config's keys; the vision tower is skipped", "[models]") {
  const std::string dir = copy_fixture("qwen3_5_vl_sharded");
  edit_config(dir, [](json& c) { c["text_config"]["head_dim"] = 0; });
  CHECK_THAT(load_refusal(dir), Contains("config.json: text_config.head_dim: bad value 0"));
  edit_config(dir, [](json& c) { c["text_config"]["head_dim"] = 256; c.erase("text_config"); });
  CHECK_THAT(load_refusal(dir), Contains("config.json: text_config: missing"));
}

TEST_CASE("the checkpoint digest: names, dtypes, shapes, bytes and dims; not the sharding", "[models]") {
  const uint64_t text = load_hf_checkpoint(fixtures + "qwen3_5_text").digest;
  const uint64_t vl = load_hf_checkpoint(fixtures + "qwen3_5_vl_sharded").digest;
  const uint64_t next = load_hf_checkpoint(fixtures + "qwen3_next_dense").digest;
  CHECK(text != 0);
  CHECK(text != vl);
  CHECK(text != next);
  CHECK(vl != next);
  CHECK(load_hf_checkpoint(fixtures + "qwen3_5_text").digest == text);

  SECTION("the same tensors in one file instead of five shards") {
    const std::string dir = copy_fixture("qwen3_5_vl_sharded");
    std::vector<st_write_tensor> all;
    {
      const auto ck = safetensors_checkpoint::open(dir);
      for (const auto& [name, e] : ck.tensors())
        all.push_back({name, e.tensor->dtype, e.tensor->shape,
                       std::vector<uint8_t>(e.file->bytes(*e.tensor), e.file->bytes(*e.tensor) + (e.tensor->end - e.tensor->begin))});
    }
    for (const auto& f : fs::directory_iterator(dir))
      if (f.path().string().find("safetensors") != std::string::npos) fs::remove(f.path());
    std::reverse(all.begin(), all.end()); // another order in the file, too
    write_safetensors(dir + "/model.safetensors", all);
    CHECK(load_hf_checkpoint(dir).digest == vl);
  }
  SECTION("one bit of one tensor") {
    const std::string dir = copy_fixture("qwen3_5_text");
    edit_tensors(dir, [](auto& ts) { ts[5].bytes[3] ^= 1; });
    CHECK(load_hf_checkpoint(dir).digest != text);
  }
  SECTION("a dim the forward reads, with the tensors unchanged") {
    const std::string dir = copy_fixture("qwen3_5_text");
    edit_config(dir, [](json& c) { c["rope_parameters"]["rope_theta"] = 10000.0; });
    CHECK(load_hf_checkpoint(dir).digest != text);
  }
  SECTION("a skipped tensor does not count") {
    const std::string dir = copy_fixture("qwen3_5_text");
    edit_tensors(dir, [](auto& ts) { ts.push_back({"mtp.fc.weight", st_dtype::F32, {1}, {0, 0, 0, 0}}); });
    CHECK(load_hf_checkpoint(dir).digest == text);
  }
}
