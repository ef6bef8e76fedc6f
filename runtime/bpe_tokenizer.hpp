// Byte-level BPE read from a Hugging Face `tokenizer.json` (the `tokenizers` format), for real
// checkpoints; the seeded presets keep runtime/tokenizer.hpp's byte tokenizer.
//
// encode(text) follows `tokenizers`' Tokenizer::encode step by step:
//   | step                         | what this file does                                            |
//   | added tokens, not normalized | matched literally on the raw text, leftmost then longest       |
//   |                              | (as its Aho-Corasick LeftmostLongest), lstrip/rstrip/          |
//   |                              | single_word applied; each match is one id                      |
//   | normalizer                   | NFC / NFD / NFKC / NFKD (utf8proc) on each piece between them  |
//   | added tokens, normalized     | matched on the normalized pieces the same way                  |
//   | pre_tokenizer                | Split (PCRE2 with UTF + UCP; `\s` as Oniguruma reads it,       |
//   |                              | without U+180E), ByteLevel (GPT-2's regex when use_regex,      |
//   |                              | then bytes -> the byte<->unicode table), Sequence              |
//   | model                        | BPE: lowest merge rank first, leftmost among equals            |
//   | post_processor               | TemplateProcessing's special tokens when add_special_tokens;   |
//   |                              | ByteLevel adds none; so no BOS unless the file asks            |
// decode(ids) is the ByteLevel decoder: each token's characters back to bytes (a token with a
// character outside the table gives its own UTF-8 bytes), unknown ids dropped, then invalid
// UTF-8 as U+FFFD per maximal subpart (runtime/utf8.hpp). bpe_decode_stream yields the same
// text piece by piece and never splits a UTF-8 sequence.
//
// NOTE(untrusted): a tokenizer.json is input. Every size and count it claims is bounded
// (bpe_limits) and anything this file does not implement exactly is refused, naming the file
// and the fault, rather than tokenized differently from `tokenizers`.
// NOTE(unicode): the character classes are PCRE2 10.42's (Unicode 14) and NFC is utf8proc's;
// `tokenizers` uses Oniguruma and unicode-normalization, which may be a version newer, so
// characters assigned since can split differently.
// Thread: load on any thread; a loaded tokenizer is immutable and encode/decode may run on
// several threads at once. Pure core: no CAF or GPU header.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

namespace ordo {

struct tokenizer_error : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// What a tokenizer.json may claim before it is refused.
struct bpe_limits {
  static constexpr size_t max_file_bytes = size_t{96} << 20;  // Qwen3's is 11 MB
  static constexpr size_t max_config_bytes = size_t{4} << 20; // tokenizer_config.json
  static constexpr int max_json_depth = 32;
  static constexpr size_t max_vocab = size_t{1} << 20;    // Qwen3.5: 248,320 ids
  static constexpr size_t max_merges = size_t{1} << 21;
  static constexpr int32_t max_id = (int32_t{1} << 21) - 1;
  static constexpr size_t max_token_bytes = 4096;
  static constexpr size_t max_added_tokens = size_t{1} << 16;
  static constexpr size_t max_added_token_bytes = 1024;
  static constexpr size_t max_regex_bytes = 4096;
  static constexpr size_t max_steps = 16; // normalizers, pre-tokenizers, processors, template items
};

class bpe_tokenizer {
public:
  // `dir`/tokenizer.json and, when it is there, `dir`/tokenizer_config.json (bos/eos/pad names,
  // add_bos_token). Throws tokenizer_error naming the file and the fault.
  static bpe_tokenizer load_dir(const std::string& dir);
  // From the files' texts; `json_name` and `config_name` name them in errors. An empty config
  // text means there is none.
  static bpe_tokenizer from_json(std::string_view tokenizer_json, const std::string& json_name,
                                 std::string_view config_json = {},
                                 const std::string& config_name = "tokenizer_config.json");

  bpe_tokenizer(bpe_tokenizer&&) noexcept;
  bpe_tokenizer& operator=(bpe_tokenizer&&) noexcept;
  ~bpe_tokenizer();

  // `text` must be valid UTF-8 (tokenizer_error otherwise, with the byte offset).
  // add_special_tokens: the post-processor's template (and add_bos_token) apply, as
  // `tokenizers`' encode(text, add_special_tokens=True).
  std::vector<int32_t> encode(std::string_view text, bool add_special_tokens = true) const;

  // The pieces the pre-tokenizer hands the model for `text` (added tokens and normalization
  // applied first; an added token is its own piece), as byte-level strings: for tests.
  std::vector<std::string> pre_tokenize(std::string_view text) const;

  // The whole text of `ids`; with skip_special_tokens, added tokens marked special are left out.
  std::string decode(const std::vector<int32_t>& ids, bool skip_special_tokens = false) const;

  // One token's decoded bytes, not yet UTF-8-checked ("" for an unknown id).
  const std::string& token_bytes(int32_t id) const;
  // The vocabulary string of `id` (an added token's content), nullopt when unknown.
  std::optional<std::string> id_to_token(int32_t id) const;
  std::optional<int32_t> token_to_id(std::string_view token) const;
  bool is_special(int32_t id) const;
  // One past the largest id.
  int32_t vocab_size() const;

  // From tokenizer_config.json, resolved to ids; nullopt when unnamed or not in the vocabulary.
  std::optional<int32_t> bos_id() const;
  std::optional<int32_t> eos_id() const;
  std::optional<int32_t> pad_id() const;

private:
  struct impl;
  explicit bpe_tokenizer(std::unique_ptr<impl> p);
  std::unique_ptr<impl> impl_;
};

// Streamed decode: push() returns the text that is final once `id` is known; a UTF-8 sequence
// still open at the end is held back until it completes or finish() flushes it as U+FFFD.
// The pushes' texts plus finish()'s equal decode() of the same ids.
// Thread: one stream per request; it borrows the tokenizer, which must outlive it.
class bpe_decode_stream {
public:
  explicit bpe_decode_stream(const bpe_tokenizer& tokenizer, bool skip_special_tokens = false);
  std::string push(int32_t id);
  std::string finish();

private:
  const bpe_tokenizer* tokenizer_;
  bool skip_special_;
  std::string pending_; // at most 3 bytes of an open UTF-8 sequence
};

} // namespace ordo
