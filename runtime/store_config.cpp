#include "runtime/store_config.hpp"

#include <cctype>

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

const toml_config::schema& store_schema() {
  static const toml_config::schema s = [] {
    toml_config::schema x;
    x.sections = {
        {"store", {"capacity_mb", "host", "port", "http_port", "granularity", "engine_id"}},
        {"log", {"level"}},
        {"security", {"secret_file", "tls", "certificate", "key", "cafile"}},
    };
    x.string_keys = {"store.host", "store.granularity", "store.engine_id", "log.level", "security.secret_file",
                     "security.tls", "security.certificate", "security.key", "security.cafile"};
    x.example_set = "store.capacity_mb=64";
    x.example_key = "store.port";
    return x;
  }();
  return s;
}

const std::vector<std::string> granularities = {"block", "chunk"};
const std::string rule_capacity = "a size in MiB between 1 and 1073741824 (2^30)";
const std::string rule_port = "between 0 and 65535 (0 picks a free one)";
const std::string rule_engine_id = "\"\" (derived) or 1 to 64 letters, digits, '_', '-' or '.'";

store_config from_table(const toml::table& root) {
  toml_config::reader r(root, store_schema());
  store_config cfg;
  cfg.capacity_mb = r.integer("store", "capacity_mb", cfg.capacity_mb, 1, int64_t{1} << 30, rule_capacity);
  r.string("store", "host", cfg.host, rule_host);
  cfg.port = static_cast<int32_t>(r.integer("store", "port", cfg.port, 0, 65535, rule_port));
  cfg.http_port = static_cast<int32_t>(r.integer("store", "http_port", cfg.http_port, 0, 65535, rule_port));
  r.string("store", "granularity", cfg.granularity, "one of " + join(granularities));
  r.string("store", "engine_id", cfg.engine_id, rule_engine_id);
  r.string("log", "level", cfg.log_level, "one of " + join(log_levels));
  r.string("security", "secret_file", cfg.secret_file,
           "a file path (\"\" = $XDG_RUNTIME_DIR/ordo/secret, else ~/.config/ordo/secret)");
  r.string("security", "tls", cfg.tls.mode, "one of off, on");
  r.string("security", "certificate", cfg.tls.certificate, "a PEM certificate's path (`ordo certs`)");
  r.string("security", "key", cfg.tls.key, "a PEM private key's path (`ordo certs`)");
  r.string("security", "cafile", cfg.tls.cafile, "the deployment CA's PEM certificate (`ordo certs`)");

  if (!is_host(cfg.host))
    fail("store.host = " + in_quotes(cfg.host) + ": must be " + rule_host);
  if (auto why = check_tls_settings(cfg.tls); !why.empty())
    fail(why);
  if (auto why = check_caf_bind("store.host", cfg.host, cfg.tls); !why.empty())
    fail(why);
  if (!contains(granularities, cfg.granularity))
    fail("store.granularity = " + in_quotes(cfg.granularity) + ": must be one of " + join(granularities));
  if (!toml_config::is_name(cfg.engine_id))
    fail("store.engine_id = " + in_quotes(cfg.engine_id) + ": must be " + rule_engine_id);
  check_choice("log.level", cfg.log_level, log_levels);
  return cfg;
}

} // namespace

store_config parse_store_config(const std::string& toml_text, const std::vector<std::string>& overrides) {
  return from_table(toml_config::parse(toml_text, overrides, store_schema()));
}

store_config load_store_config_file(const std::string& path, const std::vector<std::string>& overrides) {
  return toml_config::load_file(path, [&](const std::string& text) { return parse_store_config(text, overrides); });
}

} // namespace ordo
