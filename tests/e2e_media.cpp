// End to end over HTTP: media spans keep prompts with the same token ids apart in the prefix
// cache (SPEC B1). Catch2 is called from the main thread only.
#include <catch.hpp>

#include "tests/e2e_support.hpp"

using namespace ordo;
using namespace ordo::e2e;

namespace {

json with_media(const std::vector<int>& prompt, int offset, int length, const json& hash) {
  auto body = request_body(prompt);
  body["media"] = json::array({{{"offset", offset}, {"length", length}, {"hash", hash}}});
  return body;
}

int cached(const json& response) {
  return response["usage"]["prompt_tokens_details"]["cached_tokens"].get<int>();
}

} // namespace

TEST_CASE("e2e: the same tokens with other media, or media elsewhere, share only the blocks before it") {
  auto node = start_node("configs/dense.toml"); // blocks of 16
  auto prompt = token_prompt(200, 41);
  const json image_a = "a1b2c3d4e5f60718";
  const json image_b = 0x5eedull;

  auto a = complete(node.port, with_media(prompt, 20, 30, image_a));
  CHECK(a["ordo"]["resume_at"] == 0);
  // The same request again: reused up to floor_16(P - 1), the same output.
  auto a_again = complete(node.port, with_media(prompt, 20, 30, image_a));
  CHECK(cached(a_again) == 192);
  CHECK(digest(a_again) == digest(a));
  // The same hash given as an integer names the same image.
  auto a_as_int = complete(node.port, with_media(prompt, 20, 30, 0xa1b2c3d4e5f60718ull));
  CHECK(cached(a_as_int) == 192);

  // Other media over the same placeholder tokens: only block 0 (before the span) is shared.
  auto b = complete(node.port, with_media(prompt, 20, 30, image_b));
  CHECK(cached(b) <= 20 / 16 * 16);
  CHECK(cached(b) == 16);
  // The tiny model does not look at images: recomputing gives the same tokens.
  CHECK(digest(b) == digest(a));

  // The same media at another offset (blocks 3 and 4): again only block 0 matches a cached chain.
  auto a_moved = complete(node.port, with_media(prompt, 52, 30, image_a));
  CHECK(cached(a_moved) <= 20 / 16 * 16);
  CHECK(cached(a_moved) == 16);

  // Text only: blocks 0..2 were cached by a_moved (its span starts in block 3), nothing further.
  auto text = complete(node.port, request_body(prompt));
  CHECK(cached(text) == 48);
  // Every variant now hits its own chain fully.
  CHECK(cached(complete(node.port, with_media(prompt, 20, 30, image_b))) == 192);
  CHECK(cached(complete(node.port, with_media(prompt, 52, 30, image_a))) == 192);
}

TEST_CASE("e2e: malformed media gets a 400 naming the field, and the node keeps serving") {
  auto node = start_node("configs/dense.toml");
  auto prompt = token_prompt(60, 43);
  auto reference = complete(node.port, with_media(prompt, 10, 20, "beef"));
  struct bad_case {
    json media;
    std::string expect_in_message;
  };
  std::vector<bad_case> cases = {
      {"not a list", "media must be an array"},
      {json::array({{{"offset", -1}, {"length", 4}, {"hash", "beef"}}}), "media[0].offset"},
      {json::array({{{"offset", 0}, {"length", 4}, {"hash", "beef"}}, {{"offset", 50}, {"length", 20}, {"hash", 1}}}),
       "media[1] covers prompt positions [50, 70) but the prompt has 60 tokens"},
      {json::array({{{"offset", 0}, {"length", 0}, {"hash", "beef"}}}), "media[0].length"},
      {json::array({{{"offset", 0}, {"length", 4}, {"hash", "not hex"}}}), "media[0].hash"},
      {json::array({{{"offset", 0}, {"length", 8}, {"hash", 1}}, {{"offset", 4}, {"length", 8}, {"hash", 2}}}),
       "overlaps"},
  };
  for (const auto& c : cases) {
    auto body = request_body(prompt);
    body["media"] = c.media;
    auto res = http_post(node.port, "/v1/completions", body.dump());
    INFO(c.media.dump() << " -> " << res.status << " " << res.body);
    CHECK(res.status == 400);
    auto err = json::parse(res.body);
    CHECK(err["error"]["message"].get<std::string>().find(c.expect_in_message) != std::string::npos);
    CHECK(err["error"]["type"] == "invalid_request_error");
  }
  // Still serving, with the same answer and its cache intact.
  auto again = complete(node.port, with_media(prompt, 10, 20, "beef"));
  CHECK(digest(again) == digest(reference));
  CHECK(cached(again) == 48);
}
