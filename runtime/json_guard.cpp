#include "runtime/json_guard.hpp"

#include <nlohmann/json.hpp>

#include <limits>
#include <vector>

namespace ordo {

namespace {

using json = nlohmann::json;

constexpr size_t key_preview_chars = 40;

// One pass over a JSON text that tracks nesting depth and the top-level member being read.
// Strings are skipped byte by byte (an escaped quote does not end them), so brackets and
// commas inside strings count for nothing.
struct json_scanner {
  explicit json_scanner(std::string_view t) : text(t) {}

  std::string_view text;
  int depth = 0;
  bool in_string = false;
  bool escaped = false;
  bool string_is_key = false;
  bool top_is_object = false;
  bool expect_key = false;
  size_t string_start = 0;
  std::string_view key; // the top-level member whose text is being read

  // Consumes byte i; returns true when it opens a level deeper than max_depth.
  bool step(size_t i, int max_depth) {
    char c = text[i];
    if (in_string) {
      if (escaped)
        escaped = false;
      else if (c == '\\')
        escaped = true;
      else if (c == '"') {
        in_string = false;
        if (string_is_key)
          key = text.substr(string_start, i - string_start);
      }
      return false;
    }
    switch (c) {
    case '"':
      in_string = true;
      string_start = i + 1;
      string_is_key = depth == 1 && top_is_object && expect_key;
      if (string_is_key)
        expect_key = false;
      return false;
    case '{':
    case '[':
      if (depth == 0) {
        top_is_object = c == '{';
        expect_key = top_is_object;
      }
      return ++depth > max_depth;
    case '}':
    case ']':
      if (depth > 0 && --depth == 0)
        key = {};
      return false;
    case ',':
      if (depth == 1 && top_is_object) {
        expect_key = true;
        key = {};
      }
      return false;
    default:
      return false;
    }
  }
};

// Length of the well-formed UTF-8 sequence starting at s[i] (1 for ASCII), 0 if ill-formed.
size_t utf8_length(std::string_view s, size_t i) {
  auto byte = [&](size_t k) { return static_cast<unsigned char>(s[k]); };
  unsigned char c = byte(i);
  if (c < 0x80)
    return 1;
  size_t n = 0;
  unsigned char lo = 0x80, hi = 0xbf; // range of the second byte
  if (c >= 0xc2 && c <= 0xdf)
    n = 2;
  else if (c >= 0xe0 && c <= 0xef) {
    n = 3;
    if (c == 0xe0)
      lo = 0xa0;
    if (c == 0xed)
      hi = 0x9f; // no surrogates
  } else if (c >= 0xf0 && c <= 0xf4) {
    n = 4;
    if (c == 0xf0)
      lo = 0x90;
    if (c == 0xf4)
      hi = 0x8f;
  } else
    return 0;
  if (i + n > s.size())
    return 0;
  if (byte(i + 1) < lo || byte(i + 1) > hi)
    return 0;
  for (size_t k = 2; k < n; ++k)
    if ((byte(i + k) & 0xc0) != 0x80)
      return 0;
  return n;
}

// Cuts `s` to at most max_bytes bytes ending in "...", not splitting a UTF-8 character.
void cut_with_ellipsis(std::string& s, size_t max_bytes) {
  if (s.size() <= max_bytes)
    return;
  size_t end = max_bytes >= 3 ? max_bytes - 3 : 0;
  while (end > 0 && (static_cast<unsigned char>(s[end]) & 0xc0) == 0x80)
    --end;
  s.resize(end);
  s += "...";
}

// A string as a JSON literal, from no more than `max_bytes` of its bytes (whole characters).
std::string quoted_prefix(const std::string& s, size_t max_bytes) {
  if (s.size() <= max_bytes)
    return json(s).dump(-1, ' ', false, json::error_handler_t::replace);
  size_t end = max_bytes;
  while (end > 0 && (static_cast<unsigned char>(s[end]) & 0xc0) == 0x80)
    --end;
  return json(s.substr(0, end)).dump(-1, ' ', false, json::error_handler_t::replace);
}

} // namespace

std::optional<json_too_deep> json_find_too_deep(std::string_view text, int max_depth) {
  json_scanner scan(text);
  for (size_t i = 0; i < text.size(); ++i)
    if (scan.step(i, max_depth))
      return json_too_deep{i, json_text_preview(scan.key, key_preview_chars)};
  return std::nullopt;
}

std::string json_top_level_key_at(std::string_view text, size_t offset) {
  json_scanner scan(text);
  const size_t end = offset < text.size() ? offset : text.size();
  for (size_t i = 0; i < end; ++i)
    scan.step(i, std::numeric_limits<int>::max());
  return json_text_preview(scan.key, key_preview_chars);
}

std::string json_preview(const json& value, size_t max_chars) {
  struct frame {
    const json* container;
    json::const_iterator next;
    bool first;
  };
  std::string out;
  std::vector<frame> stack; // one frame per open '[' or '{' written, so at most max_chars + 1
  // Writes a scalar, or the opening bracket of a container and a frame to continue it.
  auto open = [&](const json& v) {
    if (v.is_array() || v.is_object()) {
      out += v.is_array() ? '[' : '{';
      stack.push_back(frame{&v, v.cbegin(), true});
    } else if (v.is_string()) {
      out += quoted_prefix(v.get_ref<const std::string&>(), max_chars + 1);
    } else {
      out += v.dump(-1, ' ', false, json::error_handler_t::replace); // a scalar: no recursion
    }
  };
  open(value);
  while (!stack.empty() && out.size() <= max_chars) {
    frame& f = stack.back();
    if (f.next == f.container->cend()) {
      out += f.container->is_array() ? ']' : '}';
      stack.pop_back();
      continue;
    }
    if (!f.first)
      out += ',';
    f.first = false;
    if (f.container->is_object()) {
      out += quoted_prefix(f.next.key(), max_chars + 1);
      out += ':';
    }
    const json& child = *f.next;
    ++f.next;
    open(child); // may grow the stack: `f` is not used after this
  }
  cut_with_ellipsis(out, max_chars);
  return out;
}

std::string json_text_preview(std::string_view bytes, size_t max_chars) {
  std::string out;
  size_t i = 0;
  while (i < bytes.size() && out.size() <= max_chars) {
    unsigned char c = static_cast<unsigned char>(bytes[i]);
    size_t n = utf8_length(bytes, i);
    if (n == 1 && (c < 0x20 || c == 0x7f))
      n = 0; // control characters
    if (n == 0) {
      out += '?';
      ++i;
    } else {
      out.append(bytes.data() + i, n);
      i += n;
    }
  }
  cut_with_ellipsis(out, max_chars);
  return out;
}

std::string bounded_message(std::string message, size_t max_bytes) {
  cut_with_ellipsis(message, max_bytes);
  return message;
}

} // namespace ordo
