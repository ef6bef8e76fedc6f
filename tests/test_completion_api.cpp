#include "runtime/completion_api.hpp"

#include "runtime/chat_template.hpp"
#include "runtime/json_guard.hpp"
#include "runtime/tokenizer.hpp"

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

using parser = std::variant<api_request, api_error> (*)(const std::string&, const api_limits&);

api_request parsed(const std::string& body, parser parse = parse_completion_request,
                   const api_limits& l = limits()) {
  auto r = parse(body, l);
  if (auto* e = std::get_if<api_error>(&r))
    FAIL("unexpected error: " << e->message);
  return std::get<api_request>(r);
}

completion_request ok(const std::string& body, const api_limits& l = limits()) {
  auto r = parsed(body, parse_completion_request, l);
  CHECK_FALSE(r.chat);
  return r.request;
}

api_request chat_ok(const std::string& body, const api_limits& l = limits()) {
  auto r = parsed(body, parse_chat_completion_request, l);
  CHECK(r.chat);
  return r;
}

api_error err(const std::string& body, const api_limits& l = limits(),
              parser parse = parse_completion_request) {
  auto r = parse(body, l);
  REQUIRE(std::holds_alternative<api_error>(r));
  auto e = std::get<api_error>(r);
  CHECK(e.status == 400);
  CHECK(e.type == "invalid_request_error");
  CHECK(e.message.size() <= api_message_max_bytes);
  return e;
}

api_error chat_err(const std::string& body, const api_limits& l = limits()) {
  return err(body, l, parse_chat_completion_request);
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
                 "tier must be one of: \"hbm\", \"cpu\", \"store\", got \"disk\""));
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
  CHECK(j["ordo"]["from"] == json{{"hbm", 4}, {"cpu", 2}, {"store", 2}, {"peer", 0}});
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
  REQUIRE_NOTHROW(chunk = render_stream_chunk(1, "\xa9", {0xa9}, "m", 0));
  CHECK(json::parse(chunk.substr(6))["choices"][0]["text"] == "\xef\xbf\xbd");
}

TEST_CASE("stream chunks are SSE events; the final one carries usage and ordo") {
  std::string c = render_stream_chunk(7, "a", {'a', 'b'}, "tiny", 5);
  REQUIRE(c.rfind("data: ", 0) == 0);
  REQUIRE(c.size() > 8);
  CHECK(c.substr(c.size() - 2) == "\n\n");
  auto j = json::parse(c.substr(6));
  CHECK(j["id"] == "cmpl-7");
  CHECK(j["choices"][0]["text"] == "a");
  CHECK(j["choices"][0]["token_ids"] == json::array({'a', 'b'}));
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
  CHECK(to_api_error(completion_failed{1, "queue full", "rate_limit_error"}).status == 429);
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
            .media[0]
            .hash == UINT64_MAX);
  CHECK(ok("{" + prompt + R"(,"media":[{"offset":0,"length":1,"hash":42}]})").media[0].hash == 42);
  CHECK(ok("{" + prompt + R"(,"media":[]})").media.empty());
  CHECK(ok("{" + prompt + R"(,"media":null})").media.empty());
  CHECK(ok("{" + prompt + "}").media.empty());
  // Offsets count tokens of the tokenized text prompt (BOS first).
  CHECK(ok(R"({"prompt":"abc","media":[{"offset":1,"length":3,"hash":"a"}]})").media[0].length ==
        3);
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
      {R"([{"offset":-1,"length":1,"hash":"a"}])",
       "media[0].offset must be an integer between 0 and 9, got -1"},
      {R"([{"offset":1.5,"length":1,"hash":"a"}])", "media[0].offset must be an integer"},
      {R"([{"offset":"1","length":1,"hash":"a"}])", "media[0].offset must be an integer"},
      {R"([{"offset":10,"length":1,"hash":"a"}])",
       "media[0].offset must be an integer between 0 and 9"},
      {R"([{"offset":99999999999999999999,"length":1,"hash":"a"}])", "media[0].offset"},
      {R"([{"offset":0,"hash":"a"}])", "media[0].length is required"},
      {R"([{"offset":0,"length":0,"hash":"a"}])",
       "media[0].length must be an integer between 1 and 10, got 0"},
      {R"([{"offset":0,"length":-2,"hash":"a"}])", "media[0].length must be"},
      {R"([{"offset":0,"length":1,"hash":"a"},{"offset":8,"length":3,"hash":"b"}])",
       "media[1] covers prompt positions [8, 11) but the prompt has 10 tokens"},
      {R"([{"offset":0,"length":1}])", "media[0].hash is required"},
      {R"([{"offset":0,"length":1,"hash":""}])",
       "media[0].hash must be a string of 1 to 16 hex digits"},
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

namespace {

// `inner` wrapped in `depth` arrays: [[[...inner...]]].
std::string nested(size_t depth, const std::string& inner = "1") {
  return std::string(depth, '[') + inner + std::string(depth, ']');
}

const std::string deep = nested(100000);

} // namespace

TEST_CASE("a value nested 100000 deep in any field is a bounded 400 naming it, not a crash") {
  for (const char* field : {"prompt", "max_tokens", "temperature", "seed", "stream", "cache_salt",
                            "media", "model", "n", "stop", "stream_options"}) {
    std::string body = std::string(R"({"prompt":"a",")") + field + "\":" + deep + "}";
    if (std::string(field) == "prompt")
      body = R"({"prompt":)" + deep + "}";
    auto e = err(body);
    INFO(field << " -> " << e.message);
    CHECK(e.message == std::string(field) + " nests arrays and objects more than 64 levels deep; " +
                           "a request body may nest at most 64 levels");
  }
  auto e = chat_err(R"({"messages":[{"role":"user","content":)" + deep + "}]}");
  CHECK(e.message ==
        "messages nests arrays and objects more than 64 levels deep; a request body may nest at "
        "most 64 levels");
  CHECK(chat_err(R"({"messages":[{"role":"user","content":"x"}],"max_completion_tokens":)" + deep +
                 "}")
            .message.rfind("max_completion_tokens nests", 0) == 0);
  CHECK(err(deep).message == "request body nests arrays and objects more than 64 levels deep; at "
                             "most 64 levels are allowed");
  auto evict = parse_evict_request(R"({"tier":)" + deep + "}");
  REQUIRE(std::holds_alternative<api_error>(evict));
  CHECK(std::get<api_error>(evict).message.rfind("tier nests arrays and objects more than 64", 0) ==
        0);
}

TEST_CASE("64 levels of nesting are allowed, 65 are not; brackets inside strings do not count") {
  // {"prompt":"a","x":[...]} : the body is level 1, so 63 arrays make 64 levels.
  ok(R"({"prompt":"a","x":)" + nested(63) + "}");
  CHECK(err(R"({"prompt":"a","x":)" + nested(64) + "}").message.rfind("x nests", 0) == 0);
  // A string full of brackets, quotes and escapes is one value at level 2.
  auto r = ok(R"({"prompt":"a","cache_salt":"[[[{{\"[[\\\\)" + std::string(1000, '[') + R"("})");
  CHECK(r.cache_salt.size() == 1000 + 10);
}

TEST_CASE("values in error messages are previews: short, whatever the value") {
  const std::string long_string(100000, 'x');
  auto e = err(R"({"prompt":"a","max_tokens":")" + long_string + R"("})");
  CHECK(e.message == "max_tokens must be an integer between 1 and 64, got string \"" +
                         std::string(56, 'x') + "...");
  std::string big_array = "[0";
  for (int i = 1; i < 100000; ++i)
    big_array += "," + std::to_string(i);
  big_array += "]";
  CHECK(err(R"({"prompt":"a","temperature":)" + big_array + "}").message ==
        "temperature must be a number between 0 and 2, got array [0,1,2,3,4,5,6,7,8,9,10,11,12,13,"
        "14,15,16,17,18,19,20,21,...");
  // 60 levels fit the depth limit but not the preview.
  CHECK(err(R"({"prompt":"a","seed":)" + nested(60) + "}").message ==
        "seed must be an integer between 0 and 18446744073709551615, got array " +
            std::string(57, '[') + "...");
}

TEST_CASE(
    "invalid JSON is reported with its byte offset, the field it is in, and the text before it") {
  CHECK(err(R"({"prompt":"a","temperature":1e999})").message ==
        "request body is not valid JSON (at byte 33, in \"temperature\", near "
        "\"{\"prompt\":\"a\",\"temperature\":1e999\"): expected an object such as "
        "{\"prompt\": \"Hello\", \"max_tokens\": 16}");
  CHECK(err("").message == "request body is not valid JSON (at byte 0): expected an object such "
                           "as {\"prompt\": \"Hello\", \"max_tokens\": 16}");
  // Invalid UTF-8 deep inside a long string: still names the member, the preview stays short.
  auto e = err(R"({"prompt":"a","cache_salt":")" + std::string(5000, 'y') + "\xff\"}");
  CHECK(contains(e.message, "in \"cache_salt\""));
  CHECK(e.message.size() < 250);
}

TEST_CASE("stop: a string or up to 4 strings, as byte token ids without BOS") {
  auto one = ok(R"({"prompt":"a","stop":"\n\n"})").stop;
  REQUIRE(one.size() == 1);
  CHECK(one[0].token_ids == std::vector<int32_t>{'\n', '\n'});
  auto many = ok(R"({"prompt":"a","stop":["END","é","1234"]})").stop;
  REQUIRE(many.size() == 3);
  CHECK(many[0].token_ids == std::vector<int32_t>{'E', 'N', 'D'});
  CHECK(many[1].token_ids == std::vector<int32_t>{0xc3, 0xa9}); // UTF-8 bytes
  CHECK(ok(R"({"prompt":"a","stop":null})").stop.empty());
  CHECK(ok(R"({"prompt":"a","stop":[]})").stop.empty());
  CHECK(ok(R"({"prompt":"a","stop":")" + std::string(64, 's') + R"("})").stop[0].token_ids.size() ==
        64);

  CHECK(err(R"({"prompt":"a","stop":5})").message ==
        "stop must be a string or an array of at most 4 strings, got an integer 5");
  CHECK(err(R"({"prompt":"a","stop":["a","b","c","d","e"]})").message ==
        "stop holds 5 strings; at most 4 are allowed");
  CHECK(err(R"({"prompt":"a","stop":["a",null]})").message == "stop[1] must be a string, got null");
  CHECK(err(R"({"prompt":"a","stop":""})").message ==
        "stop is empty: a stop string needs at least one character");
  CHECK(err(R"({"prompt":"a","stop":["x",""]})").message.rfind("stop[1] is empty", 0) == 0);
  CHECK(err(R"({"prompt":"a","stop":["x",")" + std::string(65, 's') + R"("]})").message ==
        "stop[1] is 65 bytes long; a stop string may have at most 64 bytes");
}

TEST_CASE("stream_options.include_usage needs stream: true") {
  auto r = parsed(R"({"prompt":"a","stream":true,"stream_options":{"include_usage":true}})");
  CHECK(r.include_usage);
  CHECK(r.request.stream);
  CHECK_FALSE(parsed(R"({"prompt":"a","stream":true,"stream_options":{}})").include_usage);
  CHECK_FALSE(parsed(R"({"prompt":"a","stream":true})").include_usage);
  CHECK_FALSE(parsed(R"({"prompt":"a","stream_options":null})").include_usage);
  CHECK(err(R"({"prompt":"a","stream_options":{"include_usage":true}})").message ==
        "stream_options is only allowed when stream is true");
  CHECK(err(R"({"prompt":"a","stream":false,"stream_options":{"include_usage":true}})").message ==
        "stream_options is only allowed when stream is true");
  CHECK(err(R"({"prompt":"a","stream":true,"stream_options":true})").message ==
        "stream_options must be an object such as {\"include_usage\": true}, got boolean true");
  CHECK(err(R"({"prompt":"a","stream":true,"stream_options":{"include_usage":"yes"}})").message ==
        "stream_options.include_usage must be true or false, got string \"yes\"");
}

TEST_CASE("chat messages become the prompt through the chat template") {
  auto r = chat_ok(R"({"messages":[{"role":"system","content":"Be terse."},
                                   {"role":"user","content":"Hi"}],
                       "max_tokens":5,"temperature":0.5,"seed":7,"stop":"!","model":"m"})");
  CHECK(r.request.prompt ==
        render_chat_prompt({{chat_role::system, "Be terse."}, {chat_role::user, "Hi"}}));
  CHECK(r.request.max_tokens == 5);
  CHECK(r.request.temperature == 0.5f);
  CHECK(r.request.seed == 7);
  REQUIRE(r.request.stop.size() == 1);
  CHECK(r.request.stop[0].token_ids == std::vector<int32_t>{'!'});
  CHECK_FALSE(r.include_usage);
  // Text parts are joined with a newline; an assistant turn may come last.
  auto parts = chat_ok(R"({"messages":[{"role":"user","content":[{"type":"text","text":"a"},
                                                                   {"type":"text","text":"b"}]},
                                       {"role":"assistant","content":"c"}]})");
  CHECK(parts.request.prompt ==
        render_chat_prompt({{chat_role::user, "a\nb"}, {chat_role::assistant, "c"}}));
  // max_completion_tokens is the chat name of max_tokens; both may be given if they agree.
  const std::string m = R"("messages":[{"role":"user","content":"x"}])";
  CHECK(chat_ok("{" + m + R"(,"max_completion_tokens":3})").request.max_tokens == 3);
  CHECK(chat_ok("{" + m + R"(,"max_completion_tokens":3,"max_tokens":3})").request.max_tokens == 3);
  CHECK(chat_ok("{" + m + "}").request.max_tokens == 16);
  CHECK(chat_ok("{" + m + R"(,"stream":true,"stream_options":{"include_usage":true}})")
            .include_usage);
  // The completions API does not know max_completion_tokens (an unknown field is ignored).
  CHECK(ok(R"({"prompt":"a","max_completion_tokens":"nonsense"})").max_tokens == 16);
}

TEST_CASE("chat errors name the field") {
  const std::string m = R"("messages":[{"role":"user","content":"x"}])";
  struct bad_case {
    std::string body;
    std::string message;
  };
  std::vector<bad_case> cases = {
      {R"({"prompt":"a"})", "messages is required: a non-empty array of {\"role\": "
                            "\"system\"|\"user\"|\"assistant\", \"content\": ...} objects"},
      {R"({"messages":"hi"})", "messages must be a non-empty array of {\"role\": "
                               "\"system\"|\"user\"|\"assistant\", \"content\": ...} objects, got "
                               "string \"hi\""},
      {R"({"messages":[]})", "messages is empty: give at least one message"},
      {R"({"messages":[{"role":"user","content":"x"},3]})",
       "messages[1] must be an object {\"role\": ..., \"content\": ...}, got an integer 3"},
      {R"({"messages":[{"content":"x"}]})",
       "messages[0].role is required: one of \"system\", \"user\", \"assistant\""},
      {R"({"messages":[{"role":"user","content":"x"},{"role":"user","content":"y"},
                       {"role":"tool","content":"z"}]})",
       "messages[2].role must be one of \"system\", \"user\", \"assistant\", got \"tool\""},
      {R"({"messages":[{"role":1,"content":"x"}]})",
       "messages[0].role must be one of \"system\", \"user\", \"assistant\", got an integer 1"},
      {R"({"messages":[{"role":"user"}]})",
       "messages[0].content is required: a string or an array of {\"type\": \"text\", \"text\": "
       "...} parts"},
      {R"({"messages":[{"role":"user","content":{"text":"x"}}]})",
       "messages[0].content must be a string or an array of {\"type\": \"text\", \"text\": ...} "
       "parts, got object {\"text\":\"x\"}"},
      {R"({"messages":[{"role":"user","content":["x"]}]})",
       "messages[0].content[0] must be an object {\"type\": \"text\", \"text\": ...}, got string "
       "\"x\""},
      {R"({"messages":[{"role":"user","content":[{"type":"image_url","image_url":{}}]}]})",
       "messages[0].content[0].type must be \"text\" (only text parts are supported), got "
       "\"image_url\""},
      {R"({"messages":[{"role":"user","content":[{"text":"x"}]}]})",
       "messages[0].content[0].type must be \"text\" (only text parts are supported), got none"},
      {R"({"messages":[{"role":"user","content":[{"type":"text","text":5}]}]})",
       "messages[0].content[0].text must be a string, got an integer 5"},
      {"{" + m + R"(,"max_completion_tokens":0})",
       "max_completion_tokens must be an integer between 1 and 64, got 0"},
      {"{" + m + R"(,"max_completion_tokens":3,"max_tokens":4})",
       "max_completion_tokens 3 and max_tokens 4 disagree: give one of them"},
      {"{" + m + R"(,"max_completion_tokens":60})",
       "messages make a prompt of 27 tokens (with the chat template) plus max_completion_tokens 60 "
       "exceeds the context of 64 tokens"},
      {"{" + m + R"(,"n":3})", "n must be 1 (one completion per request), got 3"},
      {"{" + m + R"(,"media":[]})", "media is not supported on /v1/chat/completions (its offsets "
                                    "count prompt tokens); send the prompt to /v1/completions"},
      {"{" + m + R"(,"stop":[1]})", "stop[0] must be a string, got an integer 1"},
      {"[]", "request body must be a JSON object such as {\"messages\": [{\"role\": \"user\", "
             "\"content\": \"Hello\"}]}, got array"},
  };
  for (const auto& c : cases) {
    INFO(c.body);
    CHECK(chat_err(c.body).message == c.message);
  }
}

namespace {

completion_result finished() {
  completion_result r;
  r.request_id = 9;
  r.token_ids = {'h', 'i'};
  r.finish_reason = "stop";
  r.prompt_tokens = 20;
  r.cached_tokens = 16;
  r.resume_at = 16;
  r.from_hbm = 16;
  r.reason = "prefix_end";
  r.logits_digest = 0x1234;
  return r;
}

json event(const std::string& sse_text) {
  REQUIRE(sse_text.rfind("data: ", 0) == 0);
  REQUIRE(sse_text.size() > 8);
  REQUIRE(sse_text.substr(sse_text.size() - 2) == "\n\n");
  return json::parse(sse_text.substr(6));
}

} // namespace

TEST_CASE("a chat completion renders as OpenAI's chat.completion with the ordo object") {
  auto j = json::parse(render_chat_completion(finished(), "hi", "tiny", 1700000000));
  CHECK(j["id"] == "chatcmpl-9");
  CHECK(j["object"] == "chat.completion");
  CHECK(j["created"] == 1700000000);
  CHECK(j["model"] == "tiny");
  REQUIRE(j["choices"].size() == 1);
  CHECK(j["choices"][0]["index"] == 0);
  CHECK(j["choices"][0]["message"] == json{{"role", "assistant"}, {"content", "hi"}});
  CHECK(j["choices"][0]["finish_reason"] == "stop");
  CHECK(j["choices"][0]["logprobs"].is_null());
  CHECK(j["choices"][0]["token_ids"] == json::array({'h', 'i'}));
  CHECK(j["usage"]["prompt_tokens"] == 20);
  CHECK(j["usage"]["completion_tokens"] == 2);
  CHECK(j["usage"]["total_tokens"] == 22);
  CHECK(j["usage"]["prompt_tokens_details"]["cached_tokens"] == 16);
  CHECK(j["ordo"]["resume_at"] == 16);
  CHECK(j["ordo"]["logits_digest"] == "0000000000001234");
}

TEST_CASE("a chat stream: role first, then content deltas, then finish_reason, usage, [DONE]") {
  auto start = event(render_chat_stream_role(9, "tiny", 5));
  CHECK(start["id"] == "chatcmpl-9");
  CHECK(start["object"] == "chat.completion.chunk");
  CHECK(start["created"] == 5);
  CHECK(start["choices"][0]["delta"] == json{{"role", "assistant"}, {"content", ""}});
  CHECK(start["choices"][0]["finish_reason"].is_null());

  auto chunk = event(render_chat_stream_chunk(9, "h", {'h'}, "tiny", 5));
  CHECK(chunk["object"] == "chat.completion.chunk");
  CHECK(chunk["choices"][0]["index"] == 0);
  CHECK(chunk["choices"][0]["delta"] == json{{"content", "h"}});
  CHECK(chunk["choices"][0]["token_ids"] == json::array({'h'}));
  CHECK(chunk["choices"][0]["finish_reason"].is_null());
  CHECK_FALSE(chunk.contains("usage"));
  CHECK(event(render_chat_stream_chunk(9, "\xc3", {0xc3}, "m",
                                       0))["choices"][0]["delta"]["content"] == "\xef\xbf\xbd");

  auto final_event = event(render_chat_stream_final(finished(), "tiny", 5));
  CHECK(final_event["id"] == "chatcmpl-9");
  CHECK(final_event["choices"][0]["delta"] == json::object());
  CHECK(final_event["choices"][0]["finish_reason"] == "stop");
  CHECK(final_event["ordo"]["resume_at"] == 16);
  CHECK_FALSE(final_event.contains("usage")); // only in the usage chunk: counted once

  auto usage = event(render_usage_chunk(finished(), /*chat=*/true, "tiny", 5));
  CHECK(usage["id"] == "chatcmpl-9");
  CHECK(usage["object"] == "chat.completion.chunk");
  CHECK(usage["choices"] == json::array());
  CHECK(usage["usage"]["completion_tokens"] == 2);
  CHECK(usage["usage"]["total_tokens"] == 22);
}

TEST_CASE("include_usage on completions: a usage chunk with no choices") {
  auto usage = event(render_usage_chunk(finished(), /*chat=*/false, "tiny", 5));
  CHECK(usage["id"] == "cmpl-9");
  CHECK(usage["object"] == "text_completion");
  CHECK(usage["choices"] == json::array());
  CHECK(usage["usage"]["prompt_tokens"] == 20);
}

TEST_CASE("GET /v1/models lists the served model") {
  CHECK(json::parse(render_models("ordo-tiny", 1700000000)) ==
        json::parse(R"({"object":"list","data":[{"id":"ordo-tiny","object":"model",
                        "created":1700000000,"owned_by":"ordo"}]})"));
}

TEST_CASE("a model without a tokenizer here takes token ids and refuses text, chat and stop strings", "[api]") {
  api_limits l = limits();
  l.text_prompts = false; // a Hugging Face checkpoint until issue 37 part 1b
  CHECK(ok(R"({"prompt": [3, 1, 4], "max_tokens": 2})", l).prompt == std::vector<int32_t>{3, 1, 4});
  CHECK(ok(R"({"prompt": [[3, 1, 4]], "max_tokens": 2})", l).prompt == std::vector<int32_t>{3, 1, 4});
  for (const char* body : {R"({"prompt": "Hello"})", R"({"prompt": ["Hello"]})"}) {
    const std::string m = err(body, l).message;
    CHECK(contains(m, "a text prompt needs a tokenizer"));
    CHECK(contains(m, "send the prompt as token ids"));
  }
  CHECK(contains(err(R"({"prompt": [1, 2], "stop": "x"})", l).message, "stop needs a tokenizer"));
  CHECK(contains(chat_err(R"({"messages": [{"role": "user", "content": "Hi"}]})", l).message,
                 "use /v1/completions with token ids"));
  CHECK(ok(R"({"prompt": "Hello"})").prompt.size() == 6); // with a tokenizer: BOS + 5 bytes
}
