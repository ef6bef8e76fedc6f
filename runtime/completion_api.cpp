#include "runtime/completion_api.hpp"

#include "runtime/tokenizer.hpp"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdio>
#include <limits>

namespace ordo {

namespace {

using json = nlohmann::json;

// Invalid UTF-8 (a multi-byte char cut between tokens) becomes U+FFFD instead of throwing.
std::string dump(const json& j) {
  return j.dump(-1, ' ', false, json::error_handler_t::replace);
}

api_error bad(std::string message) {
  return api_error{400, std::move(message), "invalid_request_error"};
}

// A short rendering of an offending value for error messages.
std::string shown(const json& v) {
  std::string s = dump(v);
  if (s.size() > 60)
    s = s.substr(0, 57) + "...";
  return s;
}

const char* type_name(const json& v) {
  if (v.is_number_float())
    return "a non-integer number";
  if (v.is_number())
    return "an integer";
  return v.type_name(); // "string", "array", "object", "boolean", "null"
}

// Token ids of a prompt given as an array of integers; nullopt-like via error string.
std::variant<std::vector<int32_t>, api_error> parse_token_ids(const json& arr,
                                                              const api_limits& limits) {
  std::vector<int32_t> ids;
  ids.reserve(arr.size());
  for (size_t i = 0; i < arr.size(); ++i) {
    const json& t = arr[i];
    if (!t.is_number_integer())
      return bad("prompt[" + std::to_string(i) + "] must be an integer token id in [0, " +
                 std::to_string(limits.vocab_size) + "), got " + type_name(t) + " " + shown(t));
    if (t.is_number_unsigned() ? t.get<uint64_t>() >= uint64_t(limits.vocab_size)
                               : (t.get<int64_t>() < 0 || t.get<int64_t>() >= limits.vocab_size))
      return bad("prompt[" + std::to_string(i) + "] = " + shown(t) +
                 " is not a token id: allowed ids are 0.." + std::to_string(limits.vocab_size - 1));
    ids.push_back(static_cast<int32_t>(t.get<int64_t>()));
  }
  return ids;
}

std::variant<std::vector<int32_t>, api_error> parse_prompt(const json& body,
                                                           const api_limits& limits) {
  static const char* allowed =
      "a string, an array of token ids, or an array holding one string or one array of token ids";
  auto it = body.find("prompt");
  if (it == body.end() || it->is_null())
    return bad(std::string("prompt is required: ") + allowed);
  const json& p = *it;
  if (p.is_string()) {
    if (p.get_ref<const std::string&>().empty())
      return bad("prompt is empty: give at least one character or token id");
    return byte_tokenizer::encode(p.get<std::string>());
  }
  if (!p.is_array())
    return bad(std::string("prompt must be ") + allowed + ", got " + type_name(p));
  if (p.empty())
    return bad("prompt is empty: give at least one character or token id");
  // An array of one string / one token array is OpenAI's batch form with a batch of one.
  if (p[0].is_string() || p[0].is_array()) {
    if (p.size() != 1)
      return bad("prompt holds " + std::to_string(p.size()) +
                 " prompts; only one prompt per request is supported");
    const json& inner = p[0];
    if (inner.is_string()) {
      if (inner.get_ref<const std::string&>().empty())
        return bad("prompt is empty: give at least one character or token id");
      return byte_tokenizer::encode(inner.get<std::string>());
    }
    if (inner.empty())
      return bad("prompt is empty: give at least one character or token id");
    for (const json& t : inner)
      if (!t.is_number_integer())
        return bad("prompt[0] must be a string or an array of integer token ids, got an "
                   "element that is " + std::string(type_name(t)) + " " + shown(t));
    return parse_token_ids(inner, limits);
  }
  return parse_token_ids(p, limits);
}

// media[i].<name>: an integer in [min, max].
std::variant<int32_t, api_error> parse_span_int(const json& span, const std::string& where,
                                                const char* name, int64_t min, int64_t max) {
  const std::string field = where + "." + name;
  const std::string range =
      "an integer between " + std::to_string(min) + " and " + std::to_string(max);
  auto it = span.find(name);
  if (it == span.end() || it->is_null())
    return bad(field + " is required: " + range);
  if (!it->is_number_integer())
    return bad(field + " must be " + range + ", got " + type_name(*it) + " " + shown(*it));
  bool in_range = it->is_number_unsigned()
                      ? it->get<uint64_t>() <= uint64_t(max)
                      : (it->get<int64_t>() >= min && it->get<int64_t>() <= max);
  if (!in_range || it->get<int64_t>() < min)
    return bad(field + " must be " + range + ", got " + shown(*it));
  return static_cast<int32_t>(it->get<int64_t>());
}

// media[i].hash: 1 to 16 hex digits, or an integer in [0, 2^64).
std::variant<uint64_t, api_error> parse_span_hash(const json& span, const std::string& where) {
  static const char* kinds =
      "a string of 1 to 16 hex digits or an integer between 0 and 18446744073709551615";
  auto it = span.find("hash");
  if (it == span.end() || it->is_null())
    return bad(where + ".hash is required: " + kinds);
  if (it->is_number_unsigned())
    return it->get<uint64_t>();
  const std::string allowed = where + ".hash must be " + kinds;
  if (!it->is_string())
    return bad(allowed + ", got " + type_name(*it) + " " + shown(*it));
  const auto& s = it->get_ref<const std::string&>();
  bool hex = !s.empty() && s.size() <= 16 &&
             std::all_of(s.begin(), s.end(), [](unsigned char c) { return std::isxdigit(c) != 0; });
  if (!hex)
    return bad(allowed + ", got " + shown(*it));
  return static_cast<uint64_t>(std::stoull(s, nullptr, 16));
}

// The optional "media" array: spans of placeholder positions inside a prompt of
// `prompt_len` tokens, returned sorted by offset; overlapping spans are an error.
std::variant<std::vector<media_span>, api_error> parse_media(const json& body, size_t prompt_len) {
  std::vector<media_span> spans;
  auto it = body.find("media");
  if (it == body.end() || it->is_null())
    return spans;
  static const char* shape = R"({"offset": int, "length": int, "hash": "hex" or int})";
  if (!it->is_array())
    return bad(std::string("media must be an array of ") + shape + " objects, got " +
               type_name(*it) + " " + shown(*it));
  const int64_t len = static_cast<int64_t>(prompt_len);
  for (size_t i = 0; i < it->size(); ++i) {
    const json& s = (*it)[i];
    const std::string where = "media[" + std::to_string(i) + "]";
    if (!s.is_object())
      return bad(where + " must be an object " + shape + ", got " + type_name(s) + " " + shown(s));
    auto offset = parse_span_int(s, where, "offset", 0, len - 1);
    if (auto* e = std::get_if<api_error>(&offset))
      return *e;
    auto length = parse_span_int(s, where, "length", 1, len);
    if (auto* e = std::get_if<api_error>(&length))
      return *e;
    auto hash = parse_span_hash(s, where);
    if (auto* e = std::get_if<api_error>(&hash))
      return *e;
    media_span span{std::get<int32_t>(offset), std::get<int32_t>(length), std::get<uint64_t>(hash)};
    if (int64_t{span.offset} + span.length > len)
      return bad(where + " covers prompt positions [" + std::to_string(span.offset) + ", " +
                 std::to_string(int64_t{span.offset} + span.length) + ") but the prompt has " +
                 std::to_string(len) + " tokens");
    spans.push_back(span);
  }
  std::vector<size_t> order(spans.size());
  for (size_t i = 0; i < order.size(); ++i)
    order[i] = i;
  std::stable_sort(order.begin(), order.end(),
                   [&](size_t a, size_t b) { return spans[a].offset < spans[b].offset; });
  std::vector<media_span> sorted;
  for (size_t k = 0; k < order.size(); ++k) {
    const media_span& s = spans[order[k]];
    if (k > 0) {
      const media_span& p = spans[order[k - 1]];
      if (s.offset < p.offset + p.length) {
        auto name = [&](size_t j) {
          const media_span& x = spans[j];
          return "media[" + std::to_string(j) + "] [" + std::to_string(x.offset) + ", " +
                 std::to_string(x.offset + x.length) + ")";
        };
        return bad(name(order[k - 1]) + " overlaps " + name(order[k]) +
                   ": media spans must not share prompt positions");
      }
    }
    sorted.push_back(s);
  }
  return sorted;
}

} // namespace

std::variant<completion_request, api_error> parse_completion_request(const std::string& text,
                                                                     const api_limits& limits) {
  json body = json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (body.is_discarded())
    return bad("request body is not valid JSON: expected an object such as "
               "{\"prompt\": \"Hello\", \"max_tokens\": 16}");
  if (!body.is_object())
    return bad(std::string("request body must be a JSON object, got ") + type_name(body));

  completion_request req;
  auto prompt = parse_prompt(body, limits);
  if (auto* e = std::get_if<api_error>(&prompt))
    return *e;
  req.prompt = std::move(std::get<std::vector<int32_t>>(prompt));

  int max_tokens_cap = limits.max_context;
  if (limits.max_tokens_limit > 0 && limits.max_tokens_limit < max_tokens_cap)
    max_tokens_cap = limits.max_tokens_limit;
  req.max_tokens = limits.default_max_tokens;
  if (auto it = body.find("max_tokens"); it != body.end() && !it->is_null()) {
    const std::string range = "an integer between 1 and " + std::to_string(max_tokens_cap);
    if (!it->is_number_integer())
      return bad("max_tokens must be " + range + ", got " + type_name(*it) + " " + shown(*it));
    bool in_range = it->is_number_unsigned()
                        ? it->get<uint64_t>() <= uint64_t(max_tokens_cap)
                        : (it->get<int64_t>() >= 1 && it->get<int64_t>() <= max_tokens_cap);
    if (!in_range || it->get<int64_t>() < 1)
      return bad("max_tokens must be " + range + ", got " + shown(*it));
    req.max_tokens = static_cast<int32_t>(it->get<int64_t>());
  }
  if (int64_t(req.prompt.size()) + req.max_tokens > limits.max_context)
    return bad("prompt of " + std::to_string(req.prompt.size()) + " tokens plus max_tokens " +
               std::to_string(req.max_tokens) + " exceeds the context of " +
               std::to_string(limits.max_context) + " tokens");

  if (auto it = body.find("temperature"); it != body.end() && !it->is_null()) {
    if (!it->is_number())
      return bad("temperature must be a number between 0 and 2, got " +
                 std::string(type_name(*it)) + " " + shown(*it));
    double t = it->get<double>();
    if (!std::isfinite(t) || t < 0.0 || t > 2.0)
      return bad("temperature must be a number between 0 and 2, got " + shown(*it));
    req.temperature = static_cast<float>(t);
  }

  if (auto it = body.find("seed"); it != body.end() && !it->is_null()) {
    if (!it->is_number_integer() || (!it->is_number_unsigned() && it->get<int64_t>() < 0))
      return bad("seed must be an integer between 0 and 18446744073709551615, got " +
                 std::string(type_name(*it)) + " " + shown(*it));
    req.seed = it->get<uint64_t>();
  }

  if (auto it = body.find("stream"); it != body.end() && !it->is_null()) {
    if (!it->is_boolean())
      return bad("stream must be true or false, got " + std::string(type_name(*it)) + " " +
                 shown(*it));
    req.stream = it->get<bool>();
  }

  if (auto it = body.find("cache_salt"); it != body.end() && !it->is_null()) {
    if (!it->is_string())
      return bad("cache_salt must be a string, got " + std::string(type_name(*it)) + " " +
                 shown(*it));
    req.cache_salt = it->get<std::string>();
  }

  auto media = parse_media(body, req.prompt.size());
  if (auto* e = std::get_if<api_error>(&media))
    return *e;
  req.media = std::move(std::get<std::vector<media_span>>(media));

  if (auto it = body.find("model"); it != body.end() && !it->is_null() && !it->is_string())
    return bad("model must be a string, got " + std::string(type_name(*it)) + " " + shown(*it));

  if (auto it = body.find("n"); it != body.end() && !it->is_null()) {
    if (!it->is_number_integer() || it->get<int64_t>() != 1)
      return bad("n must be 1 (one completion per request), got " + shown(*it));
  }
  return req;
}

std::variant<std::string, api_error> parse_evict_request(const std::string& text) {
  static const char* allowed = "tier must be one of: \"hbm\", \"cpu\"";
  json body = json::parse(text, nullptr, false);
  if (body.is_discarded())
    return bad("request body is not valid JSON: expected {\"tier\": \"hbm\"}");
  if (!body.is_object())
    return bad(std::string("request body must be a JSON object such as {\"tier\": \"hbm\"}, got ") +
               type_name(body));
  auto it = body.find("tier");
  if (it == body.end())
    return bad(std::string("tier is required: ") + allowed);
  if (!it->is_string())
    return bad(std::string(allowed) + ", got " + type_name(*it) + " " + shown(*it));
  if (*it != "hbm" && *it != "cpu")
    return bad(std::string(allowed) + ", got " + shown(*it));
  return it->get<std::string>();
}

namespace {

json usage_json(const completion_result& r) {
  int32_t completion = static_cast<int32_t>(r.token_ids.size());
  return json{{"prompt_tokens", r.prompt_tokens},
              {"completion_tokens", completion},
              {"total_tokens", r.prompt_tokens + completion},
              {"prompt_tokens_details", {{"cached_tokens", r.cached_tokens}}}};
}

json ordo_json(const completion_result& r) {
  return json{{"resume_at", r.resume_at},
              {"from", {{"hbm", r.from_hbm}, {"cpu", r.from_cpu}, {"store", r.from_store}}},
              {"reason", r.reason},
              {"logits_digest", format_digest(r.logits_digest)},
              {"num_preemptions", r.num_preemptions},
              {"duration_ms", r.duration_ms}};
}

json envelope(uint64_t request_id, const std::string& model, int64_t created) {
  return json{{"id", "cmpl-" + std::to_string(request_id)},
              {"object", "text_completion"},
              {"created", created},
              {"model", model}};
}

} // namespace

std::string render_completion(const completion_result& r, const std::string& text,
                              const std::string& model_name, int64_t created) {
  json j = envelope(r.request_id, model_name, created);
  j["choices"] = json::array({json{{"index", 0},
                                   {"text", text},
                                   {"token_ids", r.token_ids},
                                   {"finish_reason", r.finish_reason},
                                   {"logprobs", nullptr}}});
  j["usage"] = usage_json(r);
  j["ordo"] = ordo_json(r);
  return dump(j);
}

std::string render_stream_chunk(uint64_t request_id, const std::string& text_piece,
                                int32_t token_id, const std::string& model_name,
                                int64_t created) {
  json j = envelope(request_id, model_name, created);
  j["choices"] = json::array({json{{"index", 0},
                                   {"text", text_piece},
                                   {"token_ids", json::array({token_id})},
                                   {"finish_reason", nullptr},
                                   {"logprobs", nullptr}}});
  return "data: " + dump(j) + "\n\n";
}

std::string render_stream_final(const completion_result& r, const std::string& model_name,
                                int64_t created) {
  json j = envelope(r.request_id, model_name, created);
  j["choices"] = json::array({json{{"index", 0},
                                   {"text", ""},
                                   {"token_ids", json::array()},
                                   {"finish_reason", r.finish_reason},
                                   {"logprobs", nullptr}}});
  j["usage"] = usage_json(r);
  j["ordo"] = ordo_json(r);
  return "data: " + dump(j) + "\n\n";
}

std::string render_stream_done() { return "data: [DONE]\n\n"; }

std::string render_error(const api_error& e) {
  return dump(json{{"error", {{"message", e.message}, {"type", e.type}, {"code", nullptr}}}});
}

std::string render_stream_error(const api_error& e) { return "data: " + render_error(e) + "\n\n"; }

api_error to_api_error(const completion_failed& f) {
  int status = f.type == "invalid_request_error" ? 400 : 500;
  return api_error{status, f.message, f.type.empty() ? "server_error" : f.type};
}

std::string format_digest(uint64_t digest) {
  char buf[17];
  std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(digest));
  return buf;
}

} // namespace ordo
