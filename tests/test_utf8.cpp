#include <catch.hpp>

#include <random>

#include "runtime/utf8.hpp"

using namespace ordo;

TEST_CASE("utf8: valid text passes, invalid maximal subparts become one U+FFFD each") {
  CHECK(sanitize_utf8("h\xC3\xA9llo \xE2\x82\xAC \xF0\x9F\x98\x80") == "h\xC3\xA9llo \xE2\x82\xAC \xF0\x9F\x98\x80");
  const std::string r = "\xEF\xBF\xBD";
  CHECK(sanitize_utf8("\x80") == r);
  CHECK(sanitize_utf8("\xC0\xAF") == r + r);           // C0 is never a lead
  CHECK(sanitize_utf8("\xE2\x82" "a") == r + "a");      // a cut sequence is one subpart
  CHECK(sanitize_utf8("\xED\xA0\x80") == r + r + r);    // a surrogate: ED allows 80..9F only
  CHECK(sanitize_utf8("\xF0\x9F\x98") == r);            // cut at the end
  CHECK(sanitize_utf8("\xF5\x80") == r + r);
}

TEST_CASE("utf8: a stream fed byte by byte reads exactly like the whole text") {
  std::mt19937 rng(7);
  for (int round = 0; round < 2000; ++round) {
    std::string bytes;
    int n = static_cast<int>(rng() % 24);
    for (int i = 0; i < n; ++i) // biased towards bytes that start or continue sequences
      bytes.push_back(static_cast<char>(rng() % 3 == 0 ? rng() % 128 : 0x80 + rng() % 128));
    std::string streamed, pending;
    for (char b : bytes) {
      pending.push_back(b);
      pending.erase(0, append_utf8(pending, false, streamed));
      CHECK(pending.size() <= 3);
    }
    append_utf8(pending, true, streamed);
    INFO("round " << round);
    CHECK(streamed == sanitize_utf8(bytes));
  }
}
