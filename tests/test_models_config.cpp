#include <catch.hpp>

#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

#include "tests/scratch_dir.hpp"
#include "runtime/config.hpp"

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
  // A good checkpoint's family is recognised; the node does not run it yet, and says so rather than serving a preset.
  CHECK_THAT(error_of("[model]\npath = \"tests/data/hf/qwen3_5_text\"\nserved_model_name = \"tiny\"\n"),
             Contains("model.path = \"tests/data/hf/qwen3_5_text\": a qwen3_5 checkpoint; its forward is not wired into "
                      "the node yet"));
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
