#include <catch.hpp>

#include <string>

#include "runtime/completion_api.hpp"
#include "runtime/pd_params.hpp"

using namespace ordo;

namespace {

secret_key key_of(uint8_t seed) {
  secret_key k{};
  for (size_t i = 0; i < k.size(); ++i)
    k[i] = static_cast<uint8_t>(seed + i);
  return k;
}

completion_request prompt_of(std::vector<int32_t> tokens, std::string salt = "") {
  completion_request r;
  r.prompt = std::move(tokens);
  r.cache_salt = std::move(salt);
  return r;
}

kv_params_claim claim() {
  kv_params_claim c;
  c.engine_id = "node-7f3a";
  c.host = "127.0.0.1";
  c.port = 40002;
  c.transfer_id = "17";
  c.expires_at = 1000 + 90;
  return c;
}

constexpr int64_t now = 1000;

} // namespace

TEST_CASE("signed parameters verify for their prompt, and nothing they cover can change") {
  const secret_key key = key_of(1);
  const std::string hash = prompt_hash(prompt_of({1, 2, 3, 4}));
  kv_params_claim c = claim();
  c.signature = sign_kv_params(key, c, hash);
  auto v = check_kv_params(key, c, hash, {}, now);
  CHECK(v.refusal.empty());
  CHECK(v.trust == peer_trust::signed_params);

  auto refused = [&](kv_params_claim changed, const std::string& h, int64_t at = now) {
    return check_kv_params(key, changed, h, {}, at).refusal;
  };
  CHECK(refused(c, prompt_hash(prompt_of({1, 2, 3, 5}))).find("does not verify") != std::string::npos);
  CHECK(refused(c, prompt_hash(prompt_of({1, 2, 3, 4}, "tenant-b"))).find("does not verify") != std::string::npos);
  auto other = c;
  other.host = "10.0.0.9";
  CHECK(refused(other, hash).find("does not verify") != std::string::npos);
  other = c;
  other.port = 40003;
  CHECK(refused(other, hash).find("does not verify") != std::string::npos);
  other = c;
  other.engine_id = "node-evil";
  CHECK(refused(other, hash).find("does not verify") != std::string::npos);
  other = c;
  other.transfer_id = "18";
  CHECK(refused(other, hash).find("does not verify") != std::string::npos);
  other = c;
  other.expires_at += 3600;
  CHECK(refused(other, hash).find("does not verify") != std::string::npos);
  // Another deployment's secret.
  CHECK(check_kv_params(key_of(2), c, hash, {}, now).refusal.find("does not verify") != std::string::npos);
  // Expired, or claiming too long a life (signed that way by a peer): refused.
  CHECK(refused(c, hash, c.expires_at + 1).find("expired 1 s ago") != std::string::npos);
  other = c;
  other.expires_at = now + kv_params_max_ttl_s + 1;
  other.signature = sign_kv_params(key, other, hash);
  CHECK(refused(other, hash).find("more than the") != std::string::npos);
}

TEST_CASE("unsigned parameters name only listed peers; a bad signature is refused even for one") {
  const secret_key key = key_of(1);
  const std::string hash = prompt_hash(prompt_of({9, 9}));
  kv_params_claim c = claim();
  auto v = check_kv_params(key, c, hash, {}, now);
  CHECK(v.trust == peer_trust::none);
  CHECK(v.refusal.find("kv_transfer_params names the prefill node 127.0.0.1:40002") == 0);
  CHECK(v.refusal.find("not in pd.peers") != std::string::npos);
  v = check_kv_params(key, c, hash, {"127.0.0.1:40001", "127.0.0.1:40002"}, now);
  CHECK(v.refusal.empty());
  CHECK(v.trust == peer_trust::listed);
  CHECK_FALSE(check_kv_params(key, c, hash, {"localhost:40002"}, now).refusal.empty());
  c.signature = std::string(64, 'a');
  CHECK(check_kv_params(key, c, hash, {"127.0.0.1:40002"}, now).refusal.find("does not verify") != std::string::npos);
  // Without a secret only listed peers are accepted.
  CHECK(check_kv_params(std::nullopt, c, hash, {}, now).refusal.find("holds no deployment secret") !=
        std::string::npos);
  // Parameters naming no peer (a prefill request's {"do_remote_decode": true}) pass.
  CHECK(check_kv_params(key, kv_params_claim{}, hash, {}, now).refusal.empty());
}

TEST_CASE("the prompt hash covers tokens, salt and media, and the parser reads every signed field") {
  CHECK(prompt_hash(prompt_of({1, 2})) == prompt_hash(prompt_of({1, 2})));
  CHECK(prompt_hash(prompt_of({1, 2})) != prompt_hash(prompt_of({2, 1})));
  CHECK(prompt_hash(prompt_of({1, 2})) != prompt_hash(prompt_of({1, 2, 0})));
  auto with_media = prompt_of({1, 2, 3});
  with_media.media.push_back({0, 2, 0xabc});
  CHECK(prompt_hash(with_media) != prompt_hash(prompt_of({1, 2, 3})));

  const std::string body = R"({"prompt": [5, 6, 7], "kv_transfer_params": {"remote_engine_id": "node-1",
      "remote_host": "127.0.0.1", "remote_port": 4000, "transfer_id": "3", "expires_at": 1234,
      "signature": ")" + std::string(64, 'c') + R"("}})";
  auto parsed = parse_completion_request(body, api_limits{});
  REQUIRE(std::holds_alternative<api_request>(parsed));
  const auto& c = std::get<api_request>(parsed).kv_claim;
  CHECK(c.engine_id == "node-1");
  CHECK(c.endpoint() == "127.0.0.1:4000");
  CHECK(c.transfer_id == "3");
  CHECK(c.expires_at == 1234);
  CHECK(c.signature == std::string(64, 'c'));
  auto bad = parse_completion_request(
      R"({"prompt": [5], "kv_transfer_params": {"remote_host": "h", "remote_port": 1, "signature": "short"}})",
      api_limits{});
  REQUIRE(std::holds_alternative<api_error>(bad));
  CHECK(std::get<api_error>(bad).message.find("kv_transfer_params.signature must be 64 hex digits") == 0);
}
