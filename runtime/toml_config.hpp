// What every ordo config file shares (the node's, runtime/config.cpp, and the store server's,
// runtime/store_config.cpp): a schema of sections and keys, `--set section.key=value`
// overrides, refusals that name the key, the value and what is allowed, and file errors that
// name the file. Secrets are never shown in a message.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include <toml++/toml.h>

#include "runtime/config.hpp"

namespace ordo::toml_config {

struct schema {
  // Allowed keys per section, in canonical order (error messages list them so).
  std::vector<std::pair<std::string, std::vector<std::string>>> sections;
  std::vector<std::string> string_keys; // dotted: a bare `--set` word for them stays text
  std::function<bool(const std::string& dotted)> is_secret_key = [](const std::string&) { return false; };
  std::string example_set = "cache.block_size=16"; // shown in `--set` usage errors
  std::string example_key = "server.port";
};

[[noreturn]] void fail(const std::string& msg); // throws config_error
std::string join(const std::vector<std::string>& xs, const char* sep = ", ");
// `text` cut at each comma, each entry without surrounding spaces and tabs: "a, b" → {a, b};
// "" → one empty entry (the caller decides what an empty entry means).
std::vector<std::string> split_list(const std::string& text);
std::string in_quotes(const std::string& s);
bool contains(const std::vector<std::string>& xs, const std::string& x);
// A TOML value as the user would have written it (strings quoted, a sub-table on one line).
std::string shown(const toml::node& n);
// An IP literal (IPv6 when it has a colon) or a DNS name: labels of 1..63 letters, digits, '-'
// or '_', joined by dots.
bool is_host(const std::string& h);
// A name that goes into logs, timelines and identities unquoted: at most 64 letters, digits,
// '_', '-' or '.' (empty allowed: the caller says whether it is).
bool is_name(const std::string& s);

// What every ordo config shares: the log levels, the host rule's words, the words that make a key
// a secret (its value is never shown, also for a misspelt key), and a refusal of a value that is
// not one of a list ("KEY = "VALUE": must be one of A, B").
extern const std::vector<std::string> log_levels;
extern const std::string rule_host;
bool looks_secret(const std::string& dotted);
void check_choice(const std::string& key, const std::string& value, const std::vector<std::string>& available);

// Parses `text`, applies each override, refuses keys and sections the schema does not list.
toml::table parse(const std::string& text, const std::vector<std::string>& overrides, const schema& s);
// The text of a config file; refuses a missing file, a directory, an unreadable file.
std::string read_file(const std::string& path);
// Runs `parse_text` on the file's text; a syntax error gets the file's name.
template <class Parse>
auto load_file(const std::string& path, Parse&& parse_text) {
  const std::string text = read_file(path);
  try {
    return parse_text(text);
  } catch (const config_error& e) {
    std::string msg = e.what();
    if (msg.rfind("config: ", 0) == 0) // syntax errors need the file name; value errors name their key
      fail("config file " + in_quotes(path) + msg.substr(6));
    throw;
  }
}

class reader {
public:
  reader(const toml::table& root, const schema& s) : root_(root), schema_(s) {}
  const toml::node* find(const std::string& section, const std::string& key) const;
  void string(const std::string& section, const std::string& key, std::string& out, const std::string& rule) const;
  // Integers within [lo, hi]; finer ranges are the config's validate()'s job.
  int64_t integer(const std::string& section, const std::string& key, int64_t fallback, int64_t lo, int64_t hi,
                  const std::string& rule) const;

private:
  const toml::table& root_;
  const schema& schema_;
};

} // namespace ordo::toml_config
