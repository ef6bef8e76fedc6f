#include "runtime/bpe_tokenizer.hpp"

#include "runtime/json_guard.hpp"
#include "runtime/utf8.hpp"

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>
#include <utf8proc.h>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <array>
#include <cstdlib>
#include <fstream>
#include <queue>
#include <unordered_map>

namespace ordo {

namespace {

using json = nlohmann::json;

// --- UTF-8 -----------------------------------------------------------------------------------

// The code point at `s[i]` and its length; `s` is valid UTF-8 (checked once by valid_utf8).
char32_t next_cp(std::string_view s, size_t i, size_t& len) {
  const auto b0 = static_cast<uint8_t>(s[i]);
  if (b0 < 0x80) {
    len = 1;
    return b0;
  }
  if (b0 < 0xE0) {
    len = 2;
    return (char32_t(b0 & 0x1F) << 6) | (uint8_t(s[i + 1]) & 0x3F);
  }
  if (b0 < 0xF0) {
    len = 3;
    return (char32_t(b0 & 0x0F) << 12) | (char32_t(uint8_t(s[i + 1]) & 0x3F) << 6) |
           (uint8_t(s[i + 2]) & 0x3F);
  }
  len = 4;
  return (char32_t(b0 & 0x07) << 18) | (char32_t(uint8_t(s[i + 1]) & 0x3F) << 12) |
         (char32_t(uint8_t(s[i + 2]) & 0x3F) << 6) | (uint8_t(s[i + 3]) & 0x3F);
}

void append_cp(std::string& out, char32_t cp) {
  if (cp < 0x80) {
    out.push_back(char(cp));
  } else if (cp < 0x800) {
    out.push_back(char(0xC0 | (cp >> 6)));
    out.push_back(char(0x80 | (cp & 0x3F)));
  } else if (cp < 0x10000) {
    out.push_back(char(0xE0 | (cp >> 12)));
    out.push_back(char(0x80 | ((cp >> 6) & 0x3F)));
    out.push_back(char(0x80 | (cp & 0x3F)));
  } else {
    out.push_back(char(0xF0 | (cp >> 18)));
    out.push_back(char(0x80 | ((cp >> 12) & 0x3F)));
    out.push_back(char(0x80 | ((cp >> 6) & 0x3F)));
    out.push_back(char(0x80 | (cp & 0x3F)));
  }
}

// Unicode White_Space (Rust regex's and Oniguruma's `\s`): lstrip / rstrip of added tokens.
bool is_white_space(char32_t c) {
  return (c >= 0x09 && c <= 0x0D) || c == 0x20 || c == 0x85 || c == 0xA0 || c == 0x1680 ||
         (c >= 0x2000 && c <= 0x200A) || c == 0x2028 || c == 0x2029 || c == 0x202F ||
         c == 0x205F || c == 0x3000;
}

// Rust regex's `\w` (single_word added tokens): letters, marks, decimal digits, connectors.
bool is_word_char(char32_t c) {
  switch (utf8proc_category(utf8proc_int32_t(c))) {
  case UTF8PROC_CATEGORY_LU: case UTF8PROC_CATEGORY_LL: case UTF8PROC_CATEGORY_LT:
  case UTF8PROC_CATEGORY_LM: case UTF8PROC_CATEGORY_LO: case UTF8PROC_CATEGORY_MN:
  case UTF8PROC_CATEGORY_MC: case UTF8PROC_CATEGORY_ME: case UTF8PROC_CATEGORY_ND:
  case UTF8PROC_CATEGORY_NL: case UTF8PROC_CATEGORY_PC:
    return true;
  default:
    return c == 0x200C || c == 0x200D;
  }
}

// --- GPT-2's byte <-> unicode table ------------------------------------------------------------

struct byte_table {
  std::array<char32_t, 256> to_cp{};
  std::array<std::string, 256> to_utf8;
  std::unordered_map<char32_t, uint8_t> to_byte;
  byte_table() {
    // Printable bytes stand for themselves; the other 68 take U+0100.. in byte order.
    char32_t next = 256;
    for (int b = 0; b < 256; ++b) {
      const bool printable = (b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE);
      to_cp[b] = printable ? char32_t(b) : next++;
      append_cp(to_utf8[b], to_cp[b]);
      to_byte[to_cp[b]] = uint8_t(b);
    }
  }
};

const byte_table& bytes_table() {
  static const byte_table table;
  return table;
}

// --- errors and JSON access ------------------------------------------------------------------

struct refusal {
  std::string file;
  [[noreturn]] void fail(const std::string& fault) const {
    throw tokenizer_error(file + ": " + fault);
  }
  const json& member(const json& obj, const char* key, const std::string& where) const {
    auto it = obj.find(key);
    if (it == obj.end())
      fail(where + " has no \"" + key + "\"");
    return *it;
  }
  std::string string_of(const json& v, const std::string& what) const {
    if (!v.is_string())
      fail(what + " is " + json_preview(v) + ", not a string");
    return v.get<std::string>();
  }
  bool bool_of(const json& obj, const char* key, bool fallback, const std::string& where) const {
    auto it = obj.find(key);
    if (it == obj.end() || it->is_null())
      return fallback;
    if (!it->is_boolean())
      fail(where + "." + key + " is " + json_preview(*it) + ", not true or false");
    return it->get<bool>();
  }
  static bool is_id(const json& v) {
    return v.is_number_integer() && v.get<int64_t>() >= 0 && v.get<int64_t>() <= bpe_limits::max_id;
  }
  int32_t id_of(const json& v, const std::string& what) const {
    if (!is_id(v))
      fail(what + " is " + json_preview(v) + ", not an id in [0, " +
           std::to_string(bpe_limits::max_id) + "]");
    return int32_t(v.get<int64_t>());
  }
  std::string type_of(const json& v, const std::string& where) const {
    if (!v.is_object())
      fail(where + " is " + json_preview(v) + ", not an object");
    return string_of(member(v, "type", where), where + ".type");
  }
};

json parse_bounded(std::string_view text, const refusal& r, size_t max_bytes) {
  if (text.size() > max_bytes)
    r.fail("is " + std::to_string(text.size()) + " bytes, more than the " +
           std::to_string(max_bytes) + " a tokenizer file may have");
  if (auto deep = json_find_too_deep(text, bpe_limits::max_json_depth))
    r.fail("nests deeper than " + std::to_string(bpe_limits::max_json_depth) + " levels at byte " +
           std::to_string(deep->offset));
  try {
    return json::parse(text);
  } catch (const json::parse_error& e) {
    r.fail(std::string("is not JSON: ") + e.what());
  }
}

std::string read_bounded(const std::string& path, size_t max_bytes, bool& found) {
  std::ifstream in(path, std::ios::binary | std::ios::ate);
  found = bool(in);
  if (!in)
    return {};
  const auto size = static_cast<size_t>(in.tellg());
  if (size > max_bytes)
    throw tokenizer_error(path + ": is " + std::to_string(size) + " bytes, more than the " +
                          std::to_string(max_bytes) + " a tokenizer file may have");
  std::string text(size, '\0');
  in.seekg(0);
  in.read(text.data(), std::streamsize(size));
  if (!in)
    throw tokenizer_error(path + ": could not be read");
  return text;
}

// --- normalizers (utf8proc) ------------------------------------------------------------------

enum class unicode_form : uint8_t { nfc, nfd, nfkc, nfkd };

std::string normalize_form(std::string_view text, unicode_form form) {
  bool ascii = true;
  for (char c : text)
    ascii = ascii && static_cast<uint8_t>(c) < 0x80;
  if (ascii) // every normal form leaves ASCII as it is
    return std::string(text);
  int options = UTF8PROC_STABLE;
  switch (form) {
  case unicode_form::nfc: options |= UTF8PROC_COMPOSE; break;
  case unicode_form::nfd: options |= UTF8PROC_DECOMPOSE; break;
  case unicode_form::nfkc: options |= UTF8PROC_COMPOSE | UTF8PROC_COMPAT; break;
  case unicode_form::nfkd: options |= UTF8PROC_DECOMPOSE | UTF8PROC_COMPAT; break;
  }
  utf8proc_uint8_t* out = nullptr;
  const auto n = utf8proc_map(reinterpret_cast<const utf8proc_uint8_t*>(text.data()),
                              utf8proc_ssize_t(text.size()), &out, utf8proc_option_t(options));
  if (n < 0)
    throw tokenizer_error(std::string("normalization failed: ") + utf8proc_errmsg(n));
  std::string result(reinterpret_cast<const char*>(out), size_t(n));
  std::free(out);
  return result;
}

// --- the split regex (PCRE2) -----------------------------------------------------------------

// `tokenizers` compiles the pattern with Oniguruma, whose Unicode `\s` is U+0009-000D, U+0085
// and \p{Z}; PCRE2's (UCP) also takes U+180E, so `\s` is spelled out as Oniguruma's set.
// Constructs the two read differently are refused.
constexpr const char* onig_space = "\\t\\n\\x0B\\f\\r\\x{85}\\p{Z}";

std::string onig_compatible(const std::string& pattern, const refusal& r) {
  std::string out;
  bool in_class = false;
  for (size_t i = 0; i < pattern.size(); ++i) {
    const char c = pattern[i];
    if (c == '\\' && i + 1 < pattern.size()) {
      const char e = pattern[++i];
      if (e == 's')
        out += in_class ? onig_space : "[" + std::string(onig_space) + "]";
      else if (e == 'S' && !in_class)
        out += "[^" + std::string(onig_space) + "]";
      else if (e == 'S' || e == 'h' || e == 'H' || e == 'Q')
        r.fail(std::string("pre_tokenizer regex uses \\") + e +
               ", which Oniguruma and PCRE2 read differently");
      else
        out += c, out += e;
      continue;
    }
    if (c == '[' && !in_class) {
      in_class = true;
      out += c;
      if (i + 1 < pattern.size() && pattern[i + 1] == '^')
        out += pattern[++i];
      if (i + 1 < pattern.size() && pattern[i + 1] == ']') // a leading ']' is literal
        out += pattern[++i];
      continue;
    }
    if (c == '[' && in_class && i + 1 < pattern.size() && pattern[i + 1] == ':')
      r.fail("pre_tokenizer regex uses a POSIX class inside [...]");
    if (c == ']' && in_class)
      in_class = false;
    out += c;
  }
  return out;
}

struct split_regex {
  pcre2_code* code = nullptr;
  std::string source; // as tokenizer.json has it
  split_regex() = default;
  split_regex(const split_regex&) = delete;
  split_regex& operator=(const split_regex&) = delete;
  ~split_regex() { pcre2_code_free(code); }
};

std::unique_ptr<split_regex> compile_split(const std::string& pattern, bool literal,
                                           const refusal& r) {
  if (pattern.empty() || pattern.size() > bpe_limits::max_regex_bytes)
    r.fail("pre_tokenizer pattern has " + std::to_string(pattern.size()) +
           " bytes, not 1 to " + std::to_string(bpe_limits::max_regex_bytes));
  auto re = std::make_unique<split_regex>();
  re->source = pattern;
  const std::string text = literal ? pattern : onig_compatible(pattern, r);
  int err = 0;
  PCRE2_SIZE at = 0;
  const uint32_t options = PCRE2_UTF | PCRE2_UCP | (literal ? PCRE2_LITERAL : 0u);
  re->code = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(text.data()), text.size(), options, &err,
                           &at, nullptr);
  if (!re->code) {
    PCRE2_UCHAR msg[256];
    pcre2_get_error_message(err, msg, sizeof msg);
    r.fail("pre_tokenizer regex " + json_preview(json(pattern)) + " does not compile at offset " +
           std::to_string(at) + ": " + reinterpret_cast<const char*>(msg));
  }
  uint32_t min_length = 0;
  pcre2_pattern_info(re->code, PCRE2_INFO_MINLENGTH, &min_length);
  if (min_length == 0)
    r.fail("pre_tokenizer regex " + json_preview(json(pattern)) +
           " can match the empty string, which ordo does not split as tokenizers does");
  pcre2_jit_compile(re->code, PCRE2_JIT_COMPLETE); // optional: the interpreter runs without it
  return re;
}

// Match data for one encode call (pcre2 match data is not shared between threads).
struct match_scratch {
  pcre2_match_data* data = nullptr;
  pcre2_match_context* context = nullptr;
  match_scratch() {
    data = pcre2_match_data_create(4, nullptr);
    context = pcre2_match_context_create(nullptr);
    pcre2_set_match_limit(context, 50'000'000);
  }
  match_scratch(const match_scratch&) = delete;
  match_scratch& operator=(const match_scratch&) = delete;
  ~match_scratch() {
    pcre2_match_data_free(data);
    pcre2_match_context_free(context);
  }
};

// The [start, end) of every match of `re` in `s`, leftmost first, non-overlapping.
std::vector<std::pair<size_t, size_t>> find_all(const split_regex& re, std::string_view s,
                                                match_scratch& m) {
  std::vector<std::pair<size_t, size_t>> found;
  size_t at = 0;
  while (at < s.size()) {
    int rc = pcre2_match(re.code, reinterpret_cast<PCRE2_SPTR>(s.data()), s.size(), at,
                         PCRE2_NO_UTF_CHECK, m.data, m.context);
    if (rc == PCRE2_ERROR_JIT_STACKLIMIT)
      rc = pcre2_match(re.code, reinterpret_cast<PCRE2_SPTR>(s.data()), s.size(), at,
                       PCRE2_NO_UTF_CHECK | PCRE2_NO_JIT, m.data, m.context);
    if (rc == PCRE2_ERROR_NOMATCH)
      break;
    if (rc < 0) {
      PCRE2_UCHAR msg[256];
      pcre2_get_error_message(rc, msg, sizeof msg);
      throw tokenizer_error(std::string("pre_tokenizer regex failed on the text: ") +
                            reinterpret_cast<const char*>(msg));
    }
    const PCRE2_SIZE* ov = pcre2_get_ovector_pointer(m.data);
    if (ov[1] <= ov[0]) // compile_split refused patterns that match empty; \K could still
      throw tokenizer_error("pre_tokenizer regex matched the empty string");
    found.emplace_back(ov[0], ov[1]);
    at = ov[1];
  }
  return found;
}

// GPT-2's pattern: what the ByteLevel pre-tokenizer splits with when use_regex is true.
constexpr const char* gpt2_pattern =
    "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)|\\s+";

// --- pipeline steps --------------------------------------------------------------------------

enum class split_behavior : uint8_t { isolated, removed };

struct pre_step {
  enum kind_t : uint8_t { split, byte_level } kind = split;
  std::shared_ptr<split_regex> regex; // split; byte_level with use_regex
  split_behavior behavior = split_behavior::isolated;
  bool add_prefix_space = false;
};

struct template_item {
  bool sequence = false;        // $A
  std::vector<int32_t> ids;     // a special token's ids
};

// A byte trie over added tokens' contents: leftmost-longest matching (aho-corasick's
// MatchKind::LeftmostLongest gives the same matches: the earliest start, then the longest).
struct token_trie {
  struct node {
    std::unordered_map<uint8_t, int32_t> next;
    int32_t token = -1; // index into the added-token list, when a content ends here
  };
  std::vector<node> nodes{1};
  std::array<bool, 256> first{};
  bool empty() const { return nodes.size() == 1; }
  void insert(std::string_view content, int32_t token) {
    int32_t at = 0;
    first[uint8_t(content[0])] = true;
    for (char c : content) {
      auto it = nodes[at].next.find(uint8_t(c));
      if (it == nodes[at].next.end()) {
        nodes.emplace_back();
        it = nodes[at].next.emplace(uint8_t(c), int32_t(nodes.size() - 1)).first;
      }
      at = it->second;
    }
    if (nodes[at].token < 0) // the first of equal contents wins, as in aho-corasick
      nodes[at].token = token;
  }
  // The longest content starting at `i`: its token and length, or token -1.
  std::pair<int32_t, size_t> longest_at(std::string_view s, size_t i) const {
    std::pair<int32_t, size_t> best{-1, 0};
    int32_t at = 0;
    for (size_t k = i; k < s.size(); ++k) {
      auto it = nodes[at].next.find(uint8_t(s[k]));
      if (it == nodes[at].next.end())
        break;
      at = it->second;
      if (nodes[at].token >= 0)
        best = {nodes[at].token, k + 1 - i};
    }
    return best;
  }
};

struct added_token {
  int32_t id = 0;
  std::string content;
  bool special = false, normalized = false, lstrip = false, rstrip = false, single_word = false;
};

// A piece of the text on its way through encode: text still to tokenize, or a matched token.
struct piece {
  std::string text;
  int32_t token_id = -1;
};

} // namespace

struct bpe_tokenizer::impl {
  std::string file;
  // vocabulary
  std::unordered_map<std::string, int32_t> vocab; // the model's and added tokens' strings
  std::vector<std::string> id_token;              // "" where no token
  std::vector<uint8_t> id_known;
  std::vector<std::string> id_bytes; // ByteLevel-decoded
  std::vector<uint8_t> id_special;
  // merges: (left id, right id) -> (rank, merged id)
  std::unordered_map<uint64_t, std::pair<int32_t, int32_t>> merges;
  bool ignore_merges = false;
  bool byte_fallback = false;
  int32_t unk_id = -1;
  bool fuse_unk = false;
  // added tokens
  std::vector<added_token> added;
  token_trie raw_trie, normalized_trie;
  // pipeline
  std::vector<unicode_form> normalizers;
  std::vector<pre_step> pre_steps;
  std::vector<template_item> single_template; // empty: no special tokens added
  // tokenizer_config.json
  std::optional<int32_t> bos, eos, pad;
  bool add_bos = false, add_eos = false;

  std::string normalize(std::string_view s) const {
    std::string out(s);
    for (auto form : normalizers)
      out = normalize_form(out, form);
    return out;
  }

  // `tokenizers`' AddedVocabulary::find_matches on one piece's text.
  void split_added(const std::string& s, const token_trie& trie, std::vector<piece>& out) const {
    if (trie.empty() || s.empty()) {
      out.push_back({s, -1});
      return;
    }
    size_t start_offset = 0; // end of the last accepted match
    size_t i = 0;
    while (i < s.size()) {
      if (!trie.first[uint8_t(s[i])]) {
        ++i;
        continue;
      }
      auto [token, len] = trie.longest_at(s, i);
      if (token < 0) {
        ++i;
        continue;
      }
      const added_token& t = added[size_t(token)];
      size_t start = i, stop = i + len;
      i = stop; // the matcher resumes after this match, kept or not
      if (t.single_word) {
        bool before_ok = true, after_ok = true;
        if (start > 0) {
          size_t p = start - 1;
          while (p > 0 && (uint8_t(s[p]) & 0xC0) == 0x80)
            --p;
          size_t l = 0;
          before_ok = !is_word_char(next_cp(s, p, l));
        }
        if (stop < s.size()) {
          size_t l = 0;
          after_ok = !is_word_char(next_cp(s, stop, l));
        }
        if (!before_ok || !after_ok)
          continue;
      }
      if (t.lstrip) {
        size_t p = start;
        while (p > start_offset) {
          size_t q = p - 1;
          while (q > 0 && (uint8_t(s[q]) & 0xC0) == 0x80)
            --q;
          size_t l = 0;
          if (!is_white_space(next_cp(s, q, l)))
            break;
          p = q;
        }
        start = p;
      }
      if (t.rstrip) {
        while (stop < s.size()) {
          size_t l = 0;
          if (!is_white_space(next_cp(s, stop, l)))
            break;
          stop += l;
        }
        i = stop;
      }
      if (start_offset < start)
        out.push_back({s.substr(start_offset, start - start_offset), -1});
      out.push_back({s.substr(start, stop - start), t.id});
      start_offset = stop;
    }
    if (start_offset < s.size())
      out.push_back({s.substr(start_offset), -1});
  }

  // Added tokens, normalization and pre-tokenization: the pieces the model sees.
  std::vector<piece> pieces_of(std::string_view text, match_scratch& m) const {
    if (auto bad = invalid_utf8_at(text); bad != std::string_view::npos)
      throw tokenizer_error("the text is not valid UTF-8 at byte " + std::to_string(bad));
    std::vector<piece> raw, normalized, result;
    split_added(std::string(text), raw_trie, raw);
    for (auto& p : raw) {
      if (p.token_id >= 0)
        normalized.push_back(std::move(p));
      else
        split_added(normalize(p.text), normalized_trie, normalized);
    }
    for (auto& p : normalized) {
      if (p.token_id >= 0) {
        result.push_back(std::move(p));
        continue;
      }
      std::vector<std::string> parts{std::move(p.text)};
      for (const auto& step : pre_steps)
        parts = apply(step, parts, m);
      for (auto& s : parts)
        if (!s.empty())
          result.push_back({std::move(s), -1});
    }
    return result;
  }

  std::vector<std::string> apply(const pre_step& step, const std::vector<std::string>& in,
                                 match_scratch& m) const {
    std::vector<std::string> out;
    for (const auto& s0 : in) {
      if (s0.empty())
        continue;
      std::string s = s0;
      if (step.kind == pre_step::byte_level && step.add_prefix_space && s[0] != ' ')
        s.insert(s.begin(), ' ');
      std::vector<std::string> parts;
      if (step.regex) {
        size_t prev = 0;
        for (auto [a, b] : find_all(*step.regex, s, m)) {
          if (prev < a)
            parts.push_back(s.substr(prev, a - prev));
          if (step.behavior == split_behavior::isolated)
            parts.push_back(s.substr(a, b - a));
          prev = b;
        }
        if (prev < s.size())
          parts.push_back(s.substr(prev));
      } else {
        parts.push_back(std::move(s));
      }
      if (step.kind == pre_step::byte_level) {
        const auto& table = bytes_table();
        for (auto& part : parts) {
          std::string mapped;
          mapped.reserve(part.size() * 2);
          for (char c : part)
            mapped += table.to_utf8[uint8_t(c)];
          part = std::move(mapped);
        }
      }
      for (auto& part : parts)
        out.push_back(std::move(part));
    }
    return out;
  }

  // BPE on one pre-token, as `tokenizers`' Word::merge_all: a heap of (rank, position) merges,
  // the lowest rank first and the leftmost among equals; stale entries are skipped.
  void bpe(const std::string& word, std::vector<int32_t>& ids) const {
    if (ignore_merges) {
      if (auto it = vocab.find(word); it != vocab.end()) {
        ids.push_back(it->second);
        return;
      }
    }
    struct symbol {
      int32_t id;
      int32_t prev, next;
      bool live;
    };
    std::vector<symbol> sym;
    bool last_unk = false;
    for (size_t i = 0; i < word.size();) {
      size_t len = 0;
      next_cp(word, i, len);
      const std::string ch = word.substr(i, len);
      i += len;
      if (auto it = vocab.find(ch); it != vocab.end()) {
        sym.push_back({it->second, 0, 0, true});
        last_unk = false;
        continue;
      }
      if (byte_fallback) {
        std::vector<int32_t> fb;
        for (char c : ch) {
          static const char* hex = "0123456789ABCDEF";
          const std::string name = std::string("<0x") + hex[uint8_t(c) >> 4] + hex[uint8_t(c) & 15] + ">";
          auto it = vocab.find(name);
          if (it == vocab.end()) {
            fb.clear();
            break;
          }
          fb.push_back(it->second);
        }
        if (!fb.empty()) {
          for (int32_t id : fb)
            sym.push_back({id, 0, 0, true});
          last_unk = false;
          continue;
        }
      }
      if (unk_id >= 0) {
        if (!(fuse_unk && last_unk))
          sym.push_back({unk_id, 0, 0, true});
        last_unk = true;
      } // no unk token: the character is dropped, as tokenizers does
    }
    const auto n = int32_t(sym.size());
    for (int32_t k = 0; k < n; ++k)
      sym[size_t(k)].prev = k - 1, sym[size_t(k)].next = k + 1 < n ? k + 1 : -1;

    struct candidate {
      int32_t rank, pos, new_id;
      bool operator>(const candidate& o) const {
        return rank != o.rank ? rank > o.rank : pos > o.pos;
      }
    };
    std::priority_queue<candidate, std::vector<candidate>, std::greater<candidate>> queue;
    auto lookup = [&](int32_t a, int32_t b) -> const std::pair<int32_t, int32_t>* {
      auto it = merges.find((uint64_t(uint32_t(a)) << 32) | uint32_t(b));
      return it == merges.end() ? nullptr : &it->second;
    };
    for (int32_t k = 0; k + 1 < n; ++k)
      if (auto m = lookup(sym[size_t(k)].id, sym[size_t(k + 1)].id))
        queue.push({m->first, k, m->second});
    while (!queue.empty()) {
      const candidate top = queue.top();
      queue.pop();
      symbol& left = sym[size_t(top.pos)];
      if (!left.live || left.next < 0)
        continue;
      symbol& right = sym[size_t(left.next)];
      auto m = lookup(left.id, right.id);
      if (!m || m->second != top.new_id)
        continue; // stale: one side merged since
      left.id = top.new_id;
      right.live = false;
      left.next = right.next;
      if (right.next >= 0)
        sym[size_t(right.next)].prev = top.pos;
      if (left.prev >= 0)
        if (auto pm = lookup(sym[size_t(left.prev)].id, left.id))
          queue.push({pm->first, left.prev, pm->second});
      if (left.next >= 0)
        if (auto nm = lookup(left.id, sym[size_t(left.next)].id))
          queue.push({nm->first, top.pos, nm->second});
    }
    for (const auto& s : sym)
      if (s.live)
        ids.push_back(s.id);
  }
};

namespace {

unicode_form form_of(const std::string& type, const refusal& r, const std::string& where) {
  if (type == "NFC") return unicode_form::nfc;
  if (type == "NFD") return unicode_form::nfd;
  if (type == "NFKC") return unicode_form::nfkc;
  if (type == "NFKD") return unicode_form::nfkd;
  r.fail(where + " is a " + json_preview(json(type)) +
         " normalizer; ordo implements NFC, NFD, NFKC, NFKD and Sequence of them");
}

void read_normalizer(const json& n, const refusal& r, std::vector<unicode_form>& out,
                     const std::string& where) {
  if (n.is_null())
    return;
  const std::string type = r.type_of(n, where);
  if (type == "Sequence") {
    const json& list = r.member(n, "normalizers", where);
    if (!list.is_array())
      r.fail(where + ".normalizers is not a list");
    for (size_t i = 0; i < list.size(); ++i) {
      if (out.size() >= bpe_limits::max_steps)
        r.fail(where + " has more than " + std::to_string(bpe_limits::max_steps) + " normalizers");
      read_normalizer(list[i], r, out, where + ".normalizers[" + std::to_string(i) + "]");
    }
    return;
  }
  if (out.size() >= bpe_limits::max_steps)
    r.fail(where + " has more than " + std::to_string(bpe_limits::max_steps) + " normalizers");
  out.push_back(form_of(type, r, where));
}

void read_pre_tokenizer(const json& p, const refusal& r, std::vector<pre_step>& out,
                        const std::string& where) {
  if (p.is_null())
    return;
  const std::string type = r.type_of(p, where);
  if (type == "Sequence") {
    const json& list = r.member(p, "pretokenizers", where);
    if (!list.is_array())
      r.fail(where + ".pretokenizers is not a list");
    for (size_t i = 0; i < list.size(); ++i)
      read_pre_tokenizer(list[i], r, out, where + ".pretokenizers[" + std::to_string(i) + "]");
    return;
  }
  if (out.size() >= bpe_limits::max_steps)
    r.fail(where + " has more than " + std::to_string(bpe_limits::max_steps) + " pre-tokenizers");
  pre_step step;
  if (type == "Split") {
    step.kind = pre_step::split;
    const json& pattern = r.member(p, "pattern", where);
    if (!pattern.is_object() || pattern.size() != 1 ||
        (!pattern.contains("Regex") && !pattern.contains("String")))
      r.fail(where + ".pattern is " + json_preview(pattern) + ", not {\"Regex\": ...} or {\"String\": ...}");
    const bool literal = pattern.contains("String");
    step.regex = compile_split(r.string_of(pattern.begin().value(), where + ".pattern"), literal, r);
    const std::string behavior = r.string_of(r.member(p, "behavior", where), where + ".behavior");
    if (behavior == "Isolated")
      step.behavior = split_behavior::isolated;
    else if (behavior == "Removed")
      step.behavior = split_behavior::removed;
    else
      r.fail(where + ".behavior is " + json_preview(json(behavior)) +
             "; ordo implements Isolated and Removed");
    if (r.bool_of(p, "invert", false, where))
      r.fail(where + ".invert is true; ordo implements only false");
  } else if (type == "ByteLevel") {
    step.kind = pre_step::byte_level;
    step.add_prefix_space = r.bool_of(p, "add_prefix_space", true, where);
    if (r.bool_of(p, "use_regex", true, where))
      step.regex = compile_split(gpt2_pattern, false, r);
  } else {
    r.fail(where + " is a " + json_preview(json(type)) +
           " pre-tokenizer; ordo implements Split, ByteLevel and Sequence of them");
  }
  out.push_back(std::move(step));
}

void read_post_processor(const json& p, const refusal& r, const std::vector<uint8_t>& known,
                         std::vector<template_item>& out, const std::string& where) {
  if (p.is_null())
    return;
  const std::string type = r.type_of(p, where);
  if (type == "ByteLevel")
    return; // trims offsets only; adds no id
  if (type == "Sequence") {
    const json& list = r.member(p, "processors", where);
    if (!list.is_array() || list.size() > bpe_limits::max_steps)
      r.fail(where + ".processors is not a list of at most " + std::to_string(bpe_limits::max_steps));
    for (size_t i = 0; i < list.size(); ++i)
      read_post_processor(list[i], r, known, out, where + ".processors[" + std::to_string(i) + "]");
    return;
  }
  if (type != "TemplateProcessing")
    r.fail(where + " is a " + json_preview(json(type)) +
           " post-processor; ordo implements TemplateProcessing, ByteLevel and Sequence of them");
  if (!out.empty())
    r.fail(where + " is a second TemplateProcessing");
  const json& single = r.member(p, "single", where);
  if (!single.is_array() || single.empty() || single.size() > bpe_limits::max_steps)
    r.fail(where + ".single is not a list of 1 to " + std::to_string(bpe_limits::max_steps) + " items");
  const json& specials = p.contains("special_tokens") ? p["special_tokens"] : json::object();
  bool has_a = false;
  for (size_t i = 0; i < single.size(); ++i) {
    const std::string at = where + ".single[" + std::to_string(i) + "]";
    const json& item = single[i];
    if (!item.is_object() || item.size() != 1)
      r.fail(at + " is " + json_preview(item) + ", not {\"Sequence\": ...} or {\"SpecialToken\": ...}");
    template_item ti;
    if (item.contains("Sequence")) {
      const std::string seq = r.string_of(r.member(item["Sequence"], "id", at), at + ".Sequence.id");
      if (seq != "A" || has_a)
        r.fail(at + " names sequence " + json_preview(json(seq)) + "; a single template has one A");
      has_a = true;
      ti.sequence = true;
    } else if (item.contains("SpecialToken")) {
      const std::string name = r.string_of(r.member(item["SpecialToken"], "id", at), at + ".SpecialToken.id");
      auto it = specials.find(name);
      if (it == specials.end())
        r.fail(at + " names special token " + json_preview(json(name)) + ", which special_tokens lacks");
      const json& ids = r.member(*it, "ids", where + ".special_tokens." + name);
      if (!ids.is_array() || ids.size() > bpe_limits::max_steps)
        r.fail(where + ".special_tokens." + name + ".ids is not a short list");
      for (const auto& id : ids) {
        const int32_t v = r.id_of(id, where + ".special_tokens." + name + ".ids[]");
        if (size_t(v) >= known.size() || !known[size_t(v)])
          r.fail(where + ".special_tokens." + name + " has id " + std::to_string(v) +
                 ", which is not in the vocabulary");
        ti.ids.push_back(v);
      }
    } else {
      r.fail(at + " is " + json_preview(item) + ", not {\"Sequence\": ...} or {\"SpecialToken\": ...}");
    }
    out.push_back(std::move(ti));
  }
  if (!has_a)
    r.fail(where + ".single has no Sequence A");
}

void read_decoder(const json& d, const refusal& r, const std::string& where) {
  if (d.is_null())
    r.fail(where + " is null; ordo decodes byte-level tokenizers only (decoder ByteLevel)");
  const std::string type = r.type_of(d, where);
  if (type == "Sequence") {
    const json& list = r.member(d, "decoders", where);
    if (!list.is_array() || list.size() != 1)
      r.fail(where + ".decoders is not a list of one ByteLevel decoder");
    read_decoder(list[0], r, where + ".decoders[0]");
    return;
  }
  if (type != "ByteLevel")
    r.fail(where + " is a " + json_preview(json(type)) +
           " decoder; ordo decodes byte-level tokenizers only (decoder ByteLevel)");
}

// A special-token name in tokenizer_config.json: a string, null, or {"content": "..."}.
std::optional<std::string> config_token(const json& cfg, const char* key, const refusal& r) {
  auto it = cfg.find(key);
  if (it == cfg.end() || it->is_null())
    return std::nullopt;
  if (it->is_string())
    return it->get<std::string>();
  if (it->is_object() && it->contains("content"))
    return r.string_of((*it)["content"], std::string(key) + ".content");
  r.fail(std::string(key) + " is " + json_preview(*it) + ", not a string, null or {\"content\": ...}");
}

} // namespace

bpe_tokenizer::bpe_tokenizer(std::unique_ptr<impl> p) : impl_(std::move(p)) {}
bpe_tokenizer::bpe_tokenizer(bpe_tokenizer&&) noexcept = default;
bpe_tokenizer& bpe_tokenizer::operator=(bpe_tokenizer&&) noexcept = default;
bpe_tokenizer::~bpe_tokenizer() = default;

bpe_tokenizer bpe_tokenizer::load_dir(const std::string& dir) {
  bool found = false;
  const std::string path = dir + "/tokenizer.json";
  const std::string text = read_bounded(path, bpe_limits::max_file_bytes, found);
  if (!found)
    throw tokenizer_error(path + ": cannot be opened");
  const std::string cfg_path = dir + "/tokenizer_config.json";
  bool cfg_found = false;
  const std::string cfg = read_bounded(cfg_path, bpe_limits::max_config_bytes, cfg_found);
  if (cfg_found && cfg.empty())
    throw tokenizer_error(cfg_path + ": is empty");
  return from_json(text, path, cfg, cfg_path);
}

bpe_tokenizer bpe_tokenizer::from_json(std::string_view tokenizer_json, const std::string& json_name,
                                       std::string_view config_json, const std::string& config_name) {
  const refusal r{json_name};
  const json root = parse_bounded(tokenizer_json, r, bpe_limits::max_file_bytes);
  if (!root.is_object())
    r.fail("is not a JSON object");
  auto t = std::make_unique<impl>();
  t->file = json_name;
  for (const char* key : {"truncation", "padding"})
    if (root.contains(key) && !root[key].is_null())
      r.fail(std::string(key) + " is set; ordo does not truncate or pad prompts");

  // --- model ---
  const json& model = r.member(root, "model", "the file");
  if (!model.is_object())
    r.fail("model is not an object");
  if (model.contains("type") && !(model["type"].is_string() && model["type"] == "BPE"))
    r.fail("model.type is " + json_preview(model["type"]) + "; ordo implements BPE");
  if (model.contains("dropout") && !model["dropout"].is_null() &&
      !(model["dropout"].is_number() && model["dropout"].get<double>() == 0.0))
    r.fail("model.dropout is " + json_preview(model["dropout"]) + "; ordo tokenizes deterministically");
  for (const char* key : {"continuing_subword_prefix", "end_of_word_suffix"})
    if (model.contains(key) && !model[key].is_null() && model[key] != "")
      r.fail(std::string("model.") + key + " is " + json_preview(model[key]) + "; ordo implements none");
  t->ignore_merges = r.bool_of(model, "ignore_merges", false, "model");
  t->byte_fallback = r.bool_of(model, "byte_fallback", false, "model");
  t->fuse_unk = r.bool_of(model, "fuse_unk", false, "model");

  const json& vocab = r.member(model, "vocab", "model");
  if (!vocab.is_object())
    r.fail("model.vocab is not an object");
  if (vocab.size() > bpe_limits::max_vocab)
    r.fail("model.vocab has " + std::to_string(vocab.size()) + " tokens, more than " +
           std::to_string(bpe_limits::max_vocab));
  int32_t max_id = -1;
  std::vector<std::pair<int32_t, const std::string*>> entries;
  entries.reserve(vocab.size());
  for (auto it = vocab.begin(); it != vocab.end(); ++it) {
    const int32_t id = refusal::is_id(it.value())
                           ? int32_t(it.value().get<int64_t>())
                           : r.id_of(it.value(), "model.vocab[" + json_preview(json(it.key())) + "]");
    if (it.key().empty() || it.key().size() > bpe_limits::max_token_bytes)
      r.fail("model.vocab has a token of " + std::to_string(it.key().size()) + " bytes, not 1 to " +
             std::to_string(bpe_limits::max_token_bytes));
    entries.emplace_back(id, &it.key());
    max_id = std::max(max_id, id);
  }
  const json& added = root.contains("added_tokens") ? root["added_tokens"] : json::array();
  if (!added.is_array())
    r.fail("added_tokens is not a list");
  if (added.size() > bpe_limits::max_added_tokens)
    r.fail("added_tokens has " + std::to_string(added.size()) + " tokens, more than " +
           std::to_string(bpe_limits::max_added_tokens));
  for (size_t i = 0; i < added.size(); ++i) {
    const std::string at = "added_tokens[" + std::to_string(i) + "]";
    if (!added[i].is_object())
      r.fail(at + " is not an object");
    added_token a;
    a.id = r.id_of(r.member(added[i], "id", at), at + ".id");
    a.content = r.string_of(r.member(added[i], "content", at), at + ".content");
    if (a.content.empty() || a.content.size() > bpe_limits::max_added_token_bytes)
      r.fail(at + ".content has " + std::to_string(a.content.size()) + " bytes, not 1 to " +
             std::to_string(bpe_limits::max_added_token_bytes));
    if (invalid_utf8_at(a.content) != std::string_view::npos)
      r.fail(at + ".content is not valid UTF-8");
    a.special = r.bool_of(added[i], "special", false, at);
    a.normalized = r.bool_of(added[i], "normalized", !a.special, at);
    a.lstrip = r.bool_of(added[i], "lstrip", false, at);
    a.rstrip = r.bool_of(added[i], "rstrip", false, at);
    a.single_word = r.bool_of(added[i], "single_word", false, at);
    max_id = std::max(max_id, a.id);
    t->added.push_back(std::move(a));
  }
  if (max_id < 0)
    r.fail("model.vocab is empty");
  const size_t n = size_t(max_id) + 1;
  t->id_token.assign(n, {});
  t->id_known.assign(n, 0);
  t->id_special.assign(n, 0);
  t->vocab.reserve(entries.size() + t->added.size());
  for (auto [id, token] : entries) {
    if (t->id_known[size_t(id)])
      r.fail("model.vocab gives id " + std::to_string(id) + " to both " +
             json_preview(json(t->id_token[size_t(id)])) + " and " + json_preview(json(*token)));
    t->id_known[size_t(id)] = 1;
    t->id_token[size_t(id)] = *token;
    t->vocab.emplace(*token, id);
  }
  for (const auto& a : t->added) {
    auto in_vocab = t->vocab.find(a.content);
    if (in_vocab != t->vocab.end() && in_vocab->second != a.id)
      r.fail("added token " + json_preview(json(a.content)) + " has id " + std::to_string(a.id) +
             ", but the vocabulary gives it " + std::to_string(in_vocab->second));
    if (in_vocab == t->vocab.end() && t->id_known[size_t(a.id)])
      r.fail("added token " + json_preview(json(a.content)) + " has id " + std::to_string(a.id) +
             ", which the vocabulary gives to " + json_preview(json(t->id_token[size_t(a.id)])));
    t->id_known[size_t(a.id)] = 1;
    t->id_token[size_t(a.id)] = a.content;
    t->id_special[size_t(a.id)] = a.special;
    t->vocab.emplace(a.content, a.id);
  }
  if (model.contains("unk_token") && !model["unk_token"].is_null()) {
    const std::string unk = r.string_of(model["unk_token"], "model.unk_token");
    auto it = t->vocab.find(unk);
    if (it == t->vocab.end())
      r.fail("model.unk_token " + json_preview(json(unk)) + " is not in the vocabulary");
    t->unk_id = it->second;
  }

  const json& merges = r.member(model, "merges", "model");
  if (!merges.is_array())
    r.fail("model.merges is not a list");
  if (merges.size() > bpe_limits::max_merges)
    r.fail("model.merges has " + std::to_string(merges.size()) + " merges, more than " +
           std::to_string(bpe_limits::max_merges));
  t->merges.reserve(merges.size());
  for (size_t rank = 0; rank < merges.size(); ++rank) {
    const json& m = merges[rank];
    std::string a, b;
    if (m.is_string()) { // "a b"
      const std::string& s = m.get_ref<const std::string&>();
      const size_t sp = s.find(' ');
      if (sp == std::string::npos || sp == 0 || sp + 1 >= s.size() || s.find(' ', sp + 1) != std::string::npos)
        r.fail("model.merges[" + std::to_string(rank) + "] is " + json_preview(m) +
               ", not two tokens separated by one space");
      a = s.substr(0, sp), b = s.substr(sp + 1);
    } else if (m.is_array() && m.size() == 2 && m[0].is_string() && m[1].is_string()) { // ["a","b"]
      a = m[0].get<std::string>(), b = m[1].get<std::string>();
    } else {
      r.fail("model.merges[" + std::to_string(rank) + "] is " + json_preview(m) +
             ", not \"a b\" or [\"a\", \"b\"]");
    }
    auto ia = t->vocab.find(a), ib = t->vocab.find(b), im = t->vocab.find(a + b);
    for (auto [it, name] : {std::pair{ia, &a}, std::pair{ib, &b}})
      if (it == t->vocab.end())
        r.fail("model.merges[" + std::to_string(rank) + "] names " + json_preview(json(*name)) +
               ", which is not in the vocabulary");
    if (im == t->vocab.end())
      r.fail("model.merges[" + std::to_string(rank) + "] makes " + json_preview(json(a + b)) +
             ", which is not in the vocabulary");
    // A pair listed twice keeps its last rank, as tokenizers' map does.
    t->merges[(uint64_t(uint32_t(ia->second)) << 32) | uint32_t(ib->second)] = {int32_t(rank), im->second};
  }

  // --- pipeline ---
  read_normalizer(root.contains("normalizer") ? root["normalizer"] : json(), r, t->normalizers, "normalizer");
  read_pre_tokenizer(root.contains("pre_tokenizer") ? root["pre_tokenizer"] : json(), r, t->pre_steps,
                     "pre_tokenizer");
  if (std::none_of(t->pre_steps.begin(), t->pre_steps.end(),
                   [](const pre_step& s) { return s.kind == pre_step::byte_level; }))
    r.fail("pre_tokenizer has no ByteLevel step; ordo implements byte-level BPE only");
  read_post_processor(root.contains("post_processor") ? root["post_processor"] : json(), r, t->id_known,
                      t->single_template, "post_processor");
  read_decoder(root.contains("decoder") ? root["decoder"] : json(), r, "decoder");

  for (size_t i = 0; i < t->added.size(); ++i) {
    const auto& a = t->added[i];
    if (a.normalized) {
      const std::string content = t->normalize(a.content);
      if (!content.empty())
        t->normalized_trie.insert(content, int32_t(i));
    } else {
      t->raw_trie.insert(a.content, int32_t(i));
    }
  }

  // --- decode table: each token's characters back to bytes ---
  const auto& table = bytes_table();
  t->id_bytes.assign(n, {});
  for (size_t id = 0; id < n; ++id) {
    if (!t->id_known[id])
      continue;
    const std::string& tok = t->id_token[id];
    std::string bytes;
    bool all = true;
    for (size_t i = 0; i < tok.size();) {
      size_t len = 0;
      const char32_t cp = next_cp(tok, i, len);
      i += len;
      auto it = table.to_byte.find(cp);
      if (it == table.to_byte.end()) {
        all = false;
        break;
      }
      bytes.push_back(char(it->second));
    }
    t->id_bytes[id] = all ? std::move(bytes) : tok; // ByteLevel's fallback: the token's own bytes
  }

  // --- tokenizer_config.json ---
  if (!config_json.empty()) {
    const refusal rc{config_name};
    const json cfg = parse_bounded(config_json, rc, bpe_limits::max_config_bytes);
    if (!cfg.is_object())
      rc.fail("is not a JSON object");
    auto resolve = [&](const char* key) -> std::optional<int32_t> {
      auto name = config_token(cfg, key, rc);
      if (!name)
        return std::nullopt;
      auto it = t->vocab.find(*name);
      if (it == t->vocab.end())
        rc.fail(std::string(key) + " " + json_preview(json(*name)) + " is not in the vocabulary");
      return it->second;
    };
    t->bos = resolve("bos_token");
    t->eos = resolve("eos_token");
    t->pad = resolve("pad_token");
    t->add_bos = rc.bool_of(cfg, "add_bos_token", false, "the file");
    t->add_eos = rc.bool_of(cfg, "add_eos_token", false, "the file");
    if (t->add_bos && !t->bos)
      rc.fail("add_bos_token is true but bos_token names no token");
    if (t->add_eos && !t->eos)
      rc.fail("add_eos_token is true but eos_token names no token");
  }
  return bpe_tokenizer(std::move(t));
}

std::vector<int32_t> bpe_tokenizer::encode(std::string_view text, bool add_special_tokens) const {
  match_scratch m;
  std::vector<int32_t> ids;
  for (const auto& p : impl_->pieces_of(text, m)) {
    if (p.token_id >= 0)
      ids.push_back(p.token_id);
    else
      impl_->bpe(p.text, ids);
  }
  if (!add_special_tokens)
    return ids;
  if (!impl_->single_template.empty()) {
    std::vector<int32_t> out;
    for (const auto& item : impl_->single_template) {
      if (item.sequence)
        out.insert(out.end(), ids.begin(), ids.end());
      else
        out.insert(out.end(), item.ids.begin(), item.ids.end());
    }
    ids = std::move(out);
  }
  // tokenizer_config.json's add_bos_token / add_eos_token (transformers' flags), unless the
  // template already put the token there.
  if (impl_->add_bos && (ids.empty() || ids.front() != *impl_->bos))
    ids.insert(ids.begin(), *impl_->bos);
  if (impl_->add_eos && (ids.empty() || ids.back() != *impl_->eos))
    ids.push_back(*impl_->eos);
  return ids;
}

std::vector<std::string> bpe_tokenizer::pre_tokenize(std::string_view text) const {
  match_scratch m;
  std::vector<std::string> out;
  for (auto& p : impl_->pieces_of(text, m))
    out.push_back(std::move(p.text));
  return out;
}

std::string bpe_tokenizer::decode(const std::vector<int32_t>& ids, bool skip_special_tokens) const {
  std::string bytes;
  for (int32_t id : ids)
    if (!(skip_special_tokens && is_special(id)))
      bytes += token_bytes(id);
  return sanitize_utf8(bytes);
}

const std::string& bpe_tokenizer::token_bytes(int32_t id) const {
  static const std::string none;
  if (id < 0 || size_t(id) >= impl_->id_bytes.size())
    return none;
  return impl_->id_bytes[size_t(id)];
}

std::optional<std::string> bpe_tokenizer::id_to_token(int32_t id) const {
  if (id < 0 || size_t(id) >= impl_->id_known.size() || !impl_->id_known[size_t(id)])
    return std::nullopt;
  return impl_->id_token[size_t(id)];
}

std::optional<int32_t> bpe_tokenizer::token_to_id(std::string_view token) const {
  auto it = impl_->vocab.find(std::string(token));
  if (it == impl_->vocab.end())
    return std::nullopt;
  return it->second;
}

bool bpe_tokenizer::is_special(int32_t id) const {
  return id >= 0 && size_t(id) < impl_->id_special.size() && impl_->id_special[size_t(id)];
}

int32_t bpe_tokenizer::vocab_size() const { return int32_t(impl_->id_known.size()); }
std::optional<int32_t> bpe_tokenizer::bos_id() const { return impl_->bos; }
std::optional<int32_t> bpe_tokenizer::eos_id() const { return impl_->eos; }
std::optional<int32_t> bpe_tokenizer::pad_id() const { return impl_->pad; }

bpe_decode_stream::bpe_decode_stream(const bpe_tokenizer& tokenizer, bool skip_special_tokens)
    : tokenizer_(&tokenizer), skip_special_(skip_special_tokens) {}

std::string bpe_decode_stream::push(int32_t id) {
  if (skip_special_ && tokenizer_->is_special(id))
    return {};
  pending_ += tokenizer_->token_bytes(id);
  std::string out;
  const size_t used = append_utf8(pending_, false, out);
  pending_.erase(0, used);
  return out;
}

std::string bpe_decode_stream::finish() {
  std::string out;
  append_utf8(pending_, true, out);
  pending_.clear();
  return out;
}

} // namespace ordo
