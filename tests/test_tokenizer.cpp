#include "runtime/tokenizer.hpp"

#include <catch.hpp>

using namespace ordo;

TEST_CASE("encode prepends BOS and maps each byte to its value") {
  auto ids = byte_tokenizer::encode("Hi!");
  CHECK(ids == std::vector<int32_t>{256, 'H', 'i', '!'});
  CHECK(byte_tokenizer::encode("") == std::vector<int32_t>{256});
}

TEST_CASE("multi-byte UTF-8 becomes one token per byte, ids 0..255") {
  auto ids = byte_tokenizer::encode("\xc3\xa9"); // é
  CHECK(ids == std::vector<int32_t>{256, 0xc3, 0xa9});
  auto high = byte_tokenizer::encode(std::string(1, '\xff'));
  CHECK(high.back() == 255);
}

TEST_CASE("decode drops BOS and EOS and round-trips any bytes") {
  std::string text = "caf\xc3\xa9 \x01\xff";
  text.push_back('\0');
  auto ids = byte_tokenizer::encode(text);
  ids.push_back(byte_tokenizer::eos_id);
  CHECK(byte_tokenizer::decode(ids) == text);
  CHECK(byte_tokenizer::decode({256, 257}).empty());
  CHECK(byte_tokenizer::decode({-1, 'a', 9999}) == "a");
}

TEST_CASE("decode_one gives one token's bytes, empty for specials") {
  CHECK(byte_tokenizer::decode_one('x') == "x");
  CHECK(byte_tokenizer::decode_one(byte_tokenizer::bos_id).empty());
  CHECK(byte_tokenizer::decode_one(byte_tokenizer::eos_id).empty());
  CHECK(byte_tokenizer::vocab_size == 258);
}
