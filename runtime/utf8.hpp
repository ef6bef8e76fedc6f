// Byte tokens to text that streams exactly as it reads whole. A byte model may emit any bytes;
// invalid UTF-8 becomes U+FFFD per maximal subpart (Unicode's recommended practice), and a
// stream holds back a trailing sequence that may still complete, so the concatenated pieces of
// a stream always equal the whole text.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

namespace ordo {

// Appends the valid UTF-8 of `bytes` to `out`, each invalid maximal subpart as U+FFFD. Unless
// `final`, stops before a trailing proper prefix of a valid sequence (at most 3 bytes) and
// returns how many bytes it consumed; with `final`, consumes everything.
size_t append_utf8(std::string_view bytes, bool final, std::string& out);

// The whole text of `bytes` (append_utf8 with final).
std::string sanitize_utf8(std::string_view bytes);

// The offset of the first byte of `bytes` that does not start a complete valid sequence
// (Unicode Table 3-7), or std::string_view::npos when all of it is valid UTF-8.
size_t invalid_utf8_at(std::string_view bytes);

} // namespace ordo
