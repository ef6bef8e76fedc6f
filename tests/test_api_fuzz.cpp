// Structure-aware fuzzing of the request parsers: valid completion and chat bodies, each
// mutated once (one field's value replaced by a wrong type, deep nesting, odd numbers, long or
// ill-formed strings, a duplicate key; or the text truncated or hit by random bytes). Every
// case must parse or be a 400 of bounded length, and a 400 for a one-field mutation must name
// that field. Values are assembled as text, so the test itself never builds a deep value.
#include "runtime/completion_api.hpp"

#include "runtime/json_guard.hpp"

#include <catch.hpp>
#include <nlohmann/json.hpp>

#include <cstring>
#include <functional>
#include <optional>
#include <random>

using namespace ordo;
using json = nlohmann::json;

namespace {

constexpr int num_cases = 20000;
constexpr int max_context = 4096;

api_limits fuzz_limits() {
  api_limits l;
  l.max_context = max_context;
  l.vocab_size = 258;
  return l;
}

std::mt19937_64 rng(20261203);

size_t below(size_t n) { return std::uniform_int_distribution<size_t>(0, n - 1)(rng); }
bool chance(double p) { return std::uniform_real_distribution<double>(0, 1)(rng) < p; }
template <class T> const T& pick(const std::vector<T>& v) { return v[below(v.size())]; }

// Short text with what JSON must escape and a 2-byte UTF-8 character.
std::string random_text(size_t min_len, size_t max_len) {
  static const std::vector<std::string> pieces = {"a", "b", "z", " ", "\"", "\\", "\n", "\xc3\xa9",
                                                  "{", "]", ",", ":", "0",  "/",  "\t"};
  std::string s;
  size_t n = min_len + below(max_len - min_len + 1);
  while (s.size() < n)
    s += pick(pieces);
  return s;
}

std::string json_string(const std::string& s) { return json(s).dump(); }

struct member {
  std::string key;
  std::string value; // JSON text
};

std::string object_text(const std::vector<member>& members) {
  std::string s = "{";
  for (size_t i = 0; i < members.size(); ++i)
    s += (i ? "," : "") + json_string(members[i].key) + ":" + members[i].value;
  return s + "}";
}

// A request body kept as parts, so one value can be swapped for any text.
struct body_parts {
  bool chat = false;
  std::vector<std::vector<member>> messages; // chat: rendered as the first member
  std::optional<std::string> messages_text;  // replaces the rendering of `messages`
  std::vector<member> members;

  std::string text() const {
    std::vector<member> all;
    if (chat && messages_text) {
      all.push_back({"messages", *messages_text});
    } else if (chat) {
      std::string m = "[";
      for (size_t i = 0; i < messages.size(); ++i)
        m += (i ? "," : "") + object_text(messages[i]);
      all.push_back({"messages", m + "]"});
    }
    all.insert(all.end(), members.begin(), members.end());
    return object_text(all);
  }
  const member* find(const std::string& key) const {
    for (const auto& m : members)
      if (m.key == key)
        return &m;
    return nullptr;
  }
  void set(const std::string& key, std::string value) {
    for (auto& m : members)
      if (m.key == key) {
        m.value = std::move(value);
        return;
      }
    members.push_back({key, std::move(value)});
  }
};

std::string content_value() {
  if (chance(0.7))
    return json_string(random_text(0, 40));
  std::string parts = "[";
  for (size_t i = 0, n = 1 + below(3); i < n; ++i)
    parts += (i ? "," : "") +
             object_text({{"type", "\"text\""}, {"text", json_string(random_text(0, 20))}});
  return parts + "]";
}

body_parts valid_body(bool chat) {
  body_parts b;
  b.chat = chat;
  if (chat) {
    static const std::vector<std::string> roles = {"\"system\"", "\"user\"", "\"assistant\""};
    for (size_t i = 0, n = 1 + below(4); i < n; ++i)
      b.messages.push_back({{"role", pick(roles)}, {"content", content_value()}});
  } else if (chance(0.5)) {
    b.set("prompt", json_string(random_text(1, 40)));
  } else {
    json ids = json::array();
    for (size_t i = 0, n = 4 + below(20); i < n; ++i)
      ids.push_back(below(258));
    b.set("prompt", ids.dump());
    if (chance(0.2))
      b.set("media", R"([{"offset":1,"length":2,"hash":"ab"}])");
  }
  if (chance(0.7))
    b.set(chat && chance(0.5) ? "max_completion_tokens" : "max_tokens",
          std::to_string(1 + below(64)));
  if (chance(0.5))
    b.set("temperature", json(std::uniform_real_distribution<double>(0, 2)(rng)).dump());
  if (chance(0.5))
    b.set("seed", std::to_string(rng()));
  if (chance(0.5)) {
    bool stream = chance(0.5);
    b.set("stream", stream ? "true" : "false");
    if (stream && chance(0.5))
      b.set("stream_options",
            chance(0.5) ? R"({"include_usage":true})" : R"({"include_usage":false})");
  }
  if (chance(0.3))
    b.set("cache_salt", json_string(random_text(0, 20)));
  if (chance(0.5))
    b.set("model", "\"ordo-tiny\"");
  if (chance(0.2))
    b.set("n", "1");
  if (chance(0.4)) {
    if (chance(0.5)) {
      b.set("stop", json_string(random_text(1, 8)));
    } else {
      json stops = json::array();
      for (size_t i = 0, n = 1 + below(4); i < n; ++i)
        stops.push_back(random_text(1, 8));
      b.set("stop", stops.dump());
    }
  }
  if (chance(0.2))
    b.set("user", "\"someone\"");
  std::shuffle(b.members.begin(), b.members.end(), rng);
  return b;
}

// --- mutated values, as JSON text ---------------------------------------------------------------

const std::vector<std::string> wrong_values = {"0",
                                               "1",
                                               "-1",
                                               "7",
                                               "64",
                                               "2.5",
                                               "1.0",
                                               "-0.5",
                                               "\"\"",
                                               "\"x\"",
                                               "\"16\"",
                                               "\"user\"",
                                               "\"hbm\"",
                                               "true",
                                               "false",
                                               "null",
                                               "[]",
                                               "{}",
                                               "[1]",
                                               "[\"a\"]",
                                               "[[1]]",
                                               "[1.5]",
                                               "[\"a\",\"b\",\"c\",\"d\",\"e\"]",
                                               R"({"include_usage":true})",
                                               R"({"include_usage":1})",
                                               R"([{"role":"user"}])",
                                               R"([{"role":"user","content":"x"}])",
                                               R"({"a":[1,{"b":null}]})"};

const std::vector<std::string> odd_numbers = {"18446744073709551615",
                                              "18446744073709551616",
                                              "-9223372036854775808",
                                              "-9223372036854775809",
                                              "99999999999999999999999999999999",
                                              "1e308",
                                              "-1e308",
                                              "1e400",
                                              "-1e400",
                                              "1e-400",
                                              "4096",
                                              "4097",
                                              "2147483648",
                                              "-2147483649",
                                              "0.0",
                                              "-0",
                                              "2",
                                              "2.0000001",
                                              "1E2",
                                              "3e0"};

// `depth` nested arrays or objects around a scalar; an object level is {"k": ...}.
std::string nested_value(size_t depth) {
  bool objects = chance(0.3);
  std::string open = objects ? "{\"k\":" : "[", close = objects ? "}" : "]";
  std::string s;
  s.reserve(depth * (open.size() + 1) + 4);
  for (size_t i = 0; i < depth; ++i)
    s += open;
  s += pick(std::vector<std::string>{"1", "\"s\"", "null", "[]"});
  for (size_t i = 0; i < depth; ++i)
    s += close;
  return s;
}

std::string invalid_utf8_string() {
  static const std::vector<std::string> bad = {
      "\xff", "\xc3", "\xed\xa0\x80", "\xc0\xaf", "\xf8\x88\x80\x80\x80", "\x80"};
  std::string s = random_text(0, 10);
  s = "\"" + json(s).dump().substr(1);
  s.pop_back(); // an open string literal: the escaped text without its closing quote
  return s + pick(bad) + "x\"";
}

// Deepest nesting of a JSON text, counted naively (the test's own, separate from the guard).
size_t depth_of(const std::string& text) {
  size_t depth = 0, deepest = 0;
  bool in_string = false, escaped = false;
  for (char c : text) {
    if (in_string) {
      if (escaped)
        escaped = false;
      else if (c == '\\')
        escaped = true;
      else if (c == '"')
        in_string = false;
      continue;
    }
    if (c == '"')
      in_string = true;
    else if (c == '[' || c == '{')
      deepest = std::max(deepest, ++depth);
    else if ((c == ']' || c == '}') && depth > 0)
      --depth;
  }
  return deepest;
}

// --- the oracle ---------------------------------------------------------------------------------

enum class verdict { valid, invalid, either };

struct expectation {
  verdict v = verdict::valid;
  std::string name; // a 400 must name it (when v == invalid)
};

// An integer in [lo, hi] (0 <= lo <= hi).
bool is_int_between(const json& v, uint64_t lo, uint64_t hi) {
  if (!v.is_number_integer())
    return false;
  if (!v.is_number_unsigned() && v.get<int64_t>() < 0)
    return false;
  return v.get<uint64_t>() >= lo && v.get<uint64_t>() <= hi;
}

bool is_stop_string(const json& v) {
  return v.is_string() && !v.get_ref<const std::string&>().empty() &&
         v.get_ref<const std::string&>().size() <= 64;
}

// The verdict on body `b` whose field `key` now holds `value` (already parsed). `prompt_len` and
// `max_tokens` are those of the unmutated body.
expectation judge_field(const body_parts& b, const std::string& key, const json& value,
                        size_t prompt_len, int max_tokens) {
  auto valid_if = [&](bool ok) { return expectation{ok ? verdict::valid : verdict::invalid, key}; };
  auto other = [&](const char* k) -> std::optional<json> {
    for (const auto& m : b.members)
      if (m.key == k && m.key != key)
        return json::parse(m.value);
    return std::nullopt;
  };
  const bool absent = value.is_null();
  if (key == "prompt") {
    if (b.find("media"))
      return {verdict::either, key};
    if (value.is_string())
      return valid_if(!value.get_ref<const std::string&>().empty() &&
                      value.get_ref<const std::string&>().size() + 1 + max_tokens <= max_context);
    if (!value.is_array() || value.empty())
      return valid_if(false);
    json ids = value;
    if (value[0].is_string() || value[0].is_array()) {
      if (value.size() != 1)
        return valid_if(false);
      if (value[0].is_string())
        return valid_if(!value[0].get_ref<const std::string&>().empty() &&
                        value[0].get_ref<const std::string&>().size() + 1 + max_tokens <=
                            max_context);
      ids = value[0];
      if (ids.empty())
        return valid_if(false);
    }
    for (const json& t : ids)
      if (!is_int_between(t, 0, 257))
        return valid_if(false);
    return valid_if(ids.size() + max_tokens <= max_context);
  }
  if (key == "messages") {
    if (!value.is_array() || value.empty())
      return valid_if(false);
    for (const json& m : value)
      if (!m.is_object())
        return valid_if(false);
    return {verdict::either, key};
  }
  if (key == "max_tokens" || key == "max_completion_tokens") {
    if (key == "max_completion_tokens" && !b.chat)
      return {verdict::valid, key}; // unknown to completions
    if (absent)
      return {verdict::either, key}; // the default may or may not fit with the other field
    if (!is_int_between(value, 1, max_context) ||
        prompt_len + value.get<int64_t>() > size_t(max_context))
      return valid_if(false);
    auto o = other(key == "max_tokens" ? "max_completion_tokens" : "max_tokens");
    if (b.chat && o && !o->is_null() && *o != value)
      return valid_if(false);
    return valid_if(true);
  }
  if (key == "temperature")
    return valid_if(absent ||
                    (value.is_number() && value.get<double>() >= 0 && value.get<double>() <= 2));
  if (key == "seed")
    return valid_if(absent || (value.is_number_integer() &&
                               (value.is_number_unsigned() || value.get<int64_t>() >= 0)));
  if (key == "stream") {
    auto options = other("stream_options");
    bool has_options = options && !options->is_null();
    if (!absent && !value.is_boolean())
      return valid_if(false);
    return valid_if(!has_options || value == true);
  }
  if (key == "stream_options") {
    if (absent)
      return valid_if(true);
    auto stream = other("stream");
    if (!stream || *stream != true || !value.is_object())
      return valid_if(false);
    auto u = value.find("include_usage");
    return valid_if(u == value.end() || u->is_null() || u->is_boolean());
  }
  if (key == "cache_salt" || key == "model")
    return valid_if(absent || value.is_string());
  if (key == "n")
    return valid_if(absent || (value.is_number_integer() && value.get<int64_t>() == 1));
  if (key == "stop") {
    if (absent || is_stop_string(value))
      return valid_if(true);
    if (!value.is_array() || value.size() > 4)
      return valid_if(false);
    for (const json& s : value)
      if (!is_stop_string(s))
        return valid_if(false);
    return valid_if(true);
  }
  if (key == "media") {
    if (b.chat)
      return valid_if(absent);
    if (absent || (value.is_array() && value.empty()))
      return valid_if(true);
    return {value.is_array() ? verdict::either : verdict::invalid, key};
  }
  return {verdict::valid, key}; // an unknown field
}

// The verdict on a message member messages[i].<key> holding `value`.
expectation judge_message_field(const std::string& key, const json& value, size_t prompt_len,
                                size_t old_len, int max_tokens, const std::string& where) {
  const std::string name = where + "." + key;
  if (key == "role") {
    bool ok = value.is_string() && (value == "system" || value == "user" || value == "assistant");
    return {ok ? verdict::valid : verdict::invalid, name};
  }
  size_t len = 0;
  if (value.is_string()) {
    len = value.get_ref<const std::string&>().size();
  } else if (value.is_array()) {
    for (size_t j = 0; j < value.size(); ++j) {
      const json& p = value[j];
      if (!p.is_object() || !p.contains("type") || p["type"] != "text" || !p.contains("text") ||
          !p["text"].is_string())
        return {verdict::invalid, name};
      len += p["text"].get_ref<const std::string&>().size() + (j ? 1 : 0);
    }
  } else {
    return {verdict::invalid, name};
  }
  if (prompt_len - old_len + len + max_tokens > size_t(max_context))
    return {verdict::invalid, "messages"}; // "messages make a prompt of N tokens ..."
  return {verdict::valid, name};
}

size_t content_length(const std::string& text) {
  json v = json::parse(text);
  if (v.is_string())
    return v.get_ref<const std::string&>().size();
  size_t len = 0;
  for (size_t j = 0; j < v.size(); ++j)
    len += v[j]["text"].get_ref<const std::string&>().size() + (j ? 1 : 0);
  return len;
}

// A message names `field`: it starts with it (then a space, '[' or '.'), or holds it between
// spaces, or quoted (a JSON syntax error "in \"field\"").
bool names(const std::string& message, const std::string& field) {
  if (message.rfind(field, 0) == 0 &&
      (message.size() == field.size() || std::strchr(" [.", message[field.size()])))
    return true;
  return message.find(" " + field + " ") != std::string::npos ||
         message.find("\"" + field + "\"") != std::string::npos;
}

enum class family { wrong_type, deep, odd_number, long_string, bad_utf8 };

family random_family() {
  return pick(std::vector<family>{family::wrong_type, family::deep, family::odd_number,
                                  family::long_string, family::bad_utf8});
}

// One value for a mutated field, as JSON text (invalid JSON for bad_utf8 and overflows).
std::string mutated_value(family f) {
  switch (f) {
  case family::wrong_type:
    return pick(wrong_values);
  case family::deep: {
    static const std::vector<size_t> depths = {3, 10, 40, 62, 63, 64, 65, 66, 200, 5000, 100000};
    return nested_value(pick(depths));
  }
  case family::odd_number:
    return pick(odd_numbers);
  case family::long_string: {
    static const std::vector<size_t> lengths = {63, 64, 65, 100, 5000, 100000};
    size_t n = pick(lengths);
    if (chance(0.5))
      return json_string(std::string(n, 'a'));
    std::string s; // n bytes of 2-byte characters (one byte more when n is odd)
    while (s.size() < n)
      s += "\xc3\xa9";
    return json_string(s);
  }
  case family::bad_utf8:
    return invalid_utf8_string();
  }
  return "null";
}

const std::vector<std::string> completion_fields = {
    "prompt", "max_tokens", "temperature", "seed",  "stream", "stream_options",       "cache_salt",
    "model",  "n",          "stop",        "media", "user",   "max_completion_tokens"};
const std::vector<std::string> chat_fields = {"messages",
                                              "max_tokens",
                                              "max_completion_tokens",
                                              "temperature",
                                              "seed",
                                              "stream",
                                              "stream_options",
                                              "cache_salt",
                                              "model",
                                              "n",
                                              "stop",
                                              "media",
                                              "user"};

struct outcome {
  int num_valid = 0, num_invalid = 0, num_failed = 0;
};

// The top-level verdict for `value_text` at nesting `depth_above` inside member `top`, before
// the value's meaning: too deep or not JSON is always a 400 naming `top`.
std::optional<expectation> judge_text(const std::string& value_text, size_t depth_above,
                                      const std::string& top, json& parsed) {
  if (depth_of(value_text) + depth_above > size_t(json_max_depth))
    return expectation{verdict::invalid, top};
  parsed = json::parse(value_text, nullptr, false);
  if (parsed.is_discarded())
    return expectation{verdict::invalid, top};
  return std::nullopt;
}

} // namespace

TEST_CASE("fuzzed completion and chat bodies parse or fail with a bounded 400 naming the field") {
  const api_limits limits = fuzz_limits();
  outcome seen;
  for (int i = 0; i < num_cases && seen.num_failed < 10; ++i) {
    INFO("case " << i);
    const bool chat = chance(0.5);
    auto parse = chat ? parse_chat_completion_request : parse_completion_request;
    body_parts b = valid_body(chat);
    const std::string base_text = b.text();
    auto base = parse(base_text, limits);
    if (!std::holds_alternative<api_request>(base)) {
      FAIL_CHECK("a valid body was rejected: " << std::get<api_error>(base).message << "\n"
                                               << base_text);
      ++seen.num_failed;
      continue;
    }
    const size_t prompt_len = std::get<api_request>(base).request.prompt.size();
    const int max_tokens = std::get<api_request>(base).request.max_tokens;

    std::string text;
    expectation expect;
    bool check_name = true;
    const size_t kind = below(100);
    if (kind < 50) { // one top-level field's value
      const std::string key = pick(chat ? chat_fields : completion_fields);
      std::string value = mutated_value(kind < 25   ? family::wrong_type
                                        : kind < 33 ? family::deep
                                        : kind < 40 ? family::odd_number
                                        : kind < 46 ? family::long_string
                                                    : family::bad_utf8);
      if (key == "messages")
        b.messages_text = value;
      else
        b.set(key, value);
      text = b.text();
      json parsed;
      auto early = judge_text(value, 1, key, parsed);
      expect = early ? *early : judge_field(b, key, parsed, prompt_len, max_tokens);
    } else if (kind < 62 && chat) { // one member of one message
      size_t m = below(b.messages.size());
      const std::string key = chance(0.5) ? "role" : "content";
      const std::string where = "messages[" + std::to_string(m) + "]";
      size_t old_len = 0;
      for (auto& mem : b.messages[m])
        if (mem.key == "content")
          old_len = content_length(mem.value);
      std::string value = chance(0.3) ? content_value() : mutated_value(random_family());
      for (auto& mem : b.messages[m])
        if (mem.key == key)
          mem.value = value;
      text = b.text();
      json parsed;
      auto early = judge_text(value, 3, "messages", parsed);
      expect = early ? *early
                     : judge_message_field(key, parsed, prompt_len, key == "content" ? old_len : 0,
                                           max_tokens, where);
    } else if (kind < 74) { // a duplicate key: the last one counts
      const std::string key = pick(chat ? chat_fields : completion_fields);
      std::string value = chance(0.5) ? pick(wrong_values) : pick(odd_numbers);
      json parsed = json::parse(value, nullptr, false);
      // (messages is always rendered first, so its duplicate comes last)
      if (!parsed.is_discarded() && b.find(key) != nullptr && chance(0.5)) {
        // the duplicate first, the original last: the original's value counts
        b.members.insert(b.members.begin(), {key, value});
        expect = {verdict::valid, key};
      } else {
        b.members.push_back({key, value});
        if (parsed.is_discarded())
          expect = {verdict::invalid, key};
        else if (key == "messages")
          expect = judge_field(b, key, parsed, prompt_len, max_tokens);
        else {
          body_parts replaced = b;
          replaced.members.pop_back();
          replaced.set(key, value);
          expect = judge_field(replaced, key, parsed, prompt_len, max_tokens);
        }
      }
      text = b.text();
    } else if (kind < 87) { // truncated at a random offset: never valid
      text = base_text.substr(0, below(base_text.size()));
      expect = {verdict::invalid, ""};
      check_name = false;
    } else { // random bytes overwritten or inserted
      text = base_text;
      for (size_t n = 1 + below(4); n > 0; --n) {
        char c = static_cast<char>(below(256));
        if (chance(0.5))
          text[below(text.size())] = c;
        else
          text.insert(below(text.size() + 1), 1, c);
      }
      expect = {verdict::either, ""};
      check_name = false;
    }

    auto got = parse(text, limits);
    const std::string shown = json_text_preview(text, 300);
    if (auto* e = std::get_if<api_error>(&got)) {
      ++seen.num_invalid;
      bool ok = e->status == 400 && e->type == "invalid_request_error" &&
                e->message.size() <= api_message_max_bytes && expect.v != verdict::valid &&
                (!check_name || expect.v != verdict::invalid || names(e->message, expect.name));
      if (!ok) {
        FAIL_CHECK("expected " << (expect.v == verdict::valid ? "valid" : "a 400") << " naming "
                               << expect.name << ", got " << e->status << " " << e->message
                               << "\nbody: " << shown);
        ++seen.num_failed;
      }
    } else {
      ++seen.num_valid;
      const api_request& r = std::get<api_request>(got);
      bool ok = expect.v != verdict::invalid && r.chat == chat && !r.request.prompt.empty() &&
                r.request.max_tokens >= 1 &&
                r.request.prompt.size() + r.request.max_tokens <= size_t(max_context);
      if (!ok) {
        FAIL_CHECK("expected a 400 naming " << expect.name << ", but it parsed\nbody: " << shown);
        ++seen.num_failed;
      }
    }
  }
  CHECK(seen.num_failed == 0);
  // Both outcomes are exercised in bulk.
  CHECK(seen.num_valid > num_cases / 10);
  CHECK(seen.num_invalid > num_cases / 2);
}

TEST_CASE("fuzzed evict bodies parse or fail with a bounded 400") {
  for (int i = 0; i < 2000; ++i) {
    std::string value = chance(0.2) ? pick(std::vector<std::string>{"\"hbm\"", "\"cpu\""})
                                    : mutated_value(random_family());
    std::string text = "{\"tier\":" + value + "}";
    if (chance(0.2))
      text = text.substr(0, below(text.size()));
    auto r = parse_evict_request(text);
    if (auto* e = std::get_if<api_error>(&r)) {
      CHECK(e->status == 400);
      CHECK(e->message.size() <= api_message_max_bytes);
      CHECK((names(e->message, "tier") || e->message.rfind("request body", 0) == 0));
    } else {
      CHECK((std::get<std::string>(r) == "hbm" || std::get<std::string>(r) == "cpu"));
    }
  }
}
