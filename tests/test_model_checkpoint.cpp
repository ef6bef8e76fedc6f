// The node's forward of a Hugging Face checkpoint (runtime/model.cpp on the CPU kernel table, weights
// from runtime/models/): faithful to transformers on the committed fixtures (max |dlogit| <= 1e-3 and
// the same argmax at every position of every prompt), and exact against itself (decode, split
// prefill and a batch give the bits of one whole prefill), for every KV dtype's exact claim.
#include <catch.hpp>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <cmath>
#include <cstring>
#include <memory>
#include <vector>

#include "runtime/layouts.hpp"
#include "runtime/model.hpp"
#include "runtime/model_presets.hpp"
#include "runtime/models/hf_model.hpp"
#include "runtime/models/qwen3_5_reference.hpp"
#include "tests/hf_fixture.hpp"
#include "tests/scratch_dir.hpp"
#include "tools/batch_builder.hpp"

using namespace ordo;
using ordo::test::batch_builder;
using ordo::test::request_rows;

namespace {

constexpr int32_t block_size = 16;
constexpr double tolerance = 1e-3;
const char* const fixtures[] = {"qwen3_5_text", "qwen3_5_vl_sharded", "qwen3_next_dense"};

std::string fixture_dir(const char* name) { return std::string("tests/data/hf/") + name; }

struct harness {
  std::unique_ptr<device> dev;
  std::unique_ptr<model> m;
  batch_builder builder;

  harness(std::shared_ptr<const hf_checkpoint> ck, kv_dtype kv = kv_dtype::fp32)
      : dev(make_cpu_device({})), builder(*dev, block_size) {
    model_options o;
    o.checkpoint = std::move(ck);
    o.kv = kv;
    o.block_size = block_size;
    o.num_blocks = 64;
    o.max_batch_tokens = 512;
    o.max_state_slots = 4;
    m = std::make_unique<model>(o, *dev);
  }

  // The logits of every sampled row, row-major [samples, vocab].
  std::vector<float> run(const std::vector<request_rows>& reqs) {
    const device_batch b = builder.build(reqs);
    m->enqueue_forward(stream_kind::compute, b);
    std::vector<float> logits(size_t(b.num_samples) * m->geometry().vocab_size);
    if (!logits.empty())
      dev->copy_async(stream_kind::compute, logits.data(), m->outputs().logits, logits.size() * sizeof(float));
    dev->synchronize();
    return logits;
  }
};

std::vector<int32_t> blocks_from(int32_t first, int32_t n) {
  std::vector<int32_t> b(n);
  for (int32_t i = 0; i < n; ++i) b[i] = first + i;
  return b;
}

// A prompt's rows [from, to) as one step of the request in state slot `slot`.
request_rows rows(const std::vector<int32_t>& prompt, int32_t from, int32_t to, int32_t first_block, int32_t slot,
                  bool every_row) {
  request_rows q;
  q.tokens.assign(prompt.begin() + from, prompt.begin() + to);
  q.first_position = from;
  q.blocks = blocks_from(first_block, (static_cast<int32_t>(prompt.size()) + block_size - 1) / block_size);
  q.state_slot = slot;
  q.reset_state = from == 0;
  q.sample_every_row = every_row;
  return q;
}

// Logits of every position of `prompt`, prefilled in steps ending at each of `cuts` (the last is the size).
std::vector<float> prefill(harness& h, const std::vector<int32_t>& prompt, const std::vector<int32_t>& cuts) {
  std::vector<float> all;
  int32_t at = 0;
  for (int32_t cut : cuts) {
    const auto part = h.run({rows(prompt, at, cut, 0, 0, true)});
    all.insert(all.end(), part.begin(), part.end());
    at = cut;
  }
  return all;
}

bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

} // namespace

TEST_CASE("the kernel forward of each fixture checkpoint is within 1e-3 of transformers at every position, same argmax",
          "[models][faithful]") {
  for (const char* name : fixtures) {
    const auto ck = std::make_shared<const hf_checkpoint>(load_hf_checkpoint(fixture_dir(name)));
    const test::hf_fixture f = test::read_hf_fixture(fixture_dir(name));
    harness h(ck);
    REQUIRE(h.m->geometry().vocab_size == f.vocab);
    CHECK(h.m->geometry().bos_id == -1);
    CHECK(h.m->geometry().eos_ids == ck->dims.eos_token_ids);
    double max_diff = 0.0, max_vs_reference = 0.0;
    int64_t argmax_mismatches = 0;
    for (size_t p = 0; p < f.prompts.size(); ++p) {
      const auto& prompt = f.prompts[p];
      const int32_t n = static_cast<int32_t>(prompt.size());
      const std::vector<float> got = prefill(h, prompt, {n});
      REQUIRE(got.size() == prompt.size() * static_cast<size_t>(f.vocab));
      for (int32_t t = 0; t < n; ++t) {
        const float* want = f.row(p, t);
        const float* have = got.data() + size_t(t) * f.vocab;
        for (int64_t v = 0; v < f.vocab; ++v)
          max_diff = std::max(max_diff, std::fabs(double(want[v]) - have[v]));
        if (std::max_element(want, want + f.vocab) - want != std::max_element(have, have + f.vocab) - have)
          ++argmax_mismatches;
      }
      if (p + 1 == f.prompts.size()) { // and the plain-C++ oracle on the longest prompt
        const std::vector<float> ref = qwen3_5_reference_logits(*ck, prompt);
        for (size_t i = 0; i < ref.size(); ++i) max_vs_reference = std::max(max_vs_reference, std::fabs(double(ref[i]) - got[i]));
      }
    }
    INFO(name << ": max |dlogit| " << max_diff << ", argmax mismatches " << argmax_mismatches);
    CHECK(max_diff <= tolerance);
    CHECK(argmax_mismatches == 0);
    CHECK(max_vs_reference <= tolerance);
    WARN(name << ": kernel forward max |dlogit| vs transformers " << max_diff << ", vs the reference " << max_vs_reference);
  }
}

TEST_CASE("a checkpoint's logits are the same bits decoded, split, batched and after another request, per KV dtype",
          "[models][exact]") {
  const auto ck = std::make_shared<const hf_checkpoint>(load_hf_checkpoint(fixture_dir("qwen3_5_text")));
  const test::hf_fixture f = test::read_hf_fixture(fixture_dir("qwen3_5_text"));
  const std::vector<int32_t>& prompt = f.prompts.back(); // 300 tokens
  const std::vector<int32_t>& other = f.prompts[2];      // 64 tokens
  const int32_t n = static_cast<int32_t>(prompt.size());
  for (kv_dtype kv : {kv_dtype::fp32, kv_dtype::bf16, kv_dtype::fp8}) {
    INFO("kv " << to_string(kv));
    harness h(ck, kv);
    const std::vector<float> whole = prefill(h, prompt, {n});
    CHECK(same_bits(prefill(h, prompt, {64, 65, 200, n}), whole));
    // Token by token for the first 70 positions, then the rest in one step.
    std::vector<int32_t> cuts;
    for (int32_t t = 1; t <= 70; ++t) cuts.push_back(t);
    cuts.push_back(n);
    CHECK(same_bits(prefill(h, prompt, cuts), whole));
    // Beside another request in the same steps (its own blocks and state slot).
    std::vector<float> batched;
    for (auto [from, to] : {std::pair<int32_t, int32_t>{0, 64}, {64, n}}) {
      std::vector<request_rows> reqs{rows(prompt, from, to, 0, 0, true)};
      if (from == 0) reqs.push_back(rows(other, 0, 64, 32, 1, false));
      const auto out = h.run(reqs);
      batched.insert(batched.end(), out.begin(), out.begin() + size_t(to - from) * f.vocab);
    }
    CHECK(same_bits(batched, whole));
  }
}

TEST_CASE("a checkpoint model refuses what its forward cannot hold", "[models]") {
  auto ck = std::make_shared<hf_checkpoint>(load_hf_checkpoint(fixture_dir("qwen3_5_text")));
  ck->slots.erase("layers.3.attn.w_gate");
  auto dev = make_cpu_device({});
  model_options o;
  o.checkpoint = ck;
  o.num_blocks = 8;
  CHECK_THROWS_WITH(model(o, *dev), Catch::Matchers::Contains("layers.3.attn.w_gate"));
}

TEST_CASE("two checkpoints that differ in one byte never share a namespace; a copy of one does", "[models][identity]") {
  const std::string from = fixture_dir("qwen3_5_text");
  const std::string scratch = test::scratch_dir("ordo_ns");
  const std::string copy = scratch + "/copy", changed = scratch + "/changed";
  std::filesystem::copy(from, copy);
  std::filesystem::copy(from, changed);
  { // the last byte of the file: the high byte of the last tensor's last bf16 value
    std::fstream f(changed + "/model.safetensors", std::ios::in | std::ios::out | std::ios::binary);
    f.seekg(-1, std::ios::end);
    const char c = static_cast<char>(f.get());
    f.seekp(-1, std::ios::end);
    f.put(static_cast<char>(c ^ 0x01));
  }
  const auto ns = [](const std::string& dir) {
    const hf_checkpoint ck = load_hf_checkpoint(dir);
    return namespace_digest(namespace_inputs{}, dims_of(ck, 1024), "layout");
  };
  const uint64_t original = ns(from);
  CHECK(ns(copy) == original);
  CHECK(ns(changed) != original);
  const hf_checkpoint ck = load_hf_checkpoint(from);
  const std::string text = canonical_namespace(namespace_inputs{}, dims_of(ck, 1024), "layout");
  CHECK_THAT(text, Catch::Matchers::Contains("|family=qwen3_5|checkpoint=") && !Catch::Matchers::Contains("preset="));
  // Not a preset's namespace either, whatever preset a config names beside it.
  CHECK(original != namespace_digest(namespace_inputs{}, dims_of(model_preset::dense, model_size::tiny), "layout"));
}
