#include "runtime/config.hpp"

#include "runtime/device_registry.hpp"
#include "runtime/models/hf_model.hpp"
#include "runtime/toml_config.hpp"

#include <algorithm>
#include <cctype>
#include <cstdint>
#include <set>
#include <sstream>
#include <utility>

#include <nlohmann/json.hpp>
#include <toml++/toml.h>

namespace ordo {

namespace {

using toml_config::contains;
using toml_config::fail;
using toml_config::in_quotes;
using toml_config::is_host;
using toml_config::join;
using toml_config::shown;
using toml_config::check_choice;
using toml_config::log_levels;
using toml_config::rule_host;

// Keys whose value no message may print. An unknown key that looks like one (a misspelt
// server.api_key) is hidden too: its value is most likely a secret.
bool is_secret_key(const std::string& dotted) {
  // security.secret_file names a file, not a secret: its path is shown.
  if (dotted == "security.secret_file" || dotted == "security.key")
    return false;
  return dotted == "server.api_key" || dotted == "server.admin_key" || toml_config::looks_secret(dotted);
}

// Allowed keys per section, in canonical order (describe() and error messages use it), and the
// keys whose value is text (a `--set` value for them is taken verbatim unless quoted).
const toml_config::schema& node_schema() {
  static const toml_config::schema s = [] {
    toml_config::schema x;
    x.sections = {
      {"model", {"preset", "size", "seed", "kv_dtype", "weight_dtype", "path", "served_model_name"}},
      {"device", {"kind", "chaos_seed", "matmul"}},
      {"cache", {"block_size", "chunk_size", "num_blocks", "checkpoint_interval"}},
      {"scheduler", {"max_batch_tokens", "max_num_seqs", "max_waiting"}},
      {"kv_transfer", {"connector", "kv_role", "config", "connectors"}},
      {"store", {"capacity_mb", "address", "transport", "expect_identity", "deadline_ms"}},
      {"pd", {"lease_ms", "transport", "peers"}},
      {"security", {"secret_file", "tls", "certificate", "key", "cafile"}},
      {"node", {"engine_id"}},
      {"server",
       {"host", "port", "actor_port", "header_timeout_s", "body_timeout_s", "idle_timeout_s", "max_connections",
        "max_body_bytes", "api_key", "admin_key"}},
      {"log", {"level"}},
      {"trace", {"path", "node"}},
      {"faults", {"drop_edge", "corrupt_commits"}},
    };
    x.string_keys = {"model.path", "model.served_model_name", "model.preset",       "model.size",         "model.kv_dtype",     "model.weight_dtype", "device.kind",
                     "device.matmul",      "kv_transfer.connector", "kv_transfer.kv_role", "kv_transfer.config",
                     "store.address",      "store.transport",    "store.expect_identity", "node.engine_id",
                     "server.host",        "server.api_key",     "server.admin_key",   "log.level",
                     "trace.path",         "trace.node",         "faults.drop_edge",   "pd.transport",
                     "faults.corrupt_commits", "kv_transfer.connectors", "pd.peers", "security.secret_file",
                     "security.tls", "security.certificate", "security.key", "security.cafile"};
    x.is_secret_key = is_secret_key;
    return x;
  }();
  return s;
}

bool is_string_key(const std::string& dotted) { return contains(node_schema().string_keys, dotted); }

// --- enum names -------------------------------------------------------------------------------

const std::vector<std::pair<model_preset, std::string>> preset_names = {
    {model_preset::dense, "dense"},
    {model_preset::gdn_hybrid, "gdn_hybrid"},
    {model_preset::qsa_gdn_ple, "qsa_gdn_ple"}};
const std::vector<std::pair<model_size, std::string>> size_names = {{model_size::tiny, "tiny"},
                                                                    {model_size::b1, "1b"}};
const std::vector<std::pair<kv_dtype, std::string>> dtype_names = {
    {kv_dtype::fp32, "fp32"}, {kv_dtype::bf16, "bf16"}, {kv_dtype::fp8, "fp8"}};
const std::vector<std::pair<weight_dtype, std::string>> weight_dtype_names = {{weight_dtype::fp32, "fp32"},
                                                                              {weight_dtype::bf16, "bf16"}};
const std::vector<std::pair<device_kind, std::string>> device_kind_names = {{device_kind::cpu, "cpu"},
                                                                          {device_kind::hip, "hip"}};
const std::vector<std::pair<matmul_mode, std::string>> matmul_names = {{matmul_mode::exact, "exact"},
                                                                      {matmul_mode::tf32, "tf32"}};
const std::vector<std::pair<connector_kind, std::string>> connector_names = {{connector_kind::none, "none"},
                                                                            {connector_kind::offload, "offload"},
                                                                            {connector_kind::store, "store"},
                                                                            {connector_kind::pd, "pd"},
                                                                            {connector_kind::pd_kv, "pd_kv"},
                                                                            {connector_kind::multi, "multi"}};
const std::vector<std::pair<fault_edge, std::string>> fault_edge_names = {
    {fault_edge::none, ""},
    {fault_edge::clear_load, "clear_load"},
    {fault_edge::load_forward, "load_forward"},
    {fault_edge::forward_save, "forward_save"},
    {fault_edge::upload_compute, "upload_compute"}};
const std::vector<std::pair<kv_role, std::string>> kv_role_names = {{kv_role::kv_both, "kv_both"},
                                                                    {kv_role::kv_producer, "kv_producer"},
                                                                    {kv_role::kv_consumer, "kv_consumer"}};

template <class E>
std::vector<std::string> names_of(const std::vector<std::pair<E, std::string>>& table) {
  std::vector<std::string> out;
  for (auto& [e, name] : table)
    out.push_back(name.empty() ? "\"\" (none)" : name);
  return out;
}

template <class E>
const std::string& name_of(const std::vector<std::pair<E, std::string>>& table, E e) {
  for (auto& [value, name] : table)
    if (value == e)
      return name;
  static const std::string unknown = "?";
  return unknown;
}



// The value `name` names in `table`; fails with the same words check_choice uses.
template <class E>
E choice_named(const std::string& key, const std::string& name, const std::vector<std::pair<E, std::string>>& table) {
  for (auto& [value, n] : table)
    if (n == name)
      return value;
  fail(key + " = " + in_quotes(name) + ": must be one of " + join(names_of(table)));
}

// Rules shared by the reader (type errors) and validate() (range errors).
const std::string rule_max_waiting = "between 1 and 1048576";
const std::string rule_address = "\"HOST:PORT\", the actor endpoint `ordo store` prints (tcp://HOST:PORT)";
const std::string rule_deadline = "between 100 and 600000 (milliseconds)";
const std::string rule_engine_id = "\"\" (derived) or 1 to 64 letters, digits, '_', '-' or '.'";
const std::vector<std::string> store_transports = {"shm", "tcp"};
const std::vector<std::string> corrupt_kinds = {"none", "kv_chunk", "state_image"};
const std::string rule_pd_peers = "at most 64 HOST:PORT endpoints separated by commas, e.g. \"10.0.0.5:7001\"";
const std::string rule_secret_file = "a file path (\"\" = $XDG_RUNTIME_DIR/ordo/secret, else ~/.config/ordo/secret)";
const std::string rule_lease_ms = "between 0 (no lease) and 3600000 milliseconds";
const std::string rule_timeout = "between 1 and 3600 (seconds)";
const std::string rule_max_connections = "between 1 and 65536";
const std::string rule_max_body_bytes =
    "0 (derived from the model's context length) or a size in bytes between 1 and 1073741824";
const std::string rule_secret = "printable ASCII without spaces, or \"\" for none";

// A secret, checked without printing it: its key, whether set, and the first bad character's place.
void check_secret(const std::string& key, const std::string& value) {
  for (size_t i = 0; i < value.size(); ++i) {
    unsigned char c = static_cast<unsigned char>(value[i]);
    if (c <= 0x20 || c >= 0x7f)
      fail(key + " (set, not shown): character " + std::to_string(i + 1) + " of " +
           std::to_string(value.size()) + " is not allowed; must be " + rule_secret);
  }
}

// --- reading the TOML tree --------------------------------------------------------------------

// The shared reader plus the node config's enum choices.
class reader : public toml_config::reader {
public:
  explicit reader(const toml::table& root) : toml_config::reader(root, node_schema()) {}

  bool has(const std::string& section, const std::string& key) const { return find(section, key) != nullptr; }

  template <class E>
  void choice(const std::string& section, const std::string& key, E& out,
              const std::vector<std::pair<E, std::string>>& table) const {
    std::string name;
    string(section, key, name, "one of " + join(names_of(table)));
    if (find(section, key))
      out = choice_named(section + "." + key, name, table);
  }
};

// Where a key was given: 0 = absent, 1 = the file, 2 = a --set (which overrides the file).
struct key_levels {
  const reader& r;
  const std::set<std::string>& set_keys;
  int of(const std::string& section, const std::string& key) const {
    if (set_keys.count(section + "." + key))
      return 2;
    return r.has(section, key) ? 1 : 0;
  }
};

// vLLM's --kv-transfer-config shape: {"kv_connector":"none","kv_role":"kv_both"}. Beside the TOML
// keys it spells, the form given at the higher level wins (a --set over the file's); two forms
// given at the same level that disagree are refused.
void apply_kv_transfer_json(const reader& r, node_config& cfg, const std::set<std::string>& set_keys) {
  const key_levels level{r, set_keys};
  const int json_level = level.of("kv_transfer", "config");
  auto n = r.find("kv_transfer", "config");
  if (!n)
    return;
  auto s = n->as_string();
  const std::string example = R"({"kv_connector":"none","kv_role":"kv_both"})";
  if (!s)
    fail("kv_transfer.config = " + shown(*n) + ": must be a JSON string like '" + example + "'");
  const std::string text = s->get();
  const std::string key = "kv_transfer.config = '" + text + "'";
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(text);
  } catch (const nlohmann::json::exception& e) {
    fail(key + ": invalid JSON (" + e.what() + "); expected an object like '" + example + "'");
  }
  if (!j.is_object())
    fail(key + ": must be a JSON object like '" + example + "'");
  const std::vector<std::string> allowed = {"kv_connector", "kv_role", "kv_connector_extra_config", "connectors"};
  // vLLM's MultiConnector names ordo's multi; its leaves sit in kv_connector_extra_config.connectors.
  if (j.contains("kv_connector") && j["kv_connector"] == "MultiConnector")
    j["kv_connector"] = "multi";
  nlohmann::json leaves;
  for (auto& [k, v] : j.items()) {
    if (!contains(allowed, k))
      fail(key + ": unknown key " + in_quotes(k) + "; allowed keys: " + join(allowed));
    if (k == "connectors") {
      leaves = v;
      continue;
    }
    if (k == "kv_connector_extra_config") {
      if (!v.is_object())
        fail(key + ": kv_connector_extra_config = " + v.dump() + R"(: must be an object like {"address":"127.0.0.1:7000"})");
      for (auto& [ek, ev] : v.items()) {
        if (ek == "connectors") {
          leaves = ev;
          continue;
        }
        if (ek != "address")
          fail(key + ": kv_connector_extra_config has unknown key " + in_quotes(ek) +
               "; allowed keys: address, connectors");
        if (!ev.is_string())
          fail(key + ": kv_connector_extra_config.address = " + ev.dump() + ": must be a string \"HOST:PORT\"");
        std::string a = ev.get<std::string>();
        const int other = level.of("store", "address");
        if (other == json_level && a != cfg.store_address)
          fail(key + ": kv_connector_extra_config.address = " + in_quotes(a) + " disagrees with store.address = " +
               in_quotes(cfg.store_address) + "; set one of them");
        if (other <= json_level)
          cfg.store_address = a;
      }
      continue;
    }
    if (!v.is_string())
      fail(key + ": " + k + " = " + v.dump() + ": must be a string");
  }
  auto take = [&](const char* json_key, const char* toml_key, auto& field, const auto& table) {
    if (!j.contains(json_key))
      return;
    std::string v = j[json_key].get<std::string>();
    const int other = level.of("kv_transfer", toml_key);
    if (other == json_level && v != name_of(table, field))
      fail(key + ": " + json_key + " = " + in_quotes(v) + " disagrees with kv_transfer." + toml_key +
           " = " + in_quotes(name_of(table, field)) + "; set one of them");
    if (other <= json_level)
      field = choice_named(std::string("kv_transfer.") + toml_key, v, table);
  };
  take("kv_connector", "connector", cfg.connector, connector_names);
  take("kv_role", "kv_role", cfg.kv_role, kv_role_names);
  if (leaves.is_null())
    return;
  // [{"kv_connector":"pd"}, {"kv_connector":"offload"}] (vLLM's shape) or ["pd", "offload"].
  if (!leaves.is_array())
    fail(key + ": connectors = " + leaves.dump() + R"(: must be a list like [{"kv_connector":"pd"},{"kv_connector":"offload"}])");
  const int other = level.of("kv_transfer", "connectors");
  if (other == json_level)
    fail(key + ": connectors and kv_transfer.connectors are both set; set one of them");
  if (other > json_level)
    return;
  cfg.leaves.clear();
  for (const auto& leaf : leaves) {
    std::string name;
    if (leaf.is_string())
      name = leaf.get<std::string>();
    else if (leaf.is_object() && leaf.size() == 1 && leaf.contains("kv_connector") && leaf["kv_connector"].is_string())
      name = leaf["kv_connector"].get<std::string>();
    else
      fail(key + ": connectors has " + leaf.dump() + R"(: each leaf must be {"kv_connector": NAME} (its kv_role is the node's))");
    cfg.leaves.push_back(choice_named("kv_transfer.connectors", name, connector_names));
  }
}

// pd.peers = "HOST:PORT,HOST:PORT": prefill nodes a decode node pulls from without signed
// kv_transfer_params (docs/security.md); each a host and a port 1..65535, at most 64.
void read_pd_peers(const reader& r, node_config& cfg) {
  std::string text;
  r.string("pd", "peers", text, rule_pd_peers);
  cfg.pd_peers.clear();
  size_t start = 0;
  while (start <= text.size() && !text.empty()) {
    const size_t comma = text.find(',', start);
    std::string one = text.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
    while (!one.empty() && one.front() == ' ')
      one.erase(one.begin());
    while (!one.empty() && one.back() == ' ')
      one.pop_back();
    const size_t colon = one.rfind(':');
    bool ok = colon != std::string::npos && colon > 0 && colon + 1 < one.size() && colon + 6 >= one.size();
    int64_t port = 0;
    for (size_t i = colon + 1; ok && i < one.size(); ++i) {
      ok = one[i] >= '0' && one[i] <= '9';
      port = port * 10 + (one[i] - '0');
    }
    if (!ok || port < 1 || port > 65535 || one.size() > 255)
      fail("pd.peers = " + in_quotes(text) + ": " + in_quotes(one) + " is not HOST:PORT; must be " + rule_pd_peers);
    cfg.pd_peers.push_back(one);
    if (comma == std::string::npos)
      break;
    start = comma + 1;
  }
  if (cfg.pd_peers.size() > 64)
    fail("pd.peers lists " + std::to_string(cfg.pd_peers.size()) + " peers; must be " + rule_pd_peers);
}

// kv_transfer.connectors = "pd,offload": the leaves of connector "multi", in lookup order.
void read_leaves(const reader& r, node_config& cfg) {
  std::string text;
  r.string("kv_transfer", "connectors", text, "leaf connector names separated by commas, e.g. \"pd,offload\"");
  if (!r.has("kv_transfer", "connectors"))
    return;
  cfg.leaves.clear();
  for (const auto& name : toml_config::split_list(text))
    cfg.leaves.push_back(choice_named("kv_transfer.connectors", name, connector_names));
}

// The leaves as kv_transfer.connectors writes them: "pd,offload".
std::string leaves_text(const node_config& cfg) {
  std::vector<std::string> names;
  for (auto l : cfg.leaves)
    names.push_back(name_of(connector_names, l));
  return join(names, ",");
}

node_config from_table(const toml::table& root, const std::set<std::string>& set_keys) {
  reader r(root);
  node_config cfg;
  constexpr int64_t i32_min = INT32_MIN, i32_max = INT32_MAX, i64_max = INT64_MAX;

  r.choice("model", "preset", cfg.preset, preset_names);
  r.choice("model", "size", cfg.size, size_names);
  cfg.model_seed = static_cast<uint64_t>(
      r.integer("model", "seed", 0, 0, i64_max, "a non-negative integer"));
  r.choice("model", "kv_dtype", cfg.kv, dtype_names);
  r.choice("model", "weight_dtype", cfg.weights, weight_dtype_names);
  r.string("model", "path", cfg.model_path, "a Hugging Face checkpoint directory (config.json + safetensors)");
  r.string("model", "served_model_name", cfg.served_model_name, "the model name /v1/models shows");
  if (!cfg.model_path.empty() && r.has("model", "preset"))
    fail("model.path = " + in_quotes(cfg.model_path) + " with model.preset = " + in_quotes(name_of(preset_names, cfg.preset)) +
         ": a node serves either a Hugging Face checkpoint or a seeded preset; leave model.preset out");

  r.choice("device", "kind", cfg.device_kind, device_kind_names);
  cfg.chaos_seed = static_cast<uint64_t>(
      r.integer("device", "chaos_seed", 0, 0, i64_max, "a non-negative integer (0 = off)"));
  r.choice("device", "matmul", cfg.matmul, matmul_names);

  auto i32 = [&](const char* section, const char* key, int32_t& field, const std::string& rule) {
    field = static_cast<int32_t>(r.integer(section, key, field, i32_min, i32_max, rule));
  };
  i32("cache", "block_size", cfg.block_size, "a power of two between 4 and 256");
  i32("cache", "chunk_size", cfg.chunk_size, "a positive multiple of cache.block_size");
  i32("cache", "num_blocks", cfg.num_blocks, "at least 16");
  i32("cache", "checkpoint_interval", cfg.checkpoint_interval,
      "-1 (prompt-end anchor only), 0 (no checkpoints) or a positive interval in tokens");
  i32("scheduler", "max_batch_tokens", cfg.max_batch_tokens, "at least cache.block_size");
  i32("scheduler", "max_num_seqs", cfg.max_num_seqs, "between 1 and 256");
  i32("scheduler", "max_waiting", cfg.max_waiting, rule_max_waiting);

  r.choice("kv_transfer", "connector", cfg.connector, connector_names);
  r.choice("kv_transfer", "kv_role", cfg.kv_role, kv_role_names);
  cfg.store_capacity_mb = r.integer("store", "capacity_mb", cfg.store_capacity_mb, 0, 1 << 30,
                                    "a size in MiB between 0 and 2^30");
  r.string("store", "address", cfg.store_address, rule_address);
  r.string("store", "transport", cfg.store_transport, "one of " + join(store_transports));
  r.string("store", "expect_identity", cfg.store_expect_identity, "a store engine id (\"\" = any)");
  i32("store", "deadline_ms", cfg.store_deadline_ms, rule_deadline);
  read_leaves(r, cfg);
  apply_kv_transfer_json(r, cfg, set_keys);
  cfg.pd_lease_ms = r.integer("pd", "lease_ms", cfg.pd_lease_ms, 0, 3600000, rule_lease_ms);
  r.string("pd", "transport", cfg.pd_transport, "one of " + join(store_transports));
  read_pd_peers(r, cfg);
  r.string("security", "secret_file", cfg.secret_file, rule_secret_file);
  r.string("security", "tls", cfg.tls.mode, "one of off, on");
  r.string("security", "certificate", cfg.tls.certificate, "a PEM certificate's path (`ordo certs`)");
  r.string("security", "key", cfg.tls.key, "a PEM private key's path (`ordo certs`)");
  r.string("security", "cafile", cfg.tls.cafile, "the deployment CA's PEM certificate (`ordo certs`)");
  r.string("node", "engine_id", cfg.engine_id, rule_engine_id);

  r.string("server", "host", cfg.host, rule_host);
  i32("server", "port", cfg.port, "between 0 and 65535");
  i32("server", "actor_port", cfg.actor_port, "between 0 and 65535");
  i32("server", "header_timeout_s", cfg.header_timeout_s, rule_timeout);
  i32("server", "body_timeout_s", cfg.body_timeout_s, rule_timeout);
  i32("server", "idle_timeout_s", cfg.idle_timeout_s, rule_timeout);
  i32("server", "max_connections", cfg.max_connections, rule_max_connections);
  cfg.max_body_bytes = r.integer("server", "max_body_bytes", cfg.max_body_bytes, 0, i64_max, rule_max_body_bytes);
  r.string("server", "api_key", cfg.api_key, rule_secret);
  r.string("server", "admin_key", cfg.admin_key, rule_secret);

  r.string("log", "level", cfg.log_level, "one of " + join(log_levels));
  r.string("trace", "path", cfg.trace_path, "a file path (\"\" = no recording)");
  r.string("trace", "node", cfg.trace_node, "a name for this node in a timeline");
  r.choice("faults", "drop_edge", cfg.drop_edge, fault_edge_names);
  r.string("faults", "corrupt_commits", cfg.corrupt_commits, "one of " + join(corrupt_kinds));
  return cfg;
}

} // namespace

const char* to_string(device_kind k) { return name_of(device_kind_names, k).c_str(); }
const char* to_string(connector_kind k) { return name_of(connector_names, k).c_str(); }
const char* to_string(kv_role r) { return name_of(kv_role_names, r).c_str(); }

node_config parse_config(const std::string& toml_text, const std::vector<std::string>& overrides) {
  std::set<std::string> set_keys; // "section.key" of each --set, which overrides the file
  for (const auto& o : overrides) {
    std::string k = o.substr(0, o.find('='));
    k.erase(0, k.find_first_not_of(" \t"));
    k.erase(k.find_last_not_of(" \t") + 1);
    set_keys.insert(k);
  }
  node_config cfg = from_table(toml_config::parse(toml_text, overrides, node_schema()), set_keys);
  validate(cfg);
  return cfg;
}

node_config load_config_file(const std::string& path, const std::vector<std::string>& overrides) {
  return toml_config::load_file(path, [&](const std::string& text) { return parse_config(text, overrides); });
}

// SPEC E3: what a multi connector may compose. Refused: leaves without multi, fewer than two,
// a leaf that is none or multi, two offload leaves (each would keep every save), two P/D leaves.
static void check_leaves(const node_config& cfg) {
  const std::string names = leaves_text(cfg);
  const std::string key = "kv_transfer.connectors = " + in_quotes(names);
  if (cfg.connector != connector_kind::multi) {
    if (!cfg.leaves.empty())
      fail(key + ": leaves are composed by kv_transfer.connector = \"multi\", not " +
           in_quotes(name_of(connector_names, cfg.connector)));
    return;
  }
  if (cfg.leaves.size() < 2)
    fail("kv_transfer.connector = \"multi\" needs at least two leaves in kv_transfer.connectors (e.g. \"pd,offload\"), "
         "got " + in_quotes(names));
  std::vector<connector_kind> offload, pd;
  for (auto l : cfg.leaves) {
    if (l == connector_kind::none || l == connector_kind::multi)
      fail(key + ": " + in_quotes(name_of(connector_names, l)) + " cannot be a leaf (leaves: offload, store, pd, pd_kv)");
    (is_offload_leaf(l) ? offload : pd).push_back(l);
  }
  if (offload.size() > 1)
    fail(key + ": two offload leaves (" + name_of(connector_names, offload[0]) + " and " +
         name_of(connector_names, offload[1]) +
         ") would each keep every save of this node; compose at most one offload leaf with a P/D leaf");
  if (pd.size() > 1)
    fail(key + ": two P/D leaves (" + name_of(connector_names, pd[0]) + " and " + name_of(connector_names, pd[1]) +
         ") would each serve this node's host tier to peers; use one");
  if (cfg.has_leaf(connector_kind::store))
    fail(key + ": a store leaf inside multi is not supported yet; compose the in-process offload leaf with the P/D "
         "leaf, or use kv_transfer.connector = \"store\" alone");
}

void validate(const node_config& cfg) {
  if (!cfg.model_path.empty()) { // checked now (config, headers, tensor table), so a bad one stops the node before it serves
    try {
      check_hf_checkpoint(cfg.model_path);
    } catch (const model_load_error& e) {
      fail("model.path = " + in_quotes(cfg.model_path) + ": " + e.what());
    }
  }
  auto bad = [](const std::string& key, int64_t v, const std::string& rule) {
    fail(key + " = " + std::to_string(v) + ": must be " + rule);
  };
  if (cfg.matmul != matmul_mode::exact && cfg.device_kind != device_kind::hip)
    fail("device.matmul = " + in_quotes(name_of(matmul_names, cfg.matmul)) + ": needs device.kind = \"hip\" (device.kind = " +
         in_quotes(to_string(cfg.device_kind)) + " computes every matmul exactly)");
  if (cfg.weights == weight_dtype::bf16 && cfg.device_kind != device_kind::hip)
    fail("model.weight_dtype = \"bf16\": needs device.kind = \"hip\" (bf16 weights are multiplied on the GPU's matrix "
         "units; device.kind = " + in_quotes(to_string(cfg.device_kind)) + " computes on fp32 weights)");
  if (cfg.weights == weight_dtype::bf16 && cfg.matmul != matmul_mode::exact)
    fail("model.weight_dtype = \"bf16\" with device.matmul = " + in_quotes(name_of(matmul_names, cfg.matmul)) +
         ": bf16 weights always take the bf16 matrix units; device.matmul chooses for fp32 weights, leave it \"exact\"");

  const int32_t b = cfg.block_size;
  if (b < 4 || b > 256 || (b & (b - 1)) != 0)
    bad("cache.block_size", b, "a power of two between 4 and 256");
  if (cfg.chunk_size <= 0 || cfg.chunk_size % b != 0)
    bad("cache.chunk_size", cfg.chunk_size,
        "a positive multiple of cache.block_size (" + std::to_string(b) + ")");
  if (cfg.num_blocks < 16)
    bad("cache.num_blocks", cfg.num_blocks, "at least 16");
  if (cfg.checkpoint_interval < -1)
    bad("cache.checkpoint_interval", cfg.checkpoint_interval,
        "-1 (prompt-end anchor only), 0 (no checkpoints) or a positive interval in tokens");

  if (cfg.max_batch_tokens < b)
    bad("scheduler.max_batch_tokens", cfg.max_batch_tokens,
        "at least cache.block_size (" + std::to_string(b) + ")");
  if (cfg.max_num_seqs < 1 || cfg.max_num_seqs > 256)
    bad("scheduler.max_num_seqs", cfg.max_num_seqs, "between 1 and 256");
  if (cfg.max_waiting < 1 || cfg.max_waiting > (1 << 20))
    bad("scheduler.max_waiting", cfg.max_waiting, rule_max_waiting);

  if (cfg.store_capacity_mb < 0 || cfg.store_capacity_mb > (int64_t{1} << 30))
    bad("store.capacity_mb", cfg.store_capacity_mb, "a size in MiB between 0 and 2^30");
  if ((cfg.connector == connector_kind::offload || cfg.connector == connector_kind::pd ||
       cfg.connector == connector_kind::pd_kv || cfg.connector == connector_kind::multi) &&
      cfg.store_capacity_mb < 1)
    bad("store.capacity_mb", cfg.store_capacity_mb,
        std::string("at least 1 with kv_transfer.connector = \"") + to_string(cfg.connector) + "\"");
  if (cfg.actor_port < 0 || cfg.actor_port > 65535)
    bad("server.actor_port", cfg.actor_port, "between 0 and 65535");

  if (cfg.connector == connector_kind::store) {
    if (cfg.store_address.empty())
      fail("store.address = \"\": kv_transfer.connector = \"store\" needs the store server's actor endpoint; "
           "must be " + rule_address);
  }
  if (!cfg.store_address.empty() && !parse_host_port(cfg.store_address))
    fail("store.address = " + in_quotes(cfg.store_address) + ": must be " + rule_address);
  check_choice("store.transport", cfg.store_transport, store_transports);
  if (cfg.connector == connector_kind::store && cfg.store_transport == "tcp" && cfg.store_capacity_mb < 1)
    bad("store.capacity_mb", cfg.store_capacity_mb,
        "at least 1 with store.transport = \"tcp\" (the node's staging arena for the store's bytes)");
  if (cfg.store_deadline_ms < 100 || cfg.store_deadline_ms > 600000)
    bad("store.deadline_ms", cfg.store_deadline_ms, rule_deadline);
  check_leaves(cfg);
  if (cfg.pd_lease_ms < 0 || cfg.pd_lease_ms > 3600000)
    bad("pd.lease_ms", cfg.pd_lease_ms, rule_lease_ms);
  check_choice("pd.transport", cfg.pd_transport, store_transports);
  check_choice("faults.corrupt_commits", cfg.corrupt_commits, corrupt_kinds);
  if (cfg.corrupt_commits != "none" && !cfg.uses_pd())
    fail("faults.corrupt_commits = " + in_quotes(cfg.corrupt_commits) +
         ": corrupts what a P/D node's host tier commits; it needs kv_transfer.connector = \"pd\"");
  if (!toml_config::is_name(cfg.store_expect_identity))
    fail("store.expect_identity = " + in_quotes(cfg.store_expect_identity) + ": must be " + rule_engine_id);
  if (!toml_config::is_name(cfg.engine_id))
    fail("node.engine_id = " + in_quotes(cfg.engine_id) + ": must be " + rule_engine_id);

  if (!is_host(cfg.host))
    fail("server.host = " + in_quotes(cfg.host) + ": must be " + rule_host);
  if (auto why = check_tls_settings(cfg.tls); !why.empty())
    fail(why);
  if (cfg.uses_pd())
    if (auto why = check_caf_bind("server.host", cfg.host, cfg.tls); !why.empty())
      fail(why + " (this node serves its P/D host tier on server.actor_port)");
  if (cfg.port < 0 || cfg.port > 65535)
    bad("server.port", cfg.port, "between 0 and 65535");
  for (auto [key, seconds] : {std::pair<const char*, int32_t>{"server.header_timeout_s", cfg.header_timeout_s},
                              {"server.body_timeout_s", cfg.body_timeout_s},
                              {"server.idle_timeout_s", cfg.idle_timeout_s}})
    if (seconds < 1 || seconds > 3600)
      bad(key, seconds, rule_timeout);
  if (cfg.max_connections < 1 || cfg.max_connections > 65536)
    bad("server.max_connections", cfg.max_connections, rule_max_connections);
  if (cfg.max_body_bytes < 0 || cfg.max_body_bytes > (int64_t{1} << 30))
    bad("server.max_body_bytes", cfg.max_body_bytes, rule_max_body_bytes);
  check_secret("server.api_key", cfg.api_key);
  check_secret("server.admin_key", cfg.admin_key);

  check_choice("log.level", cfg.log_level, log_levels);
  if (cfg.trace_node.empty() || !toml_config::is_name(cfg.trace_node))
    fail("trace.node = " + in_quotes(cfg.trace_node) + ": must be 1 to 64 letters, digits, '_', '-' or '.'");
}

std::string describe(const node_config& cfg) {
  std::ostringstream os;
  if (cfg.model_path.empty())
    os << "model.preset=" << name_of(preset_names, cfg.preset) << " model.size=" << name_of(size_names, cfg.size)
       << " model.seed=" << cfg.model_seed;
  else
    os << "model.path=" << cfg.model_path
       << (cfg.served_model_name.empty() ? std::string() : " model.served_model_name=" + cfg.served_model_name);
  os << " model.kv_dtype=" << name_of(dtype_names, cfg.kv) << " model.weight_dtype=" << name_of(weight_dtype_names, cfg.weights)
     << " device.kind=" << to_string(cfg.device_kind)
     << " device.chaos_seed=" << cfg.chaos_seed << " device.matmul=" << name_of(matmul_names, cfg.matmul) << " cache.block_size=" << cfg.block_size
     << " cache.chunk_size=" << cfg.chunk_size << " cache.num_blocks=" << cfg.num_blocks
     << " cache.checkpoint_interval=" << cfg.checkpoint_interval
     << " scheduler.max_batch_tokens=" << cfg.max_batch_tokens
     << " scheduler.max_num_seqs=" << cfg.max_num_seqs << " scheduler.max_waiting=" << cfg.max_waiting
     << " kv_transfer.connector=" << to_string(cfg.connector)
     << " kv_transfer.kv_role=" << to_string(cfg.kv_role);
  if (!cfg.leaves.empty())
    os << " kv_transfer.connectors=" << leaves_text(cfg);
  os
     << " store.capacity_mb=" << cfg.store_capacity_mb;
  if (cfg.connector == connector_kind::store || !cfg.store_address.empty())
    os << " store.address=" << cfg.store_address << " store.transport=" << cfg.store_transport
       << " store.deadline_ms=" << cfg.store_deadline_ms;
  if (!cfg.store_expect_identity.empty())
    os << " store.expect_identity=" << cfg.store_expect_identity;
  if (cfg.uses_pd())
    os << " pd.lease_ms=" << cfg.pd_lease_ms << " pd.transport=" << cfg.pd_transport;
  if (!cfg.pd_peers.empty()) {
    os << " pd.peers=";
    for (size_t i = 0; i < cfg.pd_peers.size(); ++i)
      os << (i ? "," : "") << cfg.pd_peers[i];
  }
  if (!cfg.secret_file.empty())
    os << " security.secret_file=" << cfg.secret_file;
  if (cfg.tls.on())
    os << " security.tls=on security.certificate=" << cfg.tls.certificate << " security.cafile=" << cfg.tls.cafile;
  if (!cfg.engine_id.empty())
    os << " node.engine_id=" << cfg.engine_id;
  os
     << " server.host=" << cfg.host << " server.port=" << cfg.port
     << (cfg.actor_port != 0 ? " server.actor_port=" + std::to_string(cfg.actor_port) : std::string())
     << " server.header_timeout_s=" << cfg.header_timeout_s << " server.body_timeout_s=" << cfg.body_timeout_s
     << " server.idle_timeout_s=" << cfg.idle_timeout_s << " server.max_connections=" << cfg.max_connections
     << " server.max_body_bytes=" << cfg.max_body_bytes
     << " server.api_key=" << (cfg.api_key.empty() ? "unset" : "set")
     << " server.admin_key=" << (cfg.admin_key.empty() ? "unset" : "set")
     << " log.level=" << cfg.log_level;
  if (!cfg.trace_path.empty())
    os << " trace.path=" << cfg.trace_path;
  if (cfg.trace_node != "node")
    os << " trace.node=" << cfg.trace_node;
  if (cfg.drop_edge != fault_edge::none)
    os << " faults.drop_edge=" << to_string(cfg.drop_edge);
  if (cfg.corrupt_commits != "none")
    os << " faults.corrupt_commits=" << cfg.corrupt_commits;
  return os.str();
}

std::unique_ptr<device> make_configured_device(const node_config& cfg) {
  if (cfg.device_kind == device_kind::hip)
    return make_gpu_device(0);
  cpu_device_options opts;
  opts.chaos_seed = cfg.chaos_seed;
  return make_cpu_device(opts);
}

std::string render_config_toml(const node_config& cfg) {
  node_config shown = cfg;
  shown.trace_path.clear();
  std::istringstream in(describe(shown));
  std::string item, section, out;
  while (in >> item) {
    auto dot = item.find('.'), eq = item.find('=');
    std::string sec = item.substr(0, dot), key = item.substr(dot + 1, eq - dot - 1), value = item.substr(eq + 1);
    if (sec + "." + key == "server.api_key" || sec + "." + key == "server.admin_key")
      continue;
    if (sec != section) {
      out += (out.empty() ? "[" : "\n[") + sec + "]\n";
      section = sec;
    }
    if (is_string_key(sec + "." + key)) {
      std::string quoted = "\"";
      for (char c : value)
        quoted += (c == '"' || c == '\\') ? std::string("\\") + c : std::string(1, c);
      value = quoted + "\"";
    }
    out += key + " = " + value + "\n";
  }
  return out;
}

std::optional<host_port> parse_host_port(const std::string& text) {
  auto colon = text.rfind(':');
  if (colon == std::string::npos || colon + 1 >= text.size() || text.size() - colon - 1 > 5)
    return std::nullopt;
  std::string host = text.substr(0, colon), digits = text.substr(colon + 1);
  if (host.size() > 2 && host.front() == '[' && host.back() == ']')
    host = host.substr(1, host.size() - 2);
  for (char c : digits)
    if (c < '0' || c > '9')
      return std::nullopt;
  const long port = std::stol(digits);
  if (host.empty() || !is_host(host) || port < 1 || port > 65535)
    return std::nullopt;
  return host_port{host, static_cast<uint16_t>(port)};
}

model_options to_model_options(const node_config& cfg) {
  model_options o;
  o.preset = cfg.preset;
  o.size = cfg.size;
  o.seed = cfg.model_seed;
  o.kv = cfg.kv;
  o.block_size = cfg.block_size;
  o.num_blocks = cfg.num_blocks;
  o.max_batch_tokens = cfg.max_batch_tokens;
  o.max_state_slots = cfg.max_num_seqs; // every running request may hold a state slot
  o.matmul = cfg.matmul;
  o.weights = cfg.weights;
  return o;
}

model_options load_model_options(const node_config& cfg) {
  model_options o = to_model_options(cfg);
  if (!cfg.model_path.empty()) {
    try {
      o.checkpoint = std::make_shared<const hf_checkpoint>(load_hf_checkpoint(cfg.model_path));
    } catch (const model_load_error& e) {
      fail("model.path = " + in_quotes(cfg.model_path) + ": " + e.what());
    }
  }
  return o;
}

} // namespace ordo
