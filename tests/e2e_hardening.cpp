// A node against careless and hostile clients (SPEC A6): nested input, clients that hang up,
// keys, a full queue, slow senders, and a seeded mix of valid and mutated requests whose valid
// answers must carry their solo digests.
#include "tests/e2e_support.hpp"

#include <sys/socket.h>

#include <chrono>
#include <random>
#include <thread>

using namespace ordo;
using namespace ordo::e2e;

namespace {

// The value of one series ("name" or "name{labels}"); fails when the series is missing.
double metric(int port, const std::string& series) {
  auto text = http_get(port, "/metrics").body;
  auto at = text.find("\n" + series + " ");
  INFO("series " << series);
  REQUIRE(at != std::string::npos);
  return std::stod(text.substr(at + series.size() + 2));
}

// Polls `series` until it equals `value` (bounded: 30 s).
bool metric_reaches(int port, const std::string& series, double value) {
  for (int i = 0; i < 600; ++i) {
    if (metric(port, series) == value)
      return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  return false;
}

std::string raw_post(const std::string& path, const std::string& body, const std::string& extra_headers = "") {
  return "POST " + path + " HTTP/1.1\r\nHost: t\r\nContent-Type: application/json\r\n" + extra_headers +
         "Content-Length: " + std::to_string(body.size()) + "\r\n\r\n" + body;
}

// The next close sends RST (SO_LINGER 0) instead of FIN: the rudest way to hang up.
void reset_on_close(http_client& c) {
  linger l{1, 0};
  ::setsockopt(c.fd(), SOL_SOCKET, SO_LINGER, &l, sizeof l);
}

} // namespace

TEST_CASE("e2e: a request nested 30 000 levels deep gets a bounded 400 and the node keeps serving") {
  auto node = start_node("configs/dense.toml");
  std::string deep(30000, '['); // inside the body limit, so the parser sees it
  deep += std::string(30000, ']');
  for (const char* field : {"max_tokens", "temperature", "seed", "stream", "cache_salt", "media", "prompt"}) {
    std::string body = std::string("{\"prompt\":\"hi\",\"") + field + "\":" + deep + "}";
    if (std::string(field) == "prompt")
      body = "{\"prompt\":" + deep + "}";
    auto r = http_post(node.port, "/v1/completions", body);
    INFO(field << ": " << r.error << " " << r.body.substr(0, 300));
    CHECK(r.status == 400);
    CHECK(r.body.find("more than 64 levels deep") != std::string::npos);
    CHECK(r.body.size() < 1024);
  }
  auto r = http_post(node.port, "/admin/evict", "{\"tier\":" + deep + "}");
  CHECK(r.status == 400);
  // Beyond the body limit (derived from the context) the transport refuses before parsing.
  std::string huge(200000, '[');
  CHECK(http_post(node.port, "/v1/completions", "{\"prompt\":" + huge + "}").status == 413);
  complete(node.port, request_body(token_prompt(40, 1), 2));
}

TEST_CASE("e2e: a client that hangs up is cancelled, its blocks come back and the node stays exact") {
  auto node = start_node("configs/dense.toml", {"scheduler.max_num_seqs=4"});
  const double blocks = metric(node.port, "ordo_hbm_blocks_free");
  CHECK(blocks == 512); // right from the start, before any step
  const auto solo = digest(complete(node.port, request_body(token_prompt(300, 7), 4)));
  CHECK(metric(node.port, "ordo_requests_total{status=\"cancelled\"}") == 0);
  int cancelled = 0;
  for (bool stream : {false, true}) {
    // Long enough to be running when the client goes: 3500 prompt tokens and 300 to generate.
    json body = request_body(token_prompt(3500, stream ? 2 : 3), 300);
    body["stream"] = stream;
    http_client c(node.port);
    REQUIRE(c.send_raw(raw_post("/v1/completions", body.dump())));
    REQUIRE(metric_reaches(node.port, "ordo_num_requests_running", 1));
    if (stream)
      reset_on_close(c);
    c.close();
    ++cancelled;
    CHECK(metric_reaches(node.port, "ordo_requests_total{status=\"cancelled\"}", cancelled));
    CHECK(metric_reaches(node.port, "ordo_num_requests_running", 0));
  }
  // Nothing is held: every block is free or cached, and the node answers exactly as before.
  CHECK(metric(node.port, "ordo_hbm_blocks_free") + metric(node.port, "ordo_hbm_blocks_cached") == blocks);
  CHECK(digest(complete(node.port, request_body(token_prompt(300, 7), 4))) == solo);
}

TEST_CASE("e2e: server.api_key guards /v1/*, server.admin_key guards /admin/*") {
  auto node = start_node("configs/dense.toml", {"server.api_key=sk-1", "server.admin_key=adm-2"});
  const std::string body = request_body(token_prompt(20, 1), 2).dump();
  http_client anon(node.port);
  auto r = anon.request("POST", "/v1/completions", body);
  CHECK(r.status == 401);
  CHECK(r.body.find("Authorization: Bearer <server.api_key>") != std::string::npos);
  http_client wrong(node.port);
  REQUIRE(wrong.send_raw(raw_post("/v1/completions", body, "Authorization: Bearer sk-2\r\n")));
  CHECK(wrong.read_response().status == 401);
  http_client ok(node.port);
  REQUIRE(ok.send_raw(raw_post("/v1/completions", body, "Authorization: Bearer sk-1\r\n")));
  CHECK(ok.read_response().status == 200);
  // The API key does not open /admin/*; the admin key does. /health and /metrics stay open.
  http_client admin_wrong(node.port);
  REQUIRE(admin_wrong.send_raw(raw_post("/admin/evict", "{\"tier\":\"hbm\"}", "Authorization: Bearer sk-1\r\n")));
  CHECK(admin_wrong.read_response().status == 401);
  http_client admin(node.port);
  REQUIRE(admin.send_raw(raw_post("/admin/evict", "{\"tier\":\"hbm\"}", "Authorization: Bearer adm-2\r\n")));
  CHECK(admin.read_response().status == 200);
  CHECK(http_get(node.port, "/health").status == 200);
  CHECK(http_get(node.port, "/metrics").status == 200);
  CHECK(metric(node.port, "ordo_requests_total{status=\"401\"}") == 3);
}

TEST_CASE("e2e: beyond scheduler.max_waiting a request gets 429 with Retry-After") {
  auto node = start_node("configs/dense.toml", {"scheduler.max_num_seqs=1", "scheduler.max_waiting=1"});
  json long_body = request_body(token_prompt(3500, 4), 200);
  http_client first(node.port);
  REQUIRE(first.send_raw(raw_post("/v1/completions", long_body.dump())));
  REQUIRE(metric_reaches(node.port, "ordo_num_requests_running", 1));
  http_client second(node.port); // waits behind the first
  REQUIRE(second.send_raw(raw_post("/v1/completions", request_body(token_prompt(30, 5), 2).dump())));
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  json streamed = request_body(token_prompt(30, 6), 2);
  streamed["stream"] = true;
  auto third = http_post(node.port, "/v1/completions", streamed.dump());
  CHECK(third.status == 429); // a refused stream still gets its status, not a 200 stream
  CHECK(third.header("retry-after") == "1");
  CHECK(third.body.find("scheduler.max_waiting = 1") != std::string::npos);
  CHECK(metric(node.port, "ordo_requests_total{status=\"rejected\"}") == 1);
  first.close();
  CHECK(second.read_response().status == 200);
}

TEST_CASE("e2e: a slow sender is closed at server.header_timeout_s with a 408") {
  auto node = start_node("configs/dense.toml", {"server.header_timeout_s=1"});
  http_client slow(node.port, 10);
  auto start = std::chrono::steady_clock::now();
  REQUIRE(slow.send_raw("POST /v1/completions HTTP/1.1\r\nHost: t\r\n"));
  auto r = slow.read_response();
  double waited = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  CHECK(r.status == 408);
  CHECK(r.body.find("server.header_timeout_s") != std::string::npos);
  CHECK(waited < 5);
  CHECK(http_get(node.port, "/health").status == 200);
}

TEST_CASE("e2e: a seeded mix of valid and mutated requests: 4xx naming the field, or the solo digest") {
  auto node = start_node("configs/default.toml", {"device.chaos_seed=5"});
  std::vector<json> valid;
  for (int i = 0; i < 6; ++i)
    valid.push_back(request_body(token_prompt(20 + 37 * i, 100 + i), 2 + i % 3));
  std::vector<std::string> solo;
  for (auto& v : valid)
    solo.push_back(digest(complete(node.port, v)));
  // field → a value of the wrong type or out of range
  const std::vector<std::pair<std::string, json>> mutations = {
      {"max_tokens", "8"},         {"max_tokens", -3},   {"max_tokens", 1e9},      {"temperature", "hot"},
      {"temperature", 9},          {"seed", -1},         {"seed", json::array()},  {"stream", 1},
      {"cache_salt", 5},           {"media", "x"},       {"prompt", json::object()}, {"prompt", json::array()},
      {"n", 3},                    {"stop", json::array({1, 2})}, {"stream_options", json::object({{"include_usage", true}})},
  };
  std::mt19937 rng(20261203);
  int checked_valid = 0, checked_invalid = 0;
  for (int i = 0; i < 120; ++i) {
    size_t v = rng() % valid.size();
    json body = valid[v];
    if (rng() % 2 == 0) {
      auto r = http_post(node.port, "/v1/completions", body.dump());
      REQUIRE(r.status == 200);
      CHECK(json::parse(r.body)["ordo"]["logits_digest"] == solo[v]);
      ++checked_valid;
      continue;
    }
    const auto& [field, value] = mutations[rng() % mutations.size()];
    body[field] = value;
    auto r = http_post(node.port, "/v1/completions", body.dump());
    INFO(body.dump().substr(0, 200) << " → " << r.status << " " << r.body);
    REQUIRE((r.status >= 400 && r.status < 500));
    CHECK(json::parse(r.body)["error"]["message"].get<std::string>().find(field) != std::string::npos);
    ++checked_invalid;
  }
  CHECK(checked_valid > 30);
  CHECK(checked_invalid > 30);
}
