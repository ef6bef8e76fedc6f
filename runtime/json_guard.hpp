// Bounded handling of untrusted JSON: a nesting-depth check on the raw text before parsing,
// and previews of client values and bytes for error messages whose size does not depend on
// the input. Nothing here recurses over the input, so no body can exhaust the stack.
// Pure functions; callable from any thread.
#pragma once

#include <nlohmann/json_fwd.hpp>

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>

namespace ordo {

// Deepest array/object nesting a request body may have ({"a":[1]} is 2 levels).
constexpr int json_max_depth = 64;
// Characters of a client value shown in an error message.
constexpr size_t json_preview_chars = 60;
// Bytes an API error message may have, whatever the input.
constexpr size_t api_message_max_bytes = 300;

// Where a body nests too deeply: the byte that opens level max_depth + 1, and the key of the
// top-level object member holding it ("" when the body is not an object or it lies outside
// a member), shown as by json_text_preview.
struct json_too_deep {
  size_t offset = 0;
  std::string key;
};

// Scans `text` (valid JSON or not) once, skipping strings and their escapes; O(n), no recursion.
std::optional<json_too_deep> json_find_too_deep(std::string_view text,
                                                int max_depth = json_max_depth);

// The key of the top-level object member whose text holds byte `offset` of `text`, shown as
// by json_text_preview ("" when there is none). Same scan as json_find_too_deep.
std::string json_top_level_key_at(std::string_view text, size_t offset);

// `value` as compact JSON in at most `max_chars` bytes, "..." marking a cut. Rendered with an
// explicit stack that stops once the budget is spent, so its cost is bounded by `max_chars`,
// not by the size or depth of `value`.
std::string json_preview(const nlohmann::json& value, size_t max_chars = json_preview_chars);

// Raw bytes (say, around a JSON syntax error) in at most `max_chars` bytes: printable ASCII and
// well-formed UTF-8 sequences are kept, every other byte becomes '?'; "..." marks a cut.
std::string json_text_preview(std::string_view bytes, size_t max_chars = json_preview_chars);

// `message` cut to at most `max_bytes` bytes at a UTF-8 character boundary, "..." marking a cut.
std::string bounded_message(std::string message, size_t max_bytes = api_message_max_bytes);

} // namespace ordo
