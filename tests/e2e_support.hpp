// Helpers shared by the end-to-end tests: a node in-process on a free loopback port, seeded
// token prompts, and completions checked for HTTP 200. Call only from the test's main thread
// (Catch2 assertions are not thread-safe).
#pragma once

#include <catch.hpp>

#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>
#include <spdlog/spdlog.h>

#include "actors/node.hpp"
#include "actors/net/http_client.hpp"

namespace ordo::e2e {

using json = nlohmann::json;

struct running_node {
  std::unique_ptr<node> n;
  int port = 0;
};

inline running_node start_node(const std::string& config_path, std::vector<std::string> sets = {}) {
  spdlog::set_level(spdlog::level::warn);
  sets.push_back("server.port=0");
  running_node r;
  r.n = std::make_unique<node>(load_config_file(config_path, sets));
  r.port = r.n->start();
  return r;
}

// `len` pseudo-random byte tokens, the same for the same seed.
inline std::vector<int> token_prompt(int len, uint32_t seed) {
  std::vector<int> ids;
  uint32_t x = seed * 2654435761u + 1;
  for (int i = 0; i < len; ++i) {
    x = x * 1664525u + 1013904223u;
    ids.push_back(static_cast<int>((x >> 8) % 256));
  }
  return ids;
}

inline json request_body(const std::vector<int>& prompt, int max_tokens = 8) {
  return {{"prompt", prompt}, {"max_tokens", max_tokens}, {"temperature", 0}};
}

inline json complete(int port, const json& body) {
  auto res = http_post(port, "/v1/completions", body.dump());
  INFO(res.error << " " << res.body);
  REQUIRE(res.status == 200);
  return json::parse(res.body);
}

inline std::string digest(const json& r) { return r["ordo"]["logits_digest"].get<std::string>(); }

} // namespace ordo::e2e
