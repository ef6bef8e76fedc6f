#include "runtime/store_config.hpp"

#include <algorithm>
#include <cctype>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <utility>

#include <toml++/toml.h>

namespace ordo {

namespace {

// Small pieces copied from runtime/config.cpp (its helpers are file-local there).

const std::vector<std::pair<std::string, std::vector<std::string>>>& schema() {
  static const std::vector<std::pair<std::string, std::vector<std::string>>> s = {
      {"store", {"capacity_mb", "host", "port", "http_port", "granularity", "engine_id"}},
      {"log", {"level"}},
  };
  return s;
}

bool is_string_key(const std::string& dotted) {
  static const std::vector<std::string> keys = {"store.host", "store.granularity", "store.engine_id", "log.level"};
  return std::find(keys.begin(), keys.end(), dotted) != keys.end();
}

const std::vector<std::string> log_levels = {"trace", "debug", "info", "warn", "error"};
const std::vector<std::string> granularities = {"block", "chunk"};
const std::string rule_host = "a host name or IP address";
const std::string rule_capacity = "a size in MiB between 1 and 1073741824 (2^30)";
const std::string rule_port = "between 0 and 65535 (0 picks a free one)";
const std::string rule_engine_id = "\"\" (derived) or 1 to 64 letters, digits, '_', '-' or '.'";

[[noreturn]] void fail(const std::string& msg) {
  throw config_error(msg);
}

std::string join(const std::vector<std::string>& xs, const char* sep = ", ") {
  std::string out;
  for (size_t i = 0; i < xs.size(); ++i)
    out += (i ? sep : "") + xs[i];
  return out;
}

std::string in_quotes(const std::string& s) {
  return "\"" + s + "\"";
}

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

bool is_engine_id(const std::string& s) {
  if (s.size() > 64)
    return false;
  for (char c : s)
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '_' && c != '-' && c != '.')
      return false;
  return true;
}

void check_known_keys(const toml::table& root) {
  std::vector<std::string> sections;
  for (auto& [name, keys] : schema())
    sections.push_back(name);
  for (auto&& [k, node] : root) {
    const std::string section(k.str());
    auto it = std::find_if(schema().begin(), schema().end(), [&](auto& s) { return s.first == section; });
    if (it == schema().end()) {
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
        fail("unknown key " + section + "." + key + " = " + shown(value) + "; allowed keys in [" + section +
             "]: " + join(it->second));
    }
  }
}

void apply_override(toml::table& root, const std::string& item) {
  auto eq = item.find('=');
  if (eq == std::string::npos)
    fail("--set " + in_quotes(item) + ": expected section.key=value, e.g. store.capacity_mb=64");
  std::string dotted = item.substr(0, eq);
  std::string raw = item.substr(eq + 1);
  auto dot = dotted.find('.');
  if (dot == std::string::npos || dot == 0 || dot + 1 == dotted.size() ||
      dotted.find('.', dot + 1) != std::string::npos)
    fail("--set " + in_quotes(item) + ": key " + in_quotes(dotted) + " must be section.key, e.g. store.port");
  std::string section = dotted.substr(0, dot);
  std::string key = dotted.substr(dot + 1);

  toml::table parsed;
  bool as_toml = false;
  try {
    parsed = toml::parse("v = " + raw);
    auto v = parsed.get("v");
    as_toml = parsed.size() == 1 && v && (!is_string_key(dotted) || v->is_string());
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

class reader {
public:
  explicit reader(const toml::table& root) : root_(root) {}

  const toml::node* find(const std::string& section, const std::string& key) const {
    auto sec = root_.get_as<toml::table>(section);
    return sec ? sec->get(key) : nullptr;
  }

  void string(const std::string& section, const std::string& key, std::string& out, const std::string& rule) const {
    auto n = find(section, key);
    if (!n)
      return;
    auto s = n->as_string();
    if (!s)
      fail(section + "." + key + " = " + shown(*n) + ": must be a string, " + rule);
    out = s->get();
  }

  int64_t integer(const std::string& section, const std::string& key, int64_t fallback, int64_t lo, int64_t hi,
                  const std::string& rule) const {
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

private:
  const toml::table& root_;
};

store_config from_table(const toml::table& root) {
  check_known_keys(root);
  reader r(root);
  store_config cfg;
  cfg.capacity_mb = r.integer("store", "capacity_mb", cfg.capacity_mb, 1, int64_t{1} << 30, rule_capacity);
  r.string("store", "host", cfg.host, rule_host);
  cfg.port = static_cast<int32_t>(r.integer("store", "port", cfg.port, 0, 65535, rule_port));
  cfg.http_port = static_cast<int32_t>(r.integer("store", "http_port", cfg.http_port, 0, 65535, rule_port));
  r.string("store", "granularity", cfg.granularity, "one of " + join(granularities));
  r.string("store", "engine_id", cfg.engine_id, rule_engine_id);
  r.string("log", "level", cfg.log_level, "one of " + join(log_levels));

  if (!is_host(cfg.host))
    fail("store.host = " + in_quotes(cfg.host) + ": must be " + rule_host);
  if (!contains(granularities, cfg.granularity))
    fail("store.granularity = " + in_quotes(cfg.granularity) + ": must be one of " + join(granularities));
  if (!is_engine_id(cfg.engine_id))
    fail("store.engine_id = " + in_quotes(cfg.engine_id) + ": must be " + rule_engine_id);
  if (!contains(log_levels, cfg.log_level))
    fail("log.level = " + in_quotes(cfg.log_level) + ": must be one of " + join(log_levels));
  return cfg;
}

} // namespace

store_config parse_store_config(const std::string& toml_text, const std::vector<std::string>& overrides) {
  toml::table root;
  try {
    root = toml::parse(toml_text);
  } catch (const toml::parse_error& e) {
    fail("config: TOML syntax error at line " + std::to_string(e.source().begin.line) + ", column " +
         std::to_string(e.source().begin.column) + ": " + std::string(e.description()));
  }
  for (auto& item : overrides)
    apply_override(root, item);
  return from_table(root);
}

store_config load_store_config_file(const std::string& path, const std::vector<std::string>& overrides) {
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
  try {
    return parse_store_config(ss.str(), overrides);
  } catch (const config_error& e) {
    std::string msg = e.what();
    if (msg.rfind("config: ", 0) == 0)
      fail("config file " + in_quotes(path) + msg.substr(6));
    throw;
  }
}

} // namespace ordo
