#include "tools/demo.hpp"

#include <cstdio>
#include <iostream>

#include <nlohmann/json.hpp>
#include <spdlog/spdlog.h>

#include "actors/node.hpp"
#include "runtime/tokenizer.hpp"
#include "actors/net/http_client.hpp"

namespace ordo {

namespace {

struct turn_result {
  std::string name;
  int prompt_tokens = 0;
  int resume_at = 0;
  nlohmann::json from;
  std::string digest;
  std::string reason;
};

turn_result send(int port, const std::string& name, const std::vector<int32_t>& prompt,
                 std::vector<int32_t>& completion) {
  nlohmann::json body = {{"prompt", prompt}, {"max_tokens", 16}, {"temperature", 0}};
  auto res = http_post(port, "/v1/completions", body.dump());
  if (res.status != 200)
    throw std::runtime_error(name + ": HTTP " + std::to_string(res.status) + ": " + res.body);
  auto j = nlohmann::json::parse(res.body);
  completion = j["choices"][0]["token_ids"].get<std::vector<int32_t>>();
  return {name, j["usage"]["prompt_tokens"].get<int>(), j["ordo"]["resume_at"].get<int>(), j["ordo"]["from"],
          j["ordo"]["logits_digest"].get<std::string>(), j["ordo"]["reason"].get<std::string>()};
}

// Appends the byte tokens of `text` (no BOS: it continues a conversation).
void append_text(std::vector<int32_t>& ids, const std::string& text) {
  auto encoded = byte_tokenizer::encode(text);
  ids.insert(ids.end(), encoded.begin() + 1, encoded.end());
}

// Three conversations of three turns; each turn's prompt is the whole conversation so far, as
// token ids (so a completion is carried over exactly, not through lossy text).
std::vector<turn_result> run_pass(int port) {
  const char* openers[] = {
      "You are a careful assistant. Summarise the causes of the French revolution in two lines.",
      "Write a short poem about a lighthouse keeper who counts the waves at night, one by one.",
      "Explain how a hash chain over token blocks lets a server find a shared prompt prefix."};
  const char* follow_ups[] = {" Now say it more simply.", " Make it shorter, please."};
  std::vector<turn_result> out;
  for (int c = 0; c < 3; ++c) {
    auto conversation = byte_tokenizer::encode(std::string("User: ") + openers[c] + "\nAssistant:");
    for (int t = 0; t < 3; ++t) {
      std::vector<int32_t> completion;
      out.push_back(send(port, "conv" + std::to_string(c + 1) + ".turn" + std::to_string(t + 1), conversation,
                         completion));
      if (t < 2) {
        conversation.insert(conversation.end(), completion.begin(), completion.end());
        append_text(conversation, std::string("\nUser:") + follow_ups[t] + "\nAssistant:");
      }
    }
  }
  return out;
}

std::string tiers(const nlohmann::json& from) {
  return "hbm " + std::to_string(from["hbm"].get<int>()) + " / cpu " + std::to_string(from["cpu"].get<int>()) +
         " / store " + std::to_string(from["store"].get<int>());
}

} // namespace

int run_demo(const std::string& config_path, const std::vector<std::string>& overrides) {
  spdlog::set_level(spdlog::level::warn);
  node_config cfg;
  try {
    auto sets = overrides;
    sets.push_back("server.port=0");
    cfg = load_config_file(config_path, sets);
  } catch (const std::exception& e) {
    std::cerr << "ordo demo: invalid config: " << e.what() << "\n";
    return 2;
  }
  node n(cfg);
  int port = n.start();
  std::printf("ordo demo: node %s on http://127.0.0.1:%d\n", describe(cfg).c_str(), port);

  auto cold = run_pass(port);
  auto evicted = http_post(port, "/admin/evict", R"({"tier":"hbm"})");
  std::printf("evicted HBM: %s\n", evicted.body.c_str());
  auto warm = run_pass(port);

  std::printf("\n%-12s %6s %9s %9s %-26s %-16s %-13s %s\n", "request", "prompt", "resume p1", "resume p2",
              "p2 tiers (tokens)", "logits digest", "digest=cold", "p2 reason");
  int mismatches = 0;
  for (size_t i = 0; i < warm.size(); ++i) {
    bool equal = warm[i].digest == cold[i].digest;
    mismatches += !equal;
    std::printf("%-12s %6d %9d %9d %-26s %-16s %-13s %s\n", warm[i].name.c_str(), warm[i].prompt_tokens,
                cold[i].resume_at, warm[i].resume_at, tiers(warm[i].from).c_str(), warm[i].digest.c_str(),
                equal ? "yes" : "NO", warm[i].reason.c_str());
  }
  std::printf("\n%zu requests per pass; pass-2 digests equal to the cold run: %zu of %zu\n", warm.size(),
              warm.size() - static_cast<size_t>(mismatches), warm.size());
  std::printf("metrics: curl http://127.0.0.1:PORT/metrics while `ordo node` runs\n");
  n.drain_and_stop();
  return mismatches == 0 ? 0 : 1;
}

} // namespace ordo
