#include <catch.hpp>

#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

#include "tests/scratch_dir.hpp"
#include "runtime/config.hpp"
#include "runtime/models/hf_model.hpp"

using namespace ordo;
using Catch::Matchers::Contains;

namespace {


std::string error_of(const std::string& toml) {
  try {
    parse_config(toml, {});
  } catch (const config_error& e) {
    return e.what();
  }
  return "";
}

} // namespace

TEST_CASE("model.path is refused beside model.preset", "[config][models]") {
  CHECK_THAT(error_of("[model]\npreset = \"dense\"\npath = \"tests/data/hf/qwen3_5_text\"\n"),
             Contains("model.path = \"tests/data/hf/qwen3_5_text\" with model.preset = \"dense\": a node serves either a "
                      "Hugging Face checkpoint or a seeded preset; leave model.preset out"));
}

TEST_CASE("model.path: config.json is read before the node serves, and its faults name the file", "[config][models]") {
  CHECK_THAT(error_of("[model]\npath = \"tests/data/hf/nothing_here\"\n"),
             Contains("model.path = \"tests/data/hf/nothing_here\": tests/data/hf/nothing_here/config.json: cannot be opened"));
}

TEST_CASE("model.path: a good checkpoint is accepted, loaded whole into the model options and survives a round trip",
          "[config][models]") {
  const node_config cfg = parse_config("[model]\npath = \"tests/data/hf/qwen3_5_text\"\nserved_model_name = \"tiny\"\n");
  CHECK(cfg.model_path == "tests/data/hf/qwen3_5_text");
  const model_options mo = load_model_options(cfg);
  REQUIRE(mo.checkpoint);
  CHECK(std::string(mo.checkpoint->family->name) == "qwen3_5");
  CHECK(mo.checkpoint->digest != 0);
  CHECK(mo.checkpoint->slots.count("layers.3.attn.w_gate") == 1);
  CHECK_FALSE(to_model_options(cfg).checkpoint); // the pure conversion reads no tensor
  // The rendered config (a trace's header) names the checkpoint, not a preset, and parses back to it.
  const std::string text = render_config_toml(cfg);
  CHECK_THAT(text, Contains("path = \"tests/data/hf/qwen3_5_text\"") && Contains("served_model_name = \"tiny\""));
  CHECK_THAT(text, !Contains("preset"));
  const node_config back = parse_config(text);
  CHECK(back.model_path == cfg.model_path);
  CHECK(back.served_model_name == "tiny");
}

TEST_CASE("model.path: a malformed checkpoint is refused at config time, naming the file and the fault", "[config][models]") {
  const std::string d = test::scratch_dir("ordo_cfg");
  const std::string dir = std::string(d) + "/ck";
  std::filesystem::copy("tests/data/hf/qwen3_5_text", dir);
  std::filesystem::resize_file(dir + "/model.safetensors", std::filesystem::file_size(dir + "/model.safetensors") - 64);
  CHECK_THAT(error_of("[model]\npath = \"" + dir + "\"\n"),
             Contains("model.path = \"" + dir + "\": " + dir + "/model.safetensors: tensor ") && Contains("(truncated?)"));
}

TEST_CASE("without model.path the presets are unchanged", "[config][models]") {
  const node_config cfg = parse_config("[model]\npreset = \"dense\"\nserved_model_name = \"toy\"\n", {});
  CHECK(cfg.model_path.empty());
  CHECK(cfg.served_model_name == "toy");
  CHECK(cfg.preset == model_preset::dense);
}
