#include "tools/proxy/proxy_config.hpp"

#include <cctype>
#include <cstdlib>

#include <toml++/toml.h>

#include "runtime/toml_config.hpp"

namespace ordo {

namespace {

using toml_config::contains;
using toml_config::fail;
using toml_config::in_quotes;
using toml_config::is_host;
using toml_config::join;
using toml_config::check_choice;
using toml_config::log_levels;
using toml_config::rule_host;

const toml_config::schema& proxy_schema() {
  static const toml_config::schema s = [] {
    toml_config::schema x;
    x.sections = {
        {"proxy", {"host", "port", "prefill", "decode", "timeout_s", "api_key"}},
        {"log", {"level"}},
    };
    x.string_keys = {"proxy.host", "proxy.prefill", "proxy.decode", "proxy.api_key", "log.level"};
    // A misspelt api_key is hidden too: its value is most likely a secret.
    x.is_secret_key = toml_config::looks_secret;
    x.example_set = "proxy.decode=127.0.0.1:8001";
    x.example_key = "proxy.port";
    return x;
  }();
  return s;
}

const std::string rule_port = "between 0 and 65535 (0 picks a free one)";
const std::string rule_endpoints =
    "a comma-separated list of HOST:PORT (e.g. \"127.0.0.1:8001,127.0.0.1:8002\"), PORT 1..65535";
const std::string rule_timeout = "seconds between 1 and 86400";
const std::string rule_secret = "printable ASCII without spaces, or \"\" for none";


// A secret, checked without printing it: its key and the first bad character's place.
void check_secret(const std::string& key, const std::string& value) {
  for (size_t i = 0; i < value.size(); ++i) {
    unsigned char c = static_cast<unsigned char>(value[i]);
    if (c <= 0x20 || c >= 0x7f)
      fail(key + " (set, not shown): character " + std::to_string(i + 1) + " of " + std::to_string(value.size()) +
           " is not allowed; must be " + rule_secret);
  }
}

proxy_config from_table(const toml::table& root) {
  toml_config::reader r(root, proxy_schema());
  proxy_config cfg;
  std::string prefill, decode;
  r.string("proxy", "host", cfg.host, rule_host);
  cfg.port = static_cast<int32_t>(r.integer("proxy", "port", cfg.port, 0, 65535, rule_port));
  r.string("proxy", "prefill", prefill, rule_endpoints);
  r.string("proxy", "decode", decode, rule_endpoints);
  cfg.timeout_s = r.integer("proxy", "timeout_s", cfg.timeout_s, 1, 86400, rule_timeout);
  r.string("proxy", "api_key", cfg.api_key, rule_secret);
  r.string("log", "level", cfg.log_level, "one of " + join(log_levels));

  if (!is_host(cfg.host))
    fail("proxy.host = " + in_quotes(cfg.host) + ": must be " + rule_host);
  cfg.prefill = parse_proxy_endpoints("proxy.prefill", prefill);
  cfg.decode = parse_proxy_endpoints("proxy.decode", decode);
  if (cfg.decode.empty())
    fail("proxy.decode = " + in_quotes(decode) + ": must name at least one decode node: " + rule_endpoints);
  check_secret("proxy.api_key", cfg.api_key);
  check_choice("log.level", cfg.log_level, log_levels);
  return cfg;
}

} // namespace

std::vector<proxy_endpoint> parse_proxy_endpoints(const std::string& key, const std::string& list) {
  std::vector<proxy_endpoint> out;
  const auto entries = toml_config::split_list(list);
  if (entries.size() == 1 && entries[0].empty())
    return out;
  auto refuse = [&](const std::string& entry, const std::string& why) {
    fail(key + " = " + in_quotes(list) + ": entry " + in_quotes(entry) + " " + why + "; must be " + rule_endpoints);
  };
  for (const std::string& entry : entries) {
    if (entry.empty())
      refuse(entry, "is empty");
    proxy_endpoint e;
    e.text = entry;
    std::string port;
    if (entry.front() == '[') { // [v6]:port
      size_t close = entry.find(']');
      if (close == std::string::npos || close + 1 >= entry.size() || entry[close + 1] != ':')
        refuse(entry, "is not [IPv6]:PORT");
      e.host = entry.substr(1, close - 1);
      port = entry.substr(close + 2);
      if (e.host.find(':') == std::string::npos || !is_host(e.host))
        refuse(entry, "has no valid IPv6 address in brackets");
    } else {
      size_t colon = entry.rfind(':');
      if (colon == std::string::npos)
        refuse(entry, "has no :PORT");
      e.host = entry.substr(0, colon);
      port = entry.substr(colon + 1);
      if (entry.find("://") != std::string::npos || entry.find('/') != std::string::npos)
        refuse(entry, "has no valid host (write HOST:PORT, no scheme or path)");
      if (e.host.find(':') != std::string::npos)
        refuse(entry, "looks like an IPv6 address: write it as [ADDRESS]:PORT");
      if (!is_host(e.host))
        refuse(entry, "has no valid host (write HOST:PORT, no scheme or path)");
    }
    if (port.empty() || port.size() > 5 || port.find_first_not_of("0123456789") != std::string::npos)
      refuse(entry, "has no valid port");
    e.port = std::atoi(port.c_str());
    if (e.port < 1 || e.port > 65535)
      refuse(entry, "has port " + port + " out of range");
    out.push_back(std::move(e));
  }
  return out;
}

proxy_config parse_proxy_config(const std::string& toml_text, const std::vector<std::string>& overrides) {
  return from_table(toml_config::parse(toml_text, overrides, proxy_schema()));
}

proxy_config load_proxy_config_file(const std::string& path, const std::vector<std::string>& overrides) {
  return toml_config::load_file(path, [&](const std::string& text) { return parse_proxy_config(text, overrides); });
}

} // namespace ordo
