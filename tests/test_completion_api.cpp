#include "runtime/completion_api.hpp"

#include <catch.hpp>
#include <nlohmann/json.hpp>

using namespace ordo;
using json = nlohmann::json;

namespace {

api_limits limits() {
  api_limits l;
  l.max_context = 64;
  l.vocab_size = 258;
  return l;
}

completion_request ok(const std::string& body, const api_limits& l = limits()) {
  auto r = parse_completion_request(body, l);
  if (auto* e = std::get_if<api_error>(&r))
    FAIL("unexpected error: " << e->message);
  return std::get<completion_request>(r);
}

api_error err(const std::string& body, const api_limits& l = limits()) {
  auto r = parse_completion_request(body, l);
  REQUIRE(std::holds_alternative<api_error>(r));
  auto e = std::get<api_error>(r);
  CHECK(e.status == 400);
  CHECK(e.type == "invalid_request_error");
  return e;
}

bool contains(const std::string& s, const std::string& part) {
  return s.find(part) != std::string::npos;
}

} // namespace

TEST_CASE("text prompt is tokenized with BOS and defaults apply") {
  auto r = ok(R"({"prompt":"Hi","model":"whatever","unknown_field":[1,2]})");
  CHECK(r.prompt == std::vector<int32_t>{256, 'H', 'i'});
  CHECK(r.max_tokens == 16);
  CHECK(r.temperature == 0.0f);
  CHECK(r.seed == 0);
  CHECK_FALSE(r.stream);
  CHECK(r.cache_salt.empty());
  CHECK(r.request_id == 0);
}

TEST_CASE("all fields are taken from the body") {
  auto r = ok(R"({"prompt":"abc","max_tokens":5,"temperature":0.7,"seed":18446744073709551615,
                  "stream":true,"cache_salt":"s1","n":1})");
  CHECK(r.max_tokens == 5);
  CHECK(r.temperature == Approx(0.7f));
  CHECK(r.seed == 18446744073709551615ull);
  CHECK(r.stream);
  CHECK(r.cache_salt == "s1");
  CHECK(ok(R"({"prompt":"a","temperature":2})").temperature == 2.0f);
  CHECK(ok(R"({"prompt":"a","max_tokens":null,"seed":null})").max_tokens == 16);
}

TEST_CASE("token-id prompts and the one-element batch forms") {
  CHECK(ok(R"({"prompt":[256,1,2,257]})").prompt == std::vector<int32_t>{256, 1, 2, 257});
  CHECK(ok(R"({"prompt":[0]})").prompt == std::vector<int32_t>{0});
  CHECK(ok(R"({"prompt":["ab"]})").prompt == std::vector<int32_t>{256, 'a', 'b'});
  CHECK(ok(R"({"prompt":[[5,6]]})").prompt == std::vector<int32_t>{5, 6});
}

TEST_CASE("malformed JSON and non-object bodies are rejected") {
  CHECK(contains(err(R"({"prompt": "a",)").message, "not valid JSON"));
  CHECK(contains(err("").message, "not valid JSON"));
  CHECK(contains(err("[1,2]").message, "must be a JSON object"));
  CHECK(contains(err("\"hello\"").message, "must be a JSON object"));
}

TEST_CASE("missing, empty or badly typed prompts are rejected") {
  CHECK(contains(err(R"({"max_tokens":4})").message, "prompt is required"));
  CHECK(contains(err(R"({"prompt":null})").message, "prompt is required"));
  CHECK(contains(err(R"({"prompt":""})").message, "prompt is empty"));
  CHECK(contains(err(R"({"prompt":[]})").message, "prompt is empty"));
  CHECK(contains(err(R"({"prompt":[""]})").message, "prompt is empty"));
  CHECK(contains(err(R"({"prompt":[[]]})").message, "prompt is empty"));
  CHECK(contains(err(R"({"prompt":42})").message, "prompt must be a string"));
  CHECK(contains(err(R"({"prompt":{"a":1}})").message, "prompt must be a string"));
  CHECK(contains(err(R"({"prompt":["a","b"]})").message, "holds 2 prompts"));
  CHECK(contains(err(R"({"prompt":[1,"b"]})").message, "prompt[1] must be an integer token id"));
  CHECK(contains(err(R"({"prompt":[1.5]})").message, "non-integer"));
  CHECK(contains(err(R"({"prompt":[["x"]]})").message, "prompt[0] must be"));
}

TEST_CASE("token ids outside the vocabulary are rejected with the allowed range") {
  auto e = err(R"({"prompt":[1,258]})");
  CHECK(contains(e.message, "prompt[1] = 258"));
  CHECK(contains(e.message, "0..257"));
  CHECK(contains(err(R"({"prompt":[-1]})").message, "0..257"));
  CHECK(contains(err(R"({"prompt":[99999999999999999999]})").message, "prompt[0]"));
}

TEST_CASE("max_tokens must be an integer within the context") {
  CHECK(contains(err(R"({"prompt":"a","max_tokens":"ten"})").message,
                 "max_tokens must be an integer between 1 and 64, got string \"ten\""));
  CHECK(contains(err(R"({"prompt":"a","max_tokens":0})").message, "between 1 and 64, got 0"));
  CHECK(contains(err(R"({"prompt":"a","max_tokens":-3})").message, "got -3"));
  CHECK(contains(err(R"({"prompt":"a","max_tokens":65})").message, "got 65"));
  CHECK(contains(err(R"({"prompt":"a","max_tokens":1e30})").message, "max_tokens"));
  CHECK(contains(err(R"({"prompt":"a","max_tokens":2.5})").message, "non-integer"));
  api_limits capped = limits();
  capped.max_tokens_limit = 8;
  CHECK(contains(err(R"({"prompt":"a","max_tokens":9})", capped).message, "between 1 and 8"));
  CHECK(ok(R"({"prompt":"a","max_tokens":8})", capped).max_tokens == 8);
}

TEST_CASE("prompt plus max_tokens beyond the context is rejected with the numbers") {
  std::string text(60, 'x'); // 61 tokens with BOS
  CHECK(ok(R"({"prompt":")" + text + R"(","max_tokens":3})").prompt.size() == 61);
  auto e = err(R"({"prompt":")" + text + R"(","max_tokens":4})");
  CHECK(e.message == "prompt of 61 tokens plus max_tokens 4 exceeds the context of 64 tokens");
  std::string huge(100, 'y');
  CHECK(contains(err(R"({"prompt":")" + huge + R"("})").message, "prompt of 101 tokens"));
}

TEST_CASE("temperature, seed, stream, cache_salt, model and n are type-checked") {
  CHECK(contains(err(R"({"prompt":"a","temperature":-0.1})").message,
                 "temperature must be a number between 0 and 2"));
  CHECK(contains(err(R"({"prompt":"a","temperature":2.5})").message, "got 2.5"));
  CHECK(contains(err(R"({"prompt":"a","temperature":"hot"})").message, "temperature"));
  err(R"({"prompt":"a","temperature":1e999})"); // overflows: rejected (as invalid JSON)
  CHECK(contains(err(R"({"prompt":"a","seed":-1})").message, "seed must be an integer"));
  CHECK(contains(err(R"({"prompt":"a","seed":1.5})").message, "seed"));
  CHECK(contains(err(R"({"prompt":"a","stream":"yes"})").message, "stream must be true or false"));
  CHECK(contains(err(R"({"prompt":"a","cache_salt":5})").message, "cache_salt must be a string"));
  CHECK(contains(err(R"({"prompt":"a","model":5})").message, "model must be a string"));
  CHECK(contains(err(R"({"prompt":"a","n":2})").message, "n must be 1"));
}

TEST_CASE("evict body names a tier: hbm or cpu") {
  auto r = parse_evict_request(R"({"tier":"hbm"})");
  REQUIRE(std::holds_alternative<std::string>(r));
  CHECK(std::get<std::string>(r) == "hbm");
  CHECK(std::get<std::string>(parse_evict_request(R"({"tier":"cpu"})")) == "cpu");
  for (const char* body : {R"({"tier":"disk"})", R"({"tier":3})", "{}", "[]", "nope"}) {
    auto e = parse_evict_request(body);
    REQUIRE(std::holds_alternative<api_error>(e));
    CHECK(std::get<api_error>(e).status == 400);
  }
  CHECK(contains(std::get<api_error>(parse_evict_request(R"({"tier":"disk"})")).message,
                 "tier must be one of: \"hbm\", \"cpu\", got \"disk\""));
}

TEST_CASE("a finished request renders in OpenAI shape with the ordo object") {
  completion_result r;
  r.request_id = 42;
  r.token_ids = {'o', 'k', 257};
  r.finish_reason = "stop";
  r.prompt_tokens = 10;
  r.cached_tokens = 8;
  r.resume_at = 8;
  r.from_hbm = 4;
  r.from_cpu = 2;
  r.from_store = 2;
  r.reason = "prefix_end";
  r.logits_digest = 0xfedcba9876543210ull;
  auto j = json::parse(render_completion(r, "ok", "tiny", 1700000000));
  CHECK(j["id"] == "cmpl-42");
  CHECK(j["object"] == "text_completion");
  CHECK(j["created"] == 1700000000);
  CHECK(j["model"] == "tiny");
  CHECK(j["choices"][0]["index"] == 0);
  CHECK(j["choices"][0]["text"] == "ok");
  CHECK(j["choices"][0]["token_ids"] == json::array({'o', 'k', 257}));
  CHECK(j["choices"][0]["finish_reason"] == "stop");
  CHECK(j["choices"][0]["logprobs"].is_null());
  CHECK(j["usage"]["prompt_tokens"] == 10);
  CHECK(j["usage"]["completion_tokens"] == 3);
  CHECK(j["usage"]["total_tokens"] == 13);
  CHECK(j["usage"]["prompt_tokens_details"]["cached_tokens"] == 8);
  CHECK(j["ordo"]["resume_at"] == 8);
  CHECK(j["ordo"]["from"] == json{{"hbm", 4}, {"cpu", 2}, {"store", 2}});
  CHECK(j["ordo"]["reason"] == "prefix_end");
  CHECK(j["ordo"]["logits_digest"] == "fedcba9876543210");
  CHECK(format_digest(1) == "0000000000000001");
}

TEST_CASE("invalid UTF-8 text renders with a replacement char instead of throwing") {
  completion_result r;
  r.token_ids = {0xc3};
  std::string body;
  REQUIRE_NOTHROW(body = render_completion(r, "\xc3", "m", 0));
  CHECK(json::parse(body)["choices"][0]["text"] == "\xef\xbf\xbd");
  std::string chunk;
  REQUIRE_NOTHROW(chunk = render_stream_chunk(1, "\xa9", 0xa9, "m", 0));
  CHECK(json::parse(chunk.substr(6))["choices"][0]["text"] == "\xef\xbf\xbd");
}

TEST_CASE("stream chunks are SSE events; the final one carries usage and ordo") {
  std::string c = render_stream_chunk(7, "a", 'a', "tiny", 5);
  REQUIRE(c.rfind("data: ", 0) == 0);
  REQUIRE(c.size() > 8);
  CHECK(c.substr(c.size() - 2) == "\n\n");
  auto j = json::parse(c.substr(6));
  CHECK(j["id"] == "cmpl-7");
  CHECK(j["choices"][0]["text"] == "a");
  CHECK(j["choices"][0]["token_ids"] == json::array({'a'}));
  CHECK(j["choices"][0]["finish_reason"].is_null());
  CHECK_FALSE(j.contains("usage"));

  completion_result r;
  r.request_id = 7;
  r.token_ids = {'a', 'b'};
  r.finish_reason = "length";
  r.prompt_tokens = 3;
  r.logits_digest = 0xabc;
  std::string f = render_stream_final(r, "tiny", 5);
  auto fj = json::parse(f.substr(6));
  CHECK(fj["choices"][0]["finish_reason"] == "length");
  CHECK(fj["choices"][0]["text"] == "");
  CHECK(fj["usage"]["total_tokens"] == 5);
  CHECK(fj["ordo"]["logits_digest"] == "0000000000000abc");
  CHECK(render_stream_done() == "data: [DONE]\n\n");
}

TEST_CASE("errors render as OpenAI error objects") {
  auto j = json::parse(render_error(api_error{400, "bad \"x\"", "invalid_request_error"}));
  CHECK(j["error"]["message"] == "bad \"x\"");
  CHECK(j["error"]["type"] == "invalid_request_error");
  CHECK(j["error"]["code"].is_null());
  CHECK(render_stream_error(api_error{500, "m", "server_error"}).rfind("data: {\"error\"", 0) == 0);
  CHECK(to_api_error(completion_failed{1, "too long", "invalid_request_error"}).status == 400);
  auto e = to_api_error(completion_failed{1, "boom", ""});
  CHECK(e.status == 500);
  CHECK(e.type == "server_error");
}

TEST_CASE("media spans are parsed, hashes as hex or integer, and come back sorted by offset") {
  // A 10-token prompt; spans may be given in any order.
  const std::string prompt = R"("prompt":[1,2,3,4,5,6,7,8,9,10])";
  auto r = ok("{" + prompt + R"(,"media":[{"offset":6,"length":4,"hash":18446744073709551615},
                                          {"offset":0,"length":2,"hash":"00FFaa"},
                                          {"offset":2,"length":1,"hash":"0"}]})");
  REQUIRE(r.media.size() == 3);
  CHECK(r.media[0].offset == 0);
  CHECK(r.media[0].length == 2);
  CHECK(r.media[0].hash == 0xffaa);
  CHECK(r.media[1].offset == 2);
  CHECK(r.media[1].hash == 0);
  CHECK(r.media[2].offset == 6);
  CHECK(r.media[2].length == 4); // ends exactly at the prompt's end
  CHECK(r.media[2].hash == 18446744073709551615ull);
  CHECK(ok("{" + prompt + R"(,"media":[{"offset":0,"length":1,"hash":"ffffffffffffffff"}]})")
            .media[0].hash == UINT64_MAX);
  CHECK(ok("{" + prompt + R"(,"media":[{"offset":0,"length":1,"hash":42}]})").media[0].hash == 42);
  CHECK(ok("{" + prompt + R"(,"media":[]})").media.empty());
  CHECK(ok("{" + prompt + R"(,"media":null})").media.empty());
  CHECK(ok("{" + prompt + "}").media.empty());
  // Offsets count tokens of the tokenized text prompt (BOS first).
  CHECK(ok(R"({"prompt":"abc","media":[{"offset":1,"length":3,"hash":"a"}]})").media[0].length == 3);
}

TEST_CASE("malformed media spans are rejected naming the field") {
  const std::string prompt = R"({"prompt":[1,2,3,4,5,6,7,8,9,10],"media":)";
  struct bad_case {
    std::string media;
    std::string expect;
  };
  std::vector<bad_case> cases = {
      {R"({"offset":0,"length":1,"hash":"a"})", "media must be an array"},
      {R"("x")", "media must be an array"},
      {R"([5])", "media[0] must be an object"},
      {R"([{"length":1,"hash":"a"}])", "media[0].offset is required"},
      {R"([{"offset":-1,"length":1,"hash":"a"}])", "media[0].offset must be an integer between 0 and 9, got -1"},
      {R"([{"offset":1.5,"length":1,"hash":"a"}])", "media[0].offset must be an integer"},
      {R"([{"offset":"1","length":1,"hash":"a"}])", "media[0].offset must be an integer"},
      {R"([{"offset":10,"length":1,"hash":"a"}])", "media[0].offset must be an integer between 0 and 9"},
      {R"([{"offset":99999999999999999999,"length":1,"hash":"a"}])", "media[0].offset"},
      {R"([{"offset":0,"hash":"a"}])", "media[0].length is required"},
      {R"([{"offset":0,"length":0,"hash":"a"}])", "media[0].length must be an integer between 1 and 10, got 0"},
      {R"([{"offset":0,"length":-2,"hash":"a"}])", "media[0].length must be"},
      {R"([{"offset":0,"length":1,"hash":"a"},{"offset":8,"length":3,"hash":"b"}])",
       "media[1] covers prompt positions [8, 11) but the prompt has 10 tokens"},
      {R"([{"offset":0,"length":1}])", "media[0].hash is required"},
      {R"([{"offset":0,"length":1,"hash":""}])", "media[0].hash must be a string of 1 to 16 hex digits"},
      {R"([{"offset":0,"length":1,"hash":"12345678901234567"}])", "media[0].hash must be"},
      {R"([{"offset":0,"length":1,"hash":"xyz"}])", "media[0].hash must be"},
      {R"([{"offset":0,"length":1,"hash":"0x12"}])", "media[0].hash must be"},
      {R"([{"offset":0,"length":1,"hash":-1}])", "media[0].hash must be"},
      {R"([{"offset":0,"length":1,"hash":1.5}])", "media[0].hash must be"},
      {R"([{"offset":0,"length":1,"hash":[1]}])", "media[0].hash must be"},
      {R"([{"offset":4,"length":3,"hash":"a"},{"offset":2,"length":3,"hash":"b"}])",
       "media[1] [2, 5) overlaps media[0] [4, 7)"},
      {R"([{"offset":0,"length":2,"hash":"a"},{"offset":1,"length":1,"hash":"a"}])", "overlaps"},
  };
  for (const auto& c : cases) {
    auto e = err(prompt + c.media + "}");
    INFO(c.media << " -> " << e.message);
    CHECK(contains(e.message, c.expect));
  }
}
