// The transformers fixtures under tests/data/hf/ (written by tools/hf_fixtures.py): token-id prompts
// and transformers' fp32 logits of every position. Tests only (header-only).
#pragma once

#include <cstdint>
#include <fstream>
#include <stdexcept>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace ordo::test {

struct hf_fixture {
  std::vector<std::vector<int32_t>> prompts;
  std::vector<size_t> offsets; // prompt p's first row in logits
  int64_t vocab = 0;
  std::vector<float> logits; // [offsets.back(), vocab]

  const float* row(size_t prompt, size_t position) const { return logits.data() + (offsets[prompt] + position) * vocab; }
};

inline hf_fixture read_hf_fixture(const std::string& dir) {
  std::ifstream in(dir + "/ordo_expected.json");
  if (!in) throw std::runtime_error(dir + "/ordo_expected.json cannot be read");
  const nlohmann::json j = nlohmann::json::parse(in);
  hf_fixture f;
  f.prompts = j["prompts"].get<std::vector<std::vector<int32_t>>>();
  f.offsets = j["offsets"].get<std::vector<size_t>>();
  f.vocab = j["vocab_size"].get<int64_t>();
  if (j["logits"]["dtype"] != "float32-le") throw std::runtime_error(dir + ": logits are not float32-le");
  const size_t n = f.offsets.back() * static_cast<size_t>(f.vocab);
  f.logits.resize(n);
  std::ifstream bin(dir + "/" + j["logits"]["file"].get<std::string>(), std::ios::binary);
  bin.read(reinterpret_cast<char*>(f.logits.data()), static_cast<std::streamsize>(n * 4));
  if (bin.gcount() != static_cast<std::streamsize>(n * 4)) throw std::runtime_error(dir + ": the logits file is short");
  return f;
}

} // namespace ordo::test
