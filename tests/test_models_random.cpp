#include <catch.hpp>

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "tests/scratch_dir.hpp"
#include "runtime/models/hf_model.hpp"
#include "runtime/models/qwen3_5_reference.hpp"
#include "runtime/models/random_checkpoint.hpp"
#include "runtime/safetensors.hpp"

using namespace ordo;
using Catch::Matchers::Contains;

namespace {

std::string temp_dir() { return test::scratch_dir("ordo_rand"); }

} // namespace

TEST_CASE("a random checkpoint with a config's dims loads through its family and runs", "[models]") {
  for (const char* like : {"qwen3_5_text", "qwen3_5_vl_sharded", "qwen3_next_dense"}) {
    INFO(like);
    const std::string out = temp_dir() + "/nested/ck";
    random_checkpoint_options o;
    o.like_config = std::string("tests/data/hf/") + like + "/config.json";
    o.out_dir = out;
    o.num_layers = 3;
    o.seed = 7;
    const uint64_t bytes = write_random_checkpoint(o);
    const hf_checkpoint ck = load_hf_checkpoint(out);
    const hf_checkpoint real = read_hf_config(std::string("tests/data/hf/") + like);
    CHECK(ck.dims.num_layers == 3);
    CHECK(std::vector<hf_layer_kind>(real.dims.layer_kinds.begin(), real.dims.layer_kinds.begin() + 3) == ck.dims.layer_kinds);
    CHECK(ck.dims.head_dim == real.dims.head_dim);
    CHECK(ck.dims.gdn_value_heads == real.dims.gdn_value_heads);
    CHECK(ck.skipped.empty()); // only the table's tensors: no vision tower
    const auto st = safetensors_checkpoint::open(out);
    CHECK(st.files()[0]->path() == out + "/model.safetensors");
    CHECK(st.find(ck.dims.tensor_prefix + "layers.0.linear_attn.A_log")->tensor->dtype == st_dtype::F32);
    CHECK(st.find(ck.dims.tensor_prefix + "layers.0.mlp.up_proj.weight")->tensor->dtype == st_dtype::BF16);
    std::ifstream f(out + "/model.safetensors", std::ios::binary | std::ios::ate);
    CHECK(static_cast<uint64_t>(f.tellg()) == bytes);
    const auto logits = qwen3_5_reference_logits(ck, {1, 2, 3, 4, 5});
    for (float v : logits) REQUIRE(std::isfinite(v));

    // The same arguments write the same bytes; another seed, others.
    random_checkpoint_options again = o;
    again.out_dir = temp_dir();
    write_random_checkpoint(again);
    CHECK(load_hf_checkpoint(again.out_dir).digest == ck.digest);
    again.out_dir = temp_dir();
    again.seed = 8;
    write_random_checkpoint(again);
    CHECK(load_hf_checkpoint(again.out_dir).digest != ck.digest);
  }
}

TEST_CASE("a random checkpoint refuses more layers than the config has, and a bad config", "[models]") {
  random_checkpoint_options o;
  o.like_config = "tests/data/hf/qwen3_5_text/config.json";
  o.out_dir = temp_dir();
  o.num_layers = 5;
  CHECK_THROWS_WITH(write_random_checkpoint(o), Contains("num_hidden_layers 4 has fewer than the 5 layers asked for"));
  const std::string bad = temp_dir() + "/config.json";
  std::ofstream(bad) << R"({"architectures": ["Qwen3_5ForCausalLM"], "vocab_size": 0})";
  o.like_config = bad;
  o.num_layers = 0;
  CHECK_THROWS_WITH(write_random_checkpoint(o), Contains("config.json: vocab_size: bad value 0"));
}
