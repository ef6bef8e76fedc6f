// Hybrid prefix reuse through state checkpoints in page units (SPEC B3–B7), over HTTP.
#include <catch.hpp>

#include "tests/e2e_support.hpp"

using namespace ordo;
using namespace ordo::e2e;

namespace {

json complete(int port, const std::vector<int>& prompt, int max_tokens = 6) {
  return e2e::complete(port, request_body(prompt, max_tokens));
}

int resume_at(const json& r) { return r["ordo"]["resume_at"].get<int>(); }

} // namespace

TEST_CASE("checkpoints: qsa_gdn_ple, block 64, chunk 256, interval 256 resumes at the seed's points") {
  for (const char* chaos : {"device.chaos_seed=0", "device.chaos_seed=5"}) {
    SECTION(chaos) {
      auto node = start_node("configs/default.toml", {chaos});
      struct expectation {
        int prompt_len;
        int resume;
      };
      for (auto e : {expectation{768, 704}, expectation{1000, 960}, expectation{1050, 1024}}) {
        auto prompt = token_prompt(e.prompt_len, static_cast<uint32_t>(e.prompt_len));
        auto cold = complete(node.port, prompt);
        CHECK(resume_at(cold) == 0);
        auto warm = complete(node.port, prompt);
        INFO("prompt of " << e.prompt_len << " tokens: " << warm["ordo"]["reason"]);
        CHECK(resume_at(warm) == e.resume);
        CHECK(warm["ordo"]["from"]["hbm"] == e.resume);
        CHECK(digest(warm) == digest(cold));
        CHECK(warm["choices"][0]["token_ids"] == cold["choices"][0]["token_ids"]);
      }
      // A 1300-token continuation of the 1000-token prompt resumes at its anchor, 960.
      auto base = token_prompt(1000, 1000);
      auto continuation = base;
      auto extra = token_prompt(300, 77);
      continuation.insert(continuation.end(), extra.begin(), extra.end());
      auto warm = complete(node.port, continuation);
      CHECK(resume_at(warm) == 960);
      CHECK(warm["ordo"]["reason"].get<std::string>().find("960") != std::string::npos);
      auto fresh = start_node("configs/default.toml");
      CHECK(digest(complete(fresh.port, continuation)) == digest(warm));

      auto metrics = http_get(node.port, "/metrics").body;
      CHECK(metrics.find("ordo_checkpoints_restored_total 4") != std::string::npos);
      CHECK(metrics.find("ordo_checkpoints_kept_total") != std::string::npos);
      CHECK(metrics.find("ordo_resume_reasons_total{reason=\"prompt_end\"} 3") != std::string::npos);
    }
  }
}

TEST_CASE("checkpoints: interval 0 keeps none, and the resend still matches") {
  auto node = start_node("configs/default.toml", {"cache.checkpoint_interval=0"});
  auto prompt = token_prompt(700, 3);
  auto cold = complete(node.port, prompt);
  auto warm = complete(node.port, prompt);
  CHECK(resume_at(warm) == 0);
  CHECK(warm["ordo"]["reason"].get<std::string>().find("checkpoint_interval = 0") != std::string::npos);
  CHECK(digest(warm) == digest(cold));
}

TEST_CASE("checkpoints: gdn_hybrid, block 16, interval -1 resumes at floor_16(P - 1)") {
  auto node = start_node("configs/gdn_hybrid.toml", {"cache.checkpoint_interval=-1"});
  uint32_t x = 12345;
  for (int i = 0; i < 6; ++i) {
    x = x * 1103515245u + 12345u;
    int p = 20 + static_cast<int>((x >> 8) % 600);
    auto prompt = token_prompt(p, 900 + static_cast<uint32_t>(i));
    auto cold = complete(node.port, prompt);
    auto warm = complete(node.port, prompt);
    INFO("P = " << p);
    CHECK(resume_at(warm) == (p - 1) / 16 * 16);
    CHECK(digest(warm) == digest(cold));
  }
}

TEST_CASE("checkpoints: an HBM eviction takes the images with the blocks") {
  auto node = start_node("configs/default.toml");
  auto prompt = token_prompt(600, 41);
  auto cold = complete(node.port, prompt);
  CHECK(resume_at(complete(node.port, prompt)) == 576);
  auto evicted = http_post(node.port, "/admin/evict", R"({"tier":"hbm"})");
  REQUIRE(evicted.status == 200);
  auto after = complete(node.port, prompt);
  CHECK(resume_at(after) == 0);
  CHECK(digest(after) == digest(cold));
  auto metrics = http_get(node.port, "/metrics").body;
  CHECK(metrics.find("ordo_checkpoints_evicted_total 3") != std::string::npos); // 256, 512, 576
}

TEST_CASE("checkpoints: a pool too small for everything evicts images, clears their units, and stays exact") {
  // 48 blocks of 16 tokens: prompts of 200-400 tokens and their images cannot all stay, so
  // units are given back, cleared and reused as KV and as other images between requests.
  auto node = start_node("configs/gdn_hybrid.toml", {"cache.num_blocks=64", "cache.checkpoint_interval=64"});
  std::vector<std::vector<int>> prompts;
  std::vector<std::string> cold;
  for (int i = 0; i < 6; ++i) {
    prompts.push_back(token_prompt(200 + 40 * i, 300 + static_cast<uint32_t>(i)));
    cold.push_back(digest(complete(node.port, prompts.back())));
  }
  // Each resend right after its cold run resumes from its own checkpoint; later ones evicted it.
  int resumed = 0;
  for (size_t i = 0; i < prompts.size(); ++i) {
    auto cold_i = complete(node.port, prompts[i]);
    auto warm = complete(node.port, prompts[i]);
    INFO("prompt " << i << ": " << warm["ordo"]["reason"]);
    CHECK(digest(cold_i) == cold[i]);
    CHECK(digest(warm) == cold[i]);
    resumed += resume_at(warm) > 0;
  }
  CHECK(resumed == static_cast<int>(prompts.size()));
  auto metrics = http_get(node.port, "/metrics").body;
  auto at = metrics.find("\nordo_checkpoints_evicted_total ");
  REQUIRE(at != std::string::npos);
  CHECK(std::stoi(metrics.substr(at + 32)) > 0);
}
