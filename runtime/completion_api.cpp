#include "runtime/completion_api.hpp"

#include "runtime/chat_template.hpp"
#include "runtime/json_guard.hpp"
#include "runtime/tokenizer.hpp"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdio>
#include <limits>
#include <optional>

namespace ordo {

namespace {

using json = nlohmann::json;

// Invalid UTF-8 (a multi-byte char cut between tokens) becomes U+FFFD instead of throwing.
std::string dump(const json& j) { return j.dump(-1, ' ', false, json::error_handler_t::replace); }

const char* type_name(const json& v) {
  if (v.is_number_float())
    return "a non-integer number";
  if (v.is_number())
    return "an integer";
  return v.type_name(); // "string", "array", "object", "boolean", "null"
}

// Every client error goes through here, so no input can make a message longer than the bound.
api_error bad(std::string message) {
  return api_error{400, bounded_message(std::move(message)), "invalid_request_error"};
}

// A short rendering of an offending value for error messages (bounded, never recursive).
std::string shown(const json& v) { return json_preview(v); }

// "string \"ten\"", "an integer 5", "null": what a client sent, for "..., got " + described(v).
std::string described(const json& v) {
  if (v.is_null())
    return "null";
  return std::string(type_name(v)) + " " + shown(v);
}

// body[name], or nullptr when it is absent or null (both mean "use the default").
const json* field(const json& body, const char* name) {
  auto it = body.find(name);
  return it == body.end() || it->is_null() ? nullptr : &*it;
}

// Where a JSON text stops being valid: a SAX pass that keeps nothing but the error position
// (the number of bytes read, so the offending byte is the one before it).
size_t json_error_offset(const std::string& text) {
  struct locator : json::json_sax_t {
    size_t position = 0;
    bool null() override { return true; }
    bool boolean(bool) override { return true; }
    bool number_integer(number_integer_t) override { return true; }
    bool number_unsigned(number_unsigned_t) override { return true; }
    bool number_float(number_float_t, const string_t&) override { return true; }
    bool string(string_t&) override { return true; }
    bool binary(binary_t&) override { return true; }
    bool start_object(std::size_t) override { return true; }
    bool key(string_t&) override { return true; }
    bool end_object() override { return true; }
    bool start_array(std::size_t) override { return true; }
    bool end_array() override { return true; }
    bool parse_error(std::size_t at, const std::string&, const json::exception&) override {
      position = at;
      return false;
    }
  } sax;
  json::sax_parse(text, &sax);
  return sax.position;
}

// The JSON object of a request body. Nesting is checked on the raw text first: the parser
// would cope, but dump and compare recurse over a value, so no deep value may get past here.
std::variant<json, api_error> parse_body(const std::string& text, const char* example) {
  if (auto deep = json_find_too_deep(text)) {
    const std::string limit = std::to_string(json_max_depth);
    if (!deep->key.empty())
      return bad(deep->key + " nests arrays and objects more than " + limit +
                 " levels deep; a request body may nest at most " + limit + " levels");
    return bad("request body nests arrays and objects more than " + limit +
               " levels deep; at most " + limit + " levels are allowed");
  }
  json body = json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (body.is_discarded()) {
    const size_t at = std::min(json_error_offset(text), text.size());
    const size_t from = at > 40 ? at - 40 : 0;
    std::string where = "at byte " + std::to_string(at);
    std::string key = json_top_level_key_at(text, at > 0 ? at - 1 : 0);
    if (!key.empty())
      where += ", in \"" + key + "\"";
    if (at > from)
      where +=
          ", near \"" + json_text_preview(std::string_view(text).substr(from, at - from)) + "\"";
    return bad("request body is not valid JSON (" + where + "): expected an object such as " +
               example);
  }
  if (!body.is_object())
    return bad(std::string("request body must be a JSON object such as ") + example + ", got " +
               type_name(body));
  return body;
}

// Why text cannot be served when the model has no tokenizer here (api_limits::text_prompts).
std::string no_tokenizer(const std::string& what) {
  return what + " needs a tokenizer, and this node serves a Hugging Face checkpoint whose tokenizer.json "
                "is not read yet (issue 37 part 1b)";
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
                 std::to_string(limits.vocab_size) + "), got " + described(t));
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
  const bool text = p.is_string() || (p.is_array() && !p.empty() && p[0].is_string());
  if (text && !limits.text_prompts)
    return bad(no_tokenizer("a text prompt") + ": send the prompt as token ids, e.g. \"prompt\": [1, 2, 3]");
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
                   "element that is " +
                   described(t));
    return parse_token_ids(inner, limits);
  }
  return parse_token_ids(p, limits);
}

// `field`: an integer in [min, max] (JSON integers may be unsigned beyond int64).
std::variant<int32_t, api_error> parse_int_in(const json& v, const std::string& field, int64_t min, int64_t max) {
  const std::string range = "an integer between " + std::to_string(min) + " and " + std::to_string(max);
  if (!v.is_number_integer())
    return bad(field + " must be " + range + ", got " + described(v));
  bool in_range = v.is_number_unsigned() ? v.get<uint64_t>() <= uint64_t(max)
                                         : (v.get<int64_t>() >= min && v.get<int64_t>() <= max);
  if (!in_range || v.get<int64_t>() < min)
    return bad(field + " must be " + range + ", got " + shown(v));
  return static_cast<int32_t>(v.get<int64_t>());
}

// media[i].<name>: an integer in [min, max].
std::variant<int32_t, api_error> parse_span_int(const json& span, const std::string& where,
                                                const char* name, int64_t min, int64_t max) {
  const std::string field = where + "." + name;
  auto it = span.find(name);
  if (it == span.end() || it->is_null())
    return bad(field + " is required: an integer between " + std::to_string(min) + " and " + std::to_string(max));
  return parse_int_in(*it, field, min, max);
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
    return bad(allowed + ", got " + described(*it));
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
               described(*it));
  const int64_t len = static_cast<int64_t>(prompt_len);
  for (size_t i = 0; i < it->size(); ++i) {
    const json& s = (*it)[i];
    const std::string where = "media[" + std::to_string(i) + "]";
    if (!s.is_object())
      return bad(where + " must be an object " + shape + ", got " + described(s));
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

// max_tokens / max_completion_tokens: an integer in [1, cap].
std::variant<int32_t, api_error> parse_max_tokens(const json& v, const char* name, int cap) {
  return parse_int_in(v, name, 1, cap);
}

constexpr size_t max_stop_sequences = 4;
constexpr size_t max_stop_bytes = 64;

// "stop": one string or up to 4, each 1–64 bytes, as byte token ids (no BOS).
std::variant<std::vector<stop_sequence>, api_error> parse_stop(const json& v) {
  static const std::string kinds =
      "a string or an array of at most " + std::to_string(max_stop_sequences) + " strings";
  std::vector<std::pair<std::string, const json*>> items; // (field name, value)
  if (v.is_string()) {
    items.emplace_back("stop", &v);
  } else if (v.is_array()) {
    if (v.size() > max_stop_sequences)
      return bad("stop holds " + std::to_string(v.size()) + " strings; at most " +
                 std::to_string(max_stop_sequences) + " are allowed");
    for (size_t i = 0; i < v.size(); ++i)
      items.emplace_back("stop[" + std::to_string(i) + "]", &v[i]);
  } else {
    return bad("stop must be " + kinds + ", got " + described(v));
  }
  std::vector<stop_sequence> stops;
  for (const auto& [name, item] : items) {
    if (!item->is_string())
      return bad(name + " must be a string, got " + described(*item));
    const auto& text = item->get_ref<const std::string&>();
    if (text.empty())
      return bad(name + " is empty: a stop string needs at least one character");
    if (text.size() > max_stop_bytes)
      return bad(name + " is " + std::to_string(text.size()) + " bytes long; a stop string may " +
                 "have at most " + std::to_string(max_stop_bytes) + " bytes");
    stop_sequence stop{byte_tokenizer::encode(text)};
    stop.token_ids.erase(stop.token_ids.begin()); // the BOS: a stop matches generated text
    stops.push_back(std::move(stop));
  }
  return stops;
}

// The sampling fields both APIs share, into out.request / out.include_usage, then the context
// check of the prompt already in out.request.prompt. For chat, max_completion_tokens is
// OpenAI's current name of max_tokens.
std::optional<api_error> parse_sampling(const json& body, const api_limits& limits,
                                        api_request& out) {
  completion_request& req = out.request;
  int max_tokens_cap = limits.max_context;
  if (limits.max_tokens_limit > 0 && limits.max_tokens_limit < max_tokens_cap)
    max_tokens_cap = limits.max_tokens_limit;
  req.max_tokens = limits.default_max_tokens;
  const char* max_tokens_name = "max_tokens";
  const json* max_tokens = field(body, "max_tokens");
  if (max_tokens) {
    auto n = parse_max_tokens(*max_tokens, "max_tokens", max_tokens_cap);
    if (auto* e = std::get_if<api_error>(&n))
      return *e;
    req.max_tokens = std::get<int32_t>(n);
  }
  if (const json* v = out.chat ? field(body, "max_completion_tokens") : nullptr) {
    auto n = parse_max_tokens(*v, "max_completion_tokens", max_tokens_cap);
    if (auto* e = std::get_if<api_error>(&n))
      return *e;
    if (max_tokens && std::get<int32_t>(n) != req.max_tokens)
      return bad("max_completion_tokens " + std::to_string(std::get<int32_t>(n)) +
                 " and max_tokens " + std::to_string(req.max_tokens) +
                 " disagree: give one of them");
    req.max_tokens = std::get<int32_t>(n);
    max_tokens_name = "max_completion_tokens";
  }

  if (const json* v = field(body, "temperature")) {
    if (!v->is_number())
      return bad("temperature must be a number between 0 and 2, got " + described(*v));
    double t = v->get<double>();
    if (!std::isfinite(t) || t < 0.0 || t > 2.0)
      return bad("temperature must be a number between 0 and 2, got " + shown(*v));
    req.temperature = static_cast<float>(t);
  }

  if (const json* v = field(body, "seed")) {
    if (!v->is_number_integer() || (!v->is_number_unsigned() && v->get<int64_t>() < 0))
      return bad("seed must be an integer between 0 and 18446744073709551615, got " +
                 described(*v));
    req.seed = v->get<uint64_t>();
  }

  if (const json* v = field(body, "stream")) {
    if (!v->is_boolean())
      return bad("stream must be true or false, got " + described(*v));
    req.stream = v->get<bool>();
  }

  if (const json* v = field(body, "stream_options")) {
    if (!req.stream)
      return bad("stream_options is only allowed when stream is true");
    if (!v->is_object())
      return bad("stream_options must be an object such as {\"include_usage\": true}, got " +
                 described(*v));
    if (const json* u = field(*v, "include_usage")) {
      if (!u->is_boolean())
        return bad("stream_options.include_usage must be true or false, got " + described(*u));
      out.include_usage = u->get<bool>();
    }
  }

  if (const json* v = field(body, "cache_salt")) {
    if (!v->is_string())
      return bad("cache_salt must be a string, got " + described(*v));
    req.cache_salt = v->get<std::string>();
  }

  // P/D, vLLM-shaped (docs/pd.md): {"do_remote_decode": true} asks this node to prefill for a
  // decode node; {"remote_host": H, "remote_port": P, ...} (what a prefill answered) names the
  // prefill node whose host tier holds this prompt.
  if (const json* v = field(body, "kv_transfer_params"); v && !v->is_null()) {
    if (!v->is_object())
      return bad("kv_transfer_params must be an object, got " + described(*v));
    if (auto d = v->find("do_remote_decode"); d != v->end() && !d->is_null()) {
      if (!d->is_boolean())
        return bad("kv_transfer_params.do_remote_decode must be true or false, got " + described(*d));
      req.remote_decode = d->get<bool>();
    }
    auto host = v->find("remote_host");
    auto port = v->find("remote_port");
    if (host != v->end() && !host->is_null()) {
      if (!host->is_string() || host->get<std::string>().empty())
        return bad("kv_transfer_params.remote_host must be a host name or address, got " + described(*host));
      if (port == v->end() || !port->is_number_integer() || port->get<int64_t>() < 1 || port->get<int64_t>() > 65535)
        return bad("kv_transfer_params.remote_port must be a port 1..65535 with remote_host, got " +
                   (port == v->end() ? std::string("nothing") : described(*port)));
      if (host->get<std::string>().size() > 255)
        return bad("kv_transfer_params.remote_host must be at most 255 bytes, got " + described(*host));
      req.kv_peer = host->get<std::string>() + ":" + std::to_string(port->get<int64_t>());
      out.kv_claim.host = host->get<std::string>();
      out.kv_claim.port = static_cast<int32_t>(port->get<int64_t>());
    }
    if (auto t = v->find("transfer_id"); t != v->end() && !t->is_null()) {
      if (!t->is_string() || t->get<std::string>().size() > 128)
        return bad("kv_transfer_params.transfer_id must be a string of at most 128 bytes, got " + described(*t));
      req.kv_transfer_id = t->get<std::string>();
      out.kv_claim.transfer_id = req.kv_transfer_id;
    }
    // What a prefill node signed (runtime/pd_params.hpp); checked by the node, not here.
    if (auto e = v->find("remote_engine_id"); e != v->end() && !e->is_null()) {
      if (!e->is_string() || e->get<std::string>().size() > 128)
        return bad("kv_transfer_params.remote_engine_id must be a string of at most 128 bytes, got " + described(*e));
      out.kv_claim.engine_id = e->get<std::string>();
    }
    if (auto x = v->find("expires_at"); x != v->end() && !x->is_null()) {
      if (!x->is_number_integer() || x->get<int64_t>() < 0)
        return bad("kv_transfer_params.expires_at must be a time in unix seconds, got " + described(*x));
      out.kv_claim.expires_at = x->get<int64_t>();
    }
    if (auto g = v->find("signature"); g != v->end() && !g->is_null()) {
      if (!g->is_string() || g->get<std::string>().size() != 64)
        return bad("kv_transfer_params.signature must be 64 hex digits, got " + described(*g));
      out.kv_claim.signature = g->get<std::string>();
    }
  }

  if (const json* v = field(body, "model"); v && !v->is_string())
    return bad("model must be a string, got " + described(*v));

  if (const json* v = field(body, "n")) {
    if (!v->is_number_integer() || v->get<int64_t>() != 1)
      return bad("n must be 1 (one completion per request), got " + shown(*v));
  }

  if (const json* v = field(body, "stop")) {
    if (!limits.text_prompts && !v->is_null())
      return bad(no_tokenizer("stop"));
    auto stop = parse_stop(*v);
    if (auto* e = std::get_if<api_error>(&stop))
      return *e;
    req.stop = std::move(std::get<std::vector<stop_sequence>>(stop));
  }

  if (int64_t(req.prompt.size()) + req.max_tokens > limits.max_context)
    return bad(std::string(out.chat ? "messages make a prompt of " : "prompt of ") +
               std::to_string(req.prompt.size()) + " tokens" +
               (out.chat ? " (with the chat template)" : "") + " plus " + max_tokens_name + " " +
               std::to_string(req.max_tokens) + " exceeds the context of " +
               std::to_string(limits.max_context) + " tokens");
  return std::nullopt;
}

// messages[i].content: a string, or text parts [{"type": "text", "text": ...}] joined with "\n".
std::variant<std::string, api_error> parse_content(const json& message, const std::string& where) {
  static const char* kinds = "a string or an array of {\"type\": \"text\", \"text\": ...} parts";
  const json* content = field(message, "content");
  if (!content)
    return bad(where + ".content is required: " + kinds);
  if (content->is_string())
    return content->get<std::string>();
  if (!content->is_array())
    return bad(where + ".content must be " + kinds + ", got " + described(*content));
  std::string text;
  for (size_t j = 0; j < content->size(); ++j) {
    const json& part = (*content)[j];
    const std::string at = where + ".content[" + std::to_string(j) + "]";
    if (!part.is_object())
      return bad(at + " must be an object {\"type\": \"text\", \"text\": ...}, got " +
                 described(part));
    const json* type = field(part, "type");
    if (!type || *type != "text")
      return bad(at + ".type must be \"text\" (only text parts are supported), got " +
                 (type ? shown(*type) : std::string("none")));
    const json* piece = field(part, "text");
    if (!piece || !piece->is_string())
      return bad(at + ".text must be a string, got " +
                 (piece ? described(*piece) : std::string("none")));
    if (j > 0)
      text += '\n';
    text += piece->get_ref<const std::string&>();
  }
  return text;
}

// "messages": a non-empty array of {"role", "content"} objects.
std::variant<std::vector<chat_message>, api_error> parse_messages(const json& body) {
  static const char* shape = "a non-empty array of {\"role\": \"system\"|\"user\"|\"assistant\", "
                             "\"content\": ...} objects";
  static const char* roles = "one of \"system\", \"user\", \"assistant\"";
  const json* messages = field(body, "messages");
  if (!messages)
    return bad(std::string("messages is required: ") + shape);
  if (!messages->is_array())
    return bad(std::string("messages must be ") + shape + ", got " + described(*messages));
  if (messages->empty())
    return bad("messages is empty: give at least one message");
  std::vector<chat_message> out;
  for (size_t i = 0; i < messages->size(); ++i) {
    const json& m = (*messages)[i];
    const std::string where = "messages[" + std::to_string(i) + "]";
    if (!m.is_object())
      return bad(where + " must be an object {\"role\": ..., \"content\": ...}, got " +
                 described(m));
    const json* role = field(m, "role");
    if (!role)
      return bad(where + ".role is required: " + roles);
    std::optional<chat_role> parsed;
    if (role->is_string())
      parsed = parse_chat_role(role->get_ref<const std::string&>());
    if (!parsed)
      return bad(where + ".role must be " + roles + ", got " +
                 (role->is_string() ? shown(*role) : described(*role)));
    auto content = parse_content(m, where);
    if (auto* e = std::get_if<api_error>(&content))
      return *e;
    out.push_back(chat_message{*parsed, std::move(std::get<std::string>(content))});
  }
  return out;
}

constexpr const char* completion_example = "{\"prompt\": \"Hello\", \"max_tokens\": 16}";
constexpr const char* chat_example =
    "{\"messages\": [{\"role\": \"user\", \"content\": \"Hello\"}]}";

} // namespace

std::variant<api_request, api_error> parse_completion_request(const std::string& text,
                                                              const api_limits& limits) {
  auto parsed = parse_body(text, completion_example);
  if (auto* e = std::get_if<api_error>(&parsed))
    return *e;
  const json& body = std::get<json>(parsed);

  api_request out;
  auto prompt = parse_prompt(body, limits);
  if (auto* e = std::get_if<api_error>(&prompt))
    return *e;
  out.request.prompt = std::move(std::get<std::vector<int32_t>>(prompt));
  if (auto e = parse_sampling(body, limits, out))
    return *e;
  auto media = parse_media(body, out.request.prompt.size());
  if (auto* e = std::get_if<api_error>(&media))
    return *e;
  out.request.media = std::move(std::get<std::vector<media_span>>(media));
  return out;
}

std::variant<api_request, api_error> parse_chat_completion_request(const std::string& text,
                                                                   const api_limits& limits) {
  auto parsed = parse_body(text, chat_example);
  if (auto* e = std::get_if<api_error>(&parsed))
    return *e;
  const json& body = std::get<json>(parsed);

  api_request out;
  out.chat = true;
  if (!limits.text_prompts)
    return bad(no_tokenizer("/v1/chat/completions") + "; use /v1/completions with token ids");
  auto messages = parse_messages(body);
  if (auto* e = std::get_if<api_error>(&messages))
    return *e;
  out.request.prompt = render_chat_prompt(std::get<std::vector<chat_message>>(messages));
  if (field(body, "media"))
    return bad("media is not supported on /v1/chat/completions (its offsets count prompt "
               "tokens); send the prompt to /v1/completions");
  if (auto e = parse_sampling(body, limits, out))
    return *e;
  return out;
}

std::variant<std::string, api_error> parse_evict_request(const std::string& text) {
  static const char* allowed = "tier must be one of: \"hbm\", \"cpu\", \"store\"";
  auto parsed = parse_body(text, "{\"tier\": \"hbm\"}");
  if (auto* e = std::get_if<api_error>(&parsed))
    return *e;
  const json& body = std::get<json>(parsed);
  auto it = body.find("tier");
  if (it == body.end())
    return bad(std::string("tier is required: ") + allowed);
  if (!it->is_string())
    return bad(std::string(allowed) + ", got " + described(*it));
  if (*it != "hbm" && *it != "cpu" && *it != "store")
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
              {"from", {{"hbm", r.from_hbm}, {"cpu", r.from_cpu}, {"store", r.from_store}, {"peer", r.from_peer}}},
              {"reason", r.reason},
              {"logits_digest", format_digest(r.logits_digest)},
              {"num_preemptions", r.num_preemptions},
              {"duration_ms", r.duration_ms},
              {"first_token_ms", r.first_token_ms}};
}

// The fields every response and chunk starts with; ids are "cmpl-N" / "chatcmpl-N".
json envelope(uint64_t request_id, bool chat, const char* object, const std::string& model,
              int64_t created) {
  return json{{"id", (chat ? "chatcmpl-" : "cmpl-") + std::to_string(request_id)},
              {"object", object},
              {"created", created},
              {"model", model}};
}

json envelope(uint64_t request_id, const std::string& model, int64_t created) {
  return envelope(request_id, false, "text_completion", model, created);
}

constexpr const char* chat_chunk_object = "chat.completion.chunk";

// One chat stream event whose only choice has `delta`.
json chat_event(uint64_t request_id, json delta, json token_ids, json finish_reason,
                const std::string& model, int64_t created) {
  json j = envelope(request_id, true, chat_chunk_object, model, created);
  j["choices"] = json::array({json{{"index", 0},
                                   {"delta", std::move(delta)},
                                   {"token_ids", std::move(token_ids)},
                                   {"finish_reason", std::move(finish_reason)},
                                   {"logprobs", nullptr}}});
  return j;
}

std::string sse(const json& j) { return "data: " + dump(j) + "\n\n"; }

// The one choice of a text completion (whole, or one piece of a stream).
json text_choice(const std::string& text, json token_ids, json finish_reason) {
  return json::array({json{{"index", 0},
                           {"text", text},
                           {"token_ids", std::move(token_ids)},
                           {"finish_reason", std::move(finish_reason)},
                           {"logprobs", nullptr}}});
}

} // namespace

std::string render_completion(const completion_result& r, const std::string& text,
                              const std::string& model_name, int64_t created) {
  json j = envelope(r.request_id, model_name, created);
  j["choices"] = text_choice(text, r.token_ids, r.finish_reason);
  j["usage"] = usage_json(r);
  j["ordo"] = ordo_json(r);
  return dump(j);
}

std::string render_stream_chunk(uint64_t request_id, const std::string& text_piece,
                                const std::vector<int32_t>& token_ids, const std::string& model_name,
                                int64_t created) {
  json j = envelope(request_id, model_name, created);
  j["choices"] = text_choice(text_piece, token_ids, nullptr);
  return sse(j);
}

std::string render_stream_final(const completion_result& r, const std::string& model_name,
                                int64_t created) {
  json j = envelope(r.request_id, model_name, created);
  j["choices"] = text_choice("", json::array(), r.finish_reason);
  j["usage"] = usage_json(r);
  j["ordo"] = ordo_json(r);
  return sse(j);
}

std::string render_chat_completion(const completion_result& r, const std::string& text,
                                   const std::string& model_name, int64_t created) {
  json j = envelope(r.request_id, true, "chat.completion", model_name, created);
  j["choices"] = json::array({json{{"index", 0},
                                   {"message", {{"role", "assistant"}, {"content", text}}},
                                   {"token_ids", r.token_ids},
                                   {"finish_reason", r.finish_reason},
                                   {"logprobs", nullptr}}});
  j["usage"] = usage_json(r);
  j["ordo"] = ordo_json(r);
  return dump(j);
}

std::string render_chat_stream_role(uint64_t request_id, const std::string& model_name,
                                    int64_t created) {
  return sse(chat_event(request_id, {{"role", "assistant"}, {"content", ""}}, json::array(),
                        nullptr, model_name, created));
}

std::string render_chat_stream_chunk(uint64_t request_id, const std::string& text_piece,
                                     const std::vector<int32_t>& token_ids,
                                     const std::string& model_name, int64_t created) {
  return sse(chat_event(request_id, {{"content", text_piece}}, token_ids, nullptr,
                        model_name, created));
}

std::string render_chat_stream_final(const completion_result& r, const std::string& model_name,
                                     int64_t created) {
  json j =
      chat_event(r.request_id, json::object(), json::array(), r.finish_reason, model_name, created);
  j["ordo"] = ordo_json(r);
  return sse(j);
}

std::string render_usage_chunk(const completion_result& r, bool chat, const std::string& model_name,
                               int64_t created) {
  json j = envelope(r.request_id, chat, chat ? chat_chunk_object : "text_completion", model_name,
                    created);
  j["choices"] = json::array();
  j["usage"] = usage_json(r);
  return sse(j);
}

std::string render_models(const std::string& model_name, int64_t created) {
  return dump(json{{"object", "list"},
                   {"data", json::array({json{{"id", model_name},
                                              {"object", "model"},
                                              {"created", created},
                                              {"owned_by", "ordo"}}})}});
}

std::string render_stream_done() { return "data: [DONE]\n\n"; }

std::string render_error(const api_error& e) {
  return dump(json{{"error", {{"message", e.message}, {"type", e.type}, {"code", nullptr}}}});
}

std::string render_stream_error(const api_error& e) { return "data: " + render_error(e) + "\n\n"; }

api_error to_api_error(const completion_failed& f) {
  int status = f.type == "invalid_request_error" ? 400 : f.type == "rate_limit_error" ? 429 : 500;
  return api_error{status, f.message, f.type.empty() ? "server_error" : f.type};
}

std::string format_digest(uint64_t digest) {
  char buf[17];
  std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(digest));
  return buf;
}

} // namespace ordo
