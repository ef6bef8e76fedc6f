#include "runtime/store_config.hpp"

#include <cctype>

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

const std::vector<std::string> granularities = {"block", "chunk"};
const std::string rule_capacity = "a size in MiB between 1 and 1073741824 (2^30)";
const std::string rule_port = "between 0 and 65535 (0 picks a free one)";
const std::string rule_engine_id = "\"\" (derived) or 1 to 64 letters, digits, '_', '-' or '.'";

// Every key of the store config, once (runtime/config_keys.hpp says what the table drives).
const config_keys::key_table<store_config>& store_keys() {
  using k = config_keys::keys_of<store_config>;
  static const config_keys::key_table<store_config> keys = config_keys::concat<store_config>({
      {
          k::integer("store", "capacity_mb", &store_config::capacity_mb, 1, int64_t{1} << 30, rule_capacity,
                     "the shared arena every node of this host maps (a sealed memfd)"),
          k::text("store", "host", &store_config::host, rule_host, "the address of the actor port and the HTTP port")
              .checked([](const store_config& c) {
                if (!is_host(c.host))
                  fail("store.host = " + in_quotes(c.host) + ": must be " + rule_host);
              }),
          k::integer("store", "port", &store_config::port, 0, 65535, rule_port,
                     "the CAF actor port nodes connect to; `--port` overrides it"),
          k::integer("store", "http_port", &store_config::http_port, 0, 65535, rule_port,
                     "the HTTP port of /health and /metrics"),
          k::text_choice("store", "granularity", &store_config::granularity, granularities,
                         "where a lookup may resume: at any block, or on the chunk grid only (docs/store.md, SPEC D2)"),
          k::text("store", "engine_id", &store_config::engine_id, rule_engine_id,
                  "the store's identity; \"\" derives `store-` and 16 hex digits")
              .checked([](const store_config& c) {
                if (!toml_config::is_name(c.engine_id))
                  fail("store.engine_id = " + in_quotes(c.engine_id) + ": must be " + rule_engine_id);
              }),
          config_keys::log_level_key<store_config>(),
      },
      config_keys::security_keys<store_config>(),
  });
  return keys;
}

const toml_config::schema& store_schema() {
  static const toml_config::schema s =
      config_keys::schema_of(store_keys(), "store.capacity_mb=64", "store.port", false);
  return s;
}

store_config from_table(const toml::table& root) {
  const toml_config::reader r(root, store_schema());
  store_config cfg;
  config_keys::read_keys(store_keys(), r, cfg);
  config_keys::check_keys(store_keys(), cfg); // each key's own rule, in table order
  // Rules between keys.
  if (auto why = check_tls_settings(cfg.tls); !why.empty())
    fail(why);
  if (auto why = check_caf_bind("store.host", cfg.host, cfg.tls); !why.empty())
    fail(why);
  return cfg;
}

} // namespace

store_config parse_store_config(const std::string& toml_text, const std::vector<std::string>& overrides) {
  return from_table(toml_config::parse(toml_text, overrides, store_schema()));
}

std::string store_config_keys_table() { return config_keys::markdown_table(store_keys()); }

store_config load_store_config_file(const std::string& path, const std::vector<std::string>& overrides) {
  return toml_config::load_file(path, [&](const std::string& text) { return parse_store_config(text, overrides); });
}

} // namespace ordo
