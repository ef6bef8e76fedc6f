// Byte-level tokenizer: ids 0..255 are the bytes of the UTF-8 text, then BOS and EOS.
// Stateless and thread-safe.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace ordo {

struct byte_tokenizer {
  static constexpr int32_t bos_id = 256;
  static constexpr int32_t eos_id = 257;
  static constexpr int32_t vocab_size = 258;

  // {BOS, byte0, byte1, ...}: every prompt starts with BOS so an empty text still has a token.
  static std::vector<int32_t> encode(const std::string& text);

  // Bytes of the byte ids, in order; BOS/EOS (and any id outside the vocab) are dropped.
  // The result may be invalid UTF-8 when a multi-byte char was cut by max_tokens.
  static std::string decode(const std::vector<int32_t>& ids);

  // One token's bytes ("" for BOS/EOS/out-of-range): the text piece of a streamed chunk.
  static std::string decode_one(int32_t id);
};

} // namespace ordo
