#include "runtime/toml_config.hpp"

#include <algorithm>
#include <cctype>
#include <filesystem>
#include <fstream>
#include <sstream>

namespace ordo::toml_config {

void fail(const std::string& msg) { throw config_error(msg); }

std::string join(const std::vector<std::string>& xs, const char* sep) {
  std::string out;
  for (size_t i = 0; i < xs.size(); ++i)
    out += (i ? sep : "") + xs[i];
  return out;
}

std::vector<std::string> split_list(const std::string& text) {
  std::vector<std::string> out;
  size_t start = 0;
  for (;;) {
    const size_t comma = text.find(',', start);
    std::string entry = text.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
    const size_t b = entry.find_first_not_of(" \t");
    out.push_back(b == std::string::npos ? std::string() : entry.substr(b, entry.find_last_not_of(" \t") - b + 1));
    if (comma == std::string::npos)
      return out;
    start = comma + 1;
  }
}

std::string in_quotes(const std::string& s) { return "\"" + s + "\""; }

bool contains(const std::vector<std::string>& xs, const std::string& x) {
  return std::find(xs.begin(), xs.end(), x) != xs.end();
}

std::string shown(const toml::node& n) {
  if (auto s = n.as_string())
    return in_quotes(s->get());
  std::ostringstream os;
  if (auto t = n.as_table()) {
    toml::table copy = *t;
    copy.is_inline(true);
    os << copy;
    return os.str();
  }
  n.visit([&](auto&& v) { os << v; });
  return os.str();
}

const std::vector<std::string> log_levels = {"trace", "debug", "info", "warn", "error"};
const std::string rule_host = "a host name or IP address";

bool looks_secret(const std::string& dotted) {
  for (const char* word : {"key", "secret", "token", "password"})
    if (dotted.find(word) != std::string::npos)
      return true;
  return false;
}

void check_choice(const std::string& key, const std::string& value, const std::vector<std::string>& available) {
  if (!contains(available, value))
    fail(key + " = " + in_quotes(value) + ": must be one of " + join(available));
}

bool is_host(const std::string& h) {
  if (h.empty() || h.size() > 253)
    return false;
  if (h.find(':') != std::string::npos)
    return h.find_first_not_of("0123456789abcdefABCDEF:.") == std::string::npos;
  size_t start = 0;
  for (;;) {
    size_t dot = h.find('.', start);
    std::string label = h.substr(start, dot == std::string::npos ? std::string::npos : dot - start);
    if (label.empty() || label.size() > 63 || label.front() == '-' || label.back() == '-')
      return false;
    for (char c : label)
      if (!std::isalnum(static_cast<unsigned char>(c)) && c != '-' && c != '_')
        return false;
    if (dot == std::string::npos)
      return true;
    start = dot + 1;
  }
}

bool is_name(const std::string& s) {
  if (s.size() > 64)
    return false;
  for (char c : s)
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '_' && c != '-' && c != '.')
      return false;
  return true;
}

namespace {

void check_known_keys(const toml::table& root, const schema& s) {
  std::vector<std::string> sections;
  for (auto& [name, keys] : s.sections)
    sections.push_back(name);
  for (auto&& [k, node] : root) {
    const std::string section(k.str());
    auto it = std::find_if(s.sections.begin(), s.sections.end(), [&](auto& x) { return x.first == section; });
    if (it == s.sections.end()) {
      if (node.is_table())
        fail("unknown section [" + section + "]; allowed sections: " + join(sections));
      fail("unknown key " + section + " = " + shown(node) + " at top level; keys belong in a section: " +
           join(sections));
    }
    auto tbl = node.as_table();
    if (!tbl)
      fail(section + " = " + shown(node) + ": must be a table ([" + section + "] section)");
    for (auto&& [kk, value] : *tbl) {
      const std::string key(kk.str());
      if (!contains(it->second, key))
        fail("unknown key " + section + "." + key + " = " +
             (s.is_secret_key(section + "." + key) ? std::string("(not shown)") : shown(value)) +
             "; allowed keys in [" + section + "]: " + join(it->second));
    }
  }
}

// Applies one `section.key=value`; the value is TOML when it parses as one, else plain text.
void apply_override(toml::table& root, const std::string& item, const schema& s) {
  auto eq = item.find('=');
  if (eq == std::string::npos)
    fail("--set " + in_quotes(item) + ": expected section.key=value, e.g. " + s.example_set);
  std::string dotted = item.substr(0, eq);
  std::string raw = item.substr(eq + 1);
  auto dot = dotted.find('.');
  if (dot == std::string::npos || dot == 0 || dot + 1 == dotted.size() ||
      dotted.find('.', dot + 1) != std::string::npos)
    fail("--set " + in_quotes(item) + ": key " + in_quotes(dotted) + " must be section.key, e.g. " + s.example_key);
  std::string section = dotted.substr(0, dot);
  std::string key = dotted.substr(dot + 1);

  toml::table parsed;
  bool as_toml = false;
  try {
    parsed = toml::parse("v = " + raw);
    auto v = parsed.get("v");
    // A bare word for a text key (server.host=127.0.0.1, model.preset=dense) stays text.
    as_toml = parsed.size() == 1 && v && (!contains(s.string_keys, dotted) || v->is_string());
  } catch (const toml::parse_error&) {
    as_toml = false;
  }
  if (!root.contains(section))
    root.insert(section, toml::table{});
  auto sec = root.get_as<toml::table>(section);
  if (!sec)
    fail("--set " + in_quotes(item) + ": " + section + " is not a table in the config file");
  if (as_toml)
    parsed.get("v")->visit([&](auto&& v) { sec->insert_or_assign(key, v); });
  else
    sec->insert_or_assign(key, raw);
}

} // namespace

toml::table parse(const std::string& text, const std::vector<std::string>& overrides, const schema& s) {
  toml::table root;
  try {
    root = toml::parse(text);
  } catch (const toml::parse_error& e) {
    fail("config: TOML syntax error at line " + std::to_string(e.source().begin.line) + ", column " +
         std::to_string(e.source().begin.column) + ": " + std::string(e.description()));
  }
  for (auto& item : overrides)
    apply_override(root, item, s);
  check_known_keys(root, s);
  return root;
}

std::string read_file(const std::string& path) {
  // An ifstream opens a directory and reads nothing: that would serve the defaults.
  std::error_code ec;
  const auto status = std::filesystem::status(path, ec);
  if (status.type() == std::filesystem::file_type::not_found)
    fail("config file " + in_quotes(path) + ": no such file");
  if (status.type() == std::filesystem::file_type::directory)
    fail("config file " + in_quotes(path) + ": is a directory; expected a TOML file");
  std::ifstream in(path, std::ios::binary);
  if (!in)
    fail("config file " + in_quotes(path) + ": cannot be opened");
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

const toml::node* reader::find(const std::string& section, const std::string& key) const {
  auto sec = root_.get_as<toml::table>(section);
  return sec ? sec->get(key) : nullptr;
}

void reader::string(const std::string& section, const std::string& key, std::string& out,
                    const std::string& rule) const {
  auto n = find(section, key);
  if (!n)
    return;
  auto s = n->as_string();
  if (!s && schema_.is_secret_key(section + "." + key))
    fail(section + "." + key + " (not shown): must be a string, " + rule);
  if (!s)
    fail(section + "." + key + " = " + shown(*n) + ": must be a string, " + rule);
  out = s->get();
}

int64_t reader::integer(const std::string& section, const std::string& key, int64_t fallback, int64_t lo,
                        int64_t hi, const std::string& rule) const {
  auto n = find(section, key);
  if (!n)
    return fallback;
  auto i = n->as_integer();
  if (!i)
    fail(section + "." + key + " = " + shown(*n) + ": must be an integer, " + rule);
  int64_t v = i->get();
  if (v < lo || v > hi)
    fail(section + "." + key + " = " + std::to_string(v) + ": must be " + rule);
  return v;
}

} // namespace ordo::toml_config
