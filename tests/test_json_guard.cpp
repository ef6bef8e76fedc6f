#include "runtime/json_guard.hpp"

#include <catch.hpp>
#include <nlohmann/json.hpp>

using namespace ordo;
using json = nlohmann::json;

namespace {

std::string nested(size_t depth, const std::string& inner = "1") {
  return std::string(depth, '[') + inner + std::string(depth, ']');
}

} // namespace

TEST_CASE("nesting deeper than the limit is found on the raw text, with its top-level key") {
  CHECK_FALSE(json_find_too_deep(nested(64)));
  auto deep = json_find_too_deep(nested(65));
  REQUIRE(deep);
  CHECK(deep->offset == 64); // the bracket that opens level 65
  CHECK(deep->key.empty());  // not inside an object
  CHECK_FALSE(json_find_too_deep(R"({"a":)" + nested(63) + "}"));
  deep = json_find_too_deep(R"({"a":1,"b":{"c":)" + nested(63) + "}}");
  REQUIRE(deep);
  CHECK(deep->key == "b");
  CHECK(json_find_too_deep(nested(3), 2));
  CHECK_FALSE(json_find_too_deep(nested(2), 2));
  // 100000 levels: found at once, no recursion.
  deep = json_find_too_deep(R"({"max_tokens":)" + nested(100000) + "}");
  REQUIRE(deep);
  CHECK(deep->key == "max_tokens");
}

TEST_CASE("brackets, quotes and commas inside strings do not count") {
  std::string s = R"({"x":"[[[[{{{{\"[[[\\","y":")" + std::string(1000, '[') + R"("})";
  CHECK_FALSE(json_find_too_deep(s, 2));
  CHECK(json_top_level_key_at(s, s.size() - 3) == "y");
  // A key whose text holds an escaped quote and brackets.
  std::string k = R"({"a\"[[":)" + nested(5) + "}";
  auto deep = json_find_too_deep(k, 3);
  REQUIRE(deep);
  CHECK(deep->key == R"(a\"[[)");
}

TEST_CASE("the top-level key of a byte follows members, not nested keys or values") {
  const std::string s = R"({"prompt":"a,b","media":[{"offset":1}],"seed":7})";
  CHECK(json_top_level_key_at(s, 0).empty());
  CHECK(json_top_level_key_at(s, s.find("a,b")) == "prompt");
  CHECK(json_top_level_key_at(s, s.find("offset") + 3) == "media");
  CHECK(json_top_level_key_at(s, s.find('7')) == "seed");
  CHECK(json_top_level_key_at(s, s.size() + 100).empty()); // past the closing brace
  CHECK(json_top_level_key_at("[1,2,3]", 4).empty());
  // Invalid or truncated text is fine: the scan only follows strings and brackets.
  CHECK(json_top_level_key_at("{\"k\":\"\xff\xfe", 6) == "k");
  CHECK(json_top_level_key_at(std::string("{\"") + std::string(100, 'k') + "\":1", 104) ==
        std::string(37, 'k') + "...");
}

TEST_CASE("previews render small values exactly like dump") {
  for (const char* text : {"1", "-2.5", "true", "null", R"("a\"b\n")", "[]", "{}", "[1,[2,[3]],{}]",
                           R"({"a":{"b":[null,"x"]},"c":1})", R"("é")"}) {
    json v = json::parse(text);
    CHECK(json_preview(v) == v.dump());
  }
}

TEST_CASE("previews are cut at 60 characters, at a character boundary, whatever the value") {
  CHECK(json_preview(json(std::string(100, 'x'))) == "\"" + std::string(56, 'x') + "...");
  // A cut never splits a UTF-8 character: "é" is 2 bytes, the cut lands before a whole one.
  std::string e;
  for (int i = 0; i < 50; ++i)
    e += "\xc3\xa9";
  std::string p = json_preview(json(e));
  CHECK(p.size() == 60); // '"' + 28 × "é" (56 bytes) + "..."
  CHECK(json::parse("\"" + p.substr(1, p.size() - 4) + "\"") == std::string(e, 0, 56));

  json big = json::array();
  for (int i = 0; i < 100000; ++i)
    big.push_back(i);
  CHECK(json_preview(big).size() == 60);
  CHECK(json_preview(big, 10) == "[0,1,2,...");

  // 100000 levels built without the parser: the preview visits ~60 of them.
  json deep = 1;
  for (int i = 0; i < 100000; ++i)
    deep = json::array({std::move(deep)});
  CHECK(json_preview(deep) == std::string(57, '[') + "...");
  json obj = json::object();
  for (int i = 0; i < 1000; ++i)
    obj[std::string(1, 'k') + std::to_string(i)] = std::string(100, 'v');
  CHECK(json_preview(obj).size() == 60);
}

TEST_CASE("text previews keep printable UTF-8 and replace every other byte") {
  CHECK(json_text_preview("abc") == "abc");
  CHECK(json_text_preview("a\xff"
                          "b\n\x01"
                          "c") == "a?b??c");
  CHECK(json_text_preview("\xc3\xa9t\xc3") == "\xc3\xa9t?"); // a cut-off "é" at the end
  CHECK(json_text_preview("\xed\xa0\x80") == "???");         // a surrogate is not UTF-8
  CHECK(json_text_preview("\xf0\x9f\x98\x80") == "\xf0\x9f\x98\x80");
  CHECK(json_text_preview(std::string(1000, 'z')) == std::string(57, 'z') + "...");
  CHECK(json_text_preview(std::string(1000, '\xff'), 5) == "??...");
}

TEST_CASE("messages are bounded at a UTF-8 boundary") {
  CHECK(bounded_message("short") == "short");
  CHECK(bounded_message(std::string(300, 'm')) == std::string(300, 'm'));
  CHECK(bounded_message(std::string(301, 'm')) == std::string(297, 'm') + "...");
  std::string e;
  for (int i = 0; i < 200; ++i)
    e += "\xc3\xa9";
  std::string b = bounded_message(e);
  CHECK(b.size() == 299); // 148 whole "é" + "..."
  CHECK(b.substr(0, 296) == e.substr(0, 296));
}
