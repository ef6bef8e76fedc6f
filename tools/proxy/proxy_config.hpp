// The `ordo proxy` config (configs/proxy.toml, docs/proxy.md): TOML plus `--set section.key=value`
// overrides, refused in the node config's wording ("KEY = VALUE: must be …", unknown keys naming
// the allowed ones). Secrets (proxy.api_key) are never shown. Pure: no CAF, no sockets.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "runtime/config.hpp" // config_error

namespace ordo {

// One upstream node's HTTP endpoint, "HOST:PORT" ("[v6]:PORT" for an IPv6 literal).
struct proxy_endpoint {
  std::string host; // without brackets
  int port = 0;     // 1..65535
  std::string text; // as written (trimmed): "127.0.0.1:8001"
};

struct proxy_config {
  std::string host = "127.0.0.1";       // [proxy] host: the listening address
  int32_t port = 0;                     // [proxy] port (0 = the OS picks; `--port` overrides)
  std::vector<proxy_endpoint> prefill;  // [proxy] prefill: "" = none (decode-only)
  std::vector<proxy_endpoint> decode;   // [proxy] decode: at least one
  int64_t timeout_s = 120;              // [proxy] timeout_s: per upstream request, 1..86400
  std::string api_key;                  // [proxy] api_key: "" = open
  std::string log_level = "info";       // [log] level
};

// "a:1, b:2" -> endpoints; throws config_error naming `key` and the bad entry. "" -> none.
std::vector<proxy_endpoint> parse_proxy_endpoints(const std::string& key, const std::string& list);

// Parses TOML text, applies each "section.key=value" override, then validates.
// Throws config_error naming the key (or the syntax error's place).
proxy_config parse_proxy_config(const std::string& toml_text, const std::vector<std::string>& overrides = {});
// Reads `path` first; errors name the file when they are about the file.
proxy_config load_proxy_config_file(const std::string& path, const std::vector<std::string>& overrides = {});

// Every key of the proxy config as a markdown table (key, type, default, allowed, what it does),
// made from the one declaration of each key (tools/proxy/proxy_config.cpp:proxy_keys);
// docs/config.md holds it.
std::string proxy_config_keys_table();

} // namespace ordo
