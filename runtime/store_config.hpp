// The `ordo store` server's config (configs/store.toml, docs/store.md): TOML plus
// `--set section.key=value` overrides, refused in the node config's wording
// ("KEY = VALUE: must be …", unknown keys naming the allowed ones). Pure: no CAF.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "runtime/config.hpp" // config_error
#include "runtime/tls.hpp"

namespace ordo {

struct store_config {
  int64_t capacity_mb = 256;          // [store] capacity_mb: the shared arena, 1..2^30 MiB
  std::string host = "127.0.0.1";     // [store] host: the actor port's and the HTTP port's address
  int32_t port = 0;                   // [store] port: the CAF actor port (0 = the OS picks)
  int32_t http_port = 0;              // [store] http_port: /health and /metrics (0 = the OS picks)
  std::string granularity = "block";  // [store] granularity: "block" | "chunk"
  std::string engine_id;              // [store] engine_id: "" = derived (runtime/engine_identity.hpp)
  std::string log_level = "info";     // [log] level
  std::string secret_file;            // [security] secret_file: "" = the default (docs/security.md)
  tls_settings tls;                   // [security] tls, certificate, key, cafile (runtime/tls.hpp)

  uint64_t capacity_bytes() const { return static_cast<uint64_t>(capacity_mb) << 20; }
};

// Parses TOML text, applies each "section.key=value" override, then validates.
// Throws config_error naming the key (or the syntax error's place).
store_config parse_store_config(const std::string& toml_text, const std::vector<std::string>& overrides = {});
// Reads `path` first; errors name the file when they are about the file.
store_config load_store_config_file(const std::string& path, const std::vector<std::string>& overrides = {});

// Every key of the store config as a markdown table (key, type, default, allowed, what it does),
// made from the one declaration of each key (runtime/store_config.cpp:store_keys); docs/config.md
// holds it.
std::string store_config_keys_table();

} // namespace ordo
