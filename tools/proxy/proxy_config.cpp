#include "tools/proxy/proxy_config.hpp"

#include <cctype>
#include <cstdlib>

#include <toml++/toml.h>

#include "runtime/config_keys.hpp"
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

// proxy.prefill / proxy.decode: the endpoints as written, separated by commas.
std::string endpoints_text(const std::vector<proxy_endpoint>& endpoints) {
  std::vector<std::string> texts;
  for (const auto& e : endpoints)
    texts.push_back(e.text);
  return join(texts, ",");
}

// Every key of the proxy config, once (runtime/config_keys.hpp says what the table drives).
const config_keys::key_table<proxy_config>& proxy_keys() {
  using k = config_keys::keys_of<proxy_config>;
  using config_keys::key_type;
  static const config_keys::key_table<proxy_config> keys = {
      k::text("proxy", "host", &proxy_config::host, rule_host, "the listening address")
          .checked([](const proxy_config& c) {
            if (!is_host(c.host))
              fail("proxy.host = " + in_quotes(c.host) + ": must be " + rule_host);
          }),
      k::integer("proxy", "port", &proxy_config::port, 0, 65535, rule_port, "the HTTP port; `--port` overrides it"),
      k::custom("proxy", "prefill", key_type::list, rule_endpoints,
                "the prefill nodes' HTTP endpoints (`[v6]:PORT` for IPv6); \"\" = none (decode only)",
                [](const toml_config::reader& r, proxy_config& c) {
                  std::string text;
                  r.string("proxy", "prefill", text, rule_endpoints);
                  c.prefill = parse_proxy_endpoints("proxy.prefill", text);
                },
                [](const proxy_config& c) { return endpoints_text(c.prefill); }),
      k::custom("proxy", "decode", key_type::list, rule_endpoints, "the decode nodes' HTTP endpoints: at least one",
                [](const toml_config::reader& r, proxy_config& c) {
                  std::string text;
                  r.string("proxy", "decode", text, rule_endpoints);
                  c.decode = parse_proxy_endpoints("proxy.decode", text);
                  if (c.decode.empty())
                    fail("proxy.decode = " + in_quotes(text) + ": must name at least one decode node: " +
                         rule_endpoints);
                },
                [](const proxy_config& c) { return endpoints_text(c.decode); }),
      k::integer("proxy", "timeout_s", &proxy_config::timeout_s, 1, 86400, rule_timeout,
                 "how long one upstream request may take"),
      k::secret("proxy", "api_key", &proxy_config::api_key, rule_secret,
                "if set, `/v1/*` needs `Authorization: Bearer KEY` (401 otherwise); \"\" = open; never shown")
          .checked([](const proxy_config& c) { check_secret("proxy.api_key", c.api_key); }),
      config_keys::log_level_key<proxy_config>(),
  };
  return keys;
}

const toml_config::schema& proxy_schema() {
  static const toml_config::schema s =
      config_keys::schema_of(proxy_keys(), "proxy.decode=127.0.0.1:8001", "proxy.port", true);
  return s;
}

proxy_config from_table(const toml::table& root) {
  const toml_config::reader r(root, proxy_schema());
  proxy_config cfg;
  config_keys::read_keys(proxy_keys(), r, cfg);
  config_keys::check_keys(proxy_keys(), cfg); // each key's own rule, in table order
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

std::string proxy_config_keys_table() { return config_keys::markdown_table(proxy_keys()); }

proxy_config load_proxy_config_file(const std::string& path, const std::vector<std::string>& overrides) {
  return toml_config::load_file(path, [&](const std::string& text) { return parse_proxy_config(text, overrides); });
}

} // namespace ordo
