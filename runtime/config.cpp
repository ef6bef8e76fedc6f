#include "runtime/config.hpp"

#include "runtime/config_keys.hpp"
#include "runtime/device_registry.hpp"
#include "runtime/models/hf_model.hpp"
#include "runtime/toml_config.hpp"

#include <algorithm>
#include <cstdint>
#include <set>
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
const std::string rule_leaves = "leaf connector names separated by commas, e.g. \"pd,offload\"";

// A secret, checked without printing it: its key, whether set, and the first bad character's place.
void check_secret(const std::string& key, const std::string& value) {
  for (size_t i = 0; i < value.size(); ++i) {
    unsigned char c = static_cast<unsigned char>(value[i]);
    if (c <= 0x20 || c >= 0x7f)
      fail(key + " (set, not shown): character " + std::to_string(i + 1) + " of " +
           std::to_string(value.size()) + " is not allowed; must be " + rule_secret);
  }
}

// --- keys the table cannot read alone -------------------------------------------------------

using reader = toml_config::reader;

// Where a key was given: 0 = absent, 1 = the file, 2 = a --set (which overrides the file).
struct key_levels {
  const reader& r;
  const std::set<std::string>& set_keys;
  int of(const std::string& section, const std::string& key) const {
    if (set_keys.count(section + "." + key))
      return 2;
    return r.find(section, key) ? 1 : 0;
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
  r.string("kv_transfer", "connectors", text, rule_leaves);
  if (!r.find("kv_transfer", "connectors"))
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

// --- the keys ---------------------------------------------------------------------------------

bool without_path(const node_config& c) { return c.model_path.empty(); }
bool with_store(const node_config& c) { return c.connector == connector_kind::store || !c.store_address.empty(); }

// Every key of the node config, once (runtime/config_keys.hpp says what the table drives). The
// order is the canonical one: error messages list keys in it and describe() writes them in it.
const config_keys::key_table<node_config>& node_keys() {
  using k = config_keys::keys_of<node_config>;
  using config_keys::key_type;
  constexpr int64_t i32_min = INT32_MIN, i32_max = INT32_MAX, i64_max = INT64_MAX;
  static const config_keys::key_table<node_config> keys = config_keys::concat<node_config>({{
      // [model]
      k::choice("model", "preset", &node_config::preset, preset_names,
                "the seeded model the node builds; refused beside model.path")
          .when(without_path),
      k::choice("model", "size", &node_config::size, size_names, "the preset's size: tiny (tests), 1b (GPU benchmarks)")
          .when(without_path),
      k::integer("model", "seed", &node_config::model_seed, 0, i64_max, "a non-negative integer",
                 "the seed the preset's weights are generated from")
          .when(without_path),
      k::choice("model", "kv_dtype", &node_config::kv, dtype_names,
                "the KV cache's element type (fp8: e4m3 with per-(token, head) scales)"),
      k::choice("model", "weight_dtype", &node_config::weights, weight_dtype_names,
                "the matmul weights' type; bf16 multiplies on the GPU's matrix units (device.kind = \"hip\", "
                "device.matmul = \"exact\")"),
      k::text("model", "path", &node_config::model_path, "a Hugging Face checkpoint directory (config.json + safetensors)",
              "a checkpoint to serve instead of a preset (docs/models.md), checked before the node serves")
          .when([](const node_config& c) { return !c.model_path.empty(); })
          .described_after("seed")
          .checked([](const node_config& c) {
            if (c.model_path.empty())
              return;
            try { // config, headers, tensor table: a bad checkpoint stops the node before it serves
              check_hf_checkpoint(c.model_path);
            } catch (const model_load_error& e) {
              fail("model.path = " + in_quotes(c.model_path) + ": " + e.what());
            }
          }),
      k::text("model", "served_model_name", &node_config::served_model_name, "the model name /v1/models shows",
              "what /v1/models shows; \"\" = model.path's directory name, or ordo-PRESET-SIZE")
          .when([](const node_config& c) { return !c.model_path.empty() && !c.served_model_name.empty(); })
          .described_after("seed"),
      // [device]
      k::choice("device", "kind", &node_config::device_kind, device_kind_names,
                "the CPU device, or GPU 0 of the linked GPU backend (docs/gpu.md)"),
      k::integer("device", "chaos_seed", &node_config::chaos_seed, 0, i64_max, "a non-negative integer (0 = off)",
                 "> 0 delays queued stream work randomly (CPU device); 0 = off"),
      k::choice("device", "matmul", &node_config::matmul, matmul_names,
                "exact (bitwise = CPU) or tf32 (matrix units, device.kind = \"hip\")"),
      // [cache]
      k::integer("cache", "block_size", &node_config::block_size, 4, 256, "a power of two between 4 and 256",
                 "tokens per block = hash block = page")
          .checked([](const node_config& c) {
            if ((c.block_size & (c.block_size - 1)) != 0)
              fail("cache.block_size = " + std::to_string(c.block_size) + ": must be a power of two between 4 and 256");
          }),
      k::integer("cache", "chunk_size", &node_config::chunk_size, i32_min, i32_max,
                 "a positive multiple of cache.block_size", "the offload unit in tokens")
          .checked([](const node_config& c) {
            if (c.chunk_size <= 0 || c.chunk_size % c.block_size != 0)
              fail("cache.chunk_size = " + std::to_string(c.chunk_size) + ": must be a positive multiple of "
                   "cache.block_size (" + std::to_string(c.block_size) + ")");
          }),
      k::integer("cache", "num_blocks", &node_config::num_blocks, 16, i32_max, "at least 16",
                 "blocks in the KV arena"),
      k::integer("cache", "checkpoint_interval", &node_config::checkpoint_interval, -1, i32_max,
                 "-1 (prompt-end anchor only), 0 (no checkpoints) or a positive interval in tokens",
                 "the state checkpoint ladder of hybrid models"),
      // [scheduler]
      k::integer("scheduler", "max_batch_tokens", &node_config::max_batch_tokens, i32_min, i32_max,
                 "at least cache.block_size", "tokens of one forward")
          .checked([](const node_config& c) {
            if (c.max_batch_tokens < c.block_size)
              fail("scheduler.max_batch_tokens = " + std::to_string(c.max_batch_tokens) +
                   ": must be at least cache.block_size (" + std::to_string(c.block_size) + ")");
          }),
      k::integer("scheduler", "max_num_seqs", &node_config::max_num_seqs, 1, 256, "between 1 and 256",
                 "requests running at once (each may hold a state slot)"),
      k::integer("scheduler", "max_waiting", &node_config::max_waiting, 1, 1 << 20, rule_max_waiting,
                 "requests queued for admission; one more gets HTTP 429 (docs/api.md)"),
      // [kv_transfer]
      k::choice("kv_transfer", "connector", &node_config::connector, connector_names,
                "where KV goes beyond HBM: offload (the in-process host tier), store (an `ordo store`, "
                "docs/store.md), pd or pd_kv (P/D, docs/pd.md), multi (kv_transfer.connectors)"),
      k::choice("kv_transfer", "kv_role", &node_config::kv_role, kv_role_names,
                "kv_producer saves only, kv_consumer loads only"),
      // Read after the table by apply_kv_transfer_json: it is compared with the keys it spells.
      k::custom("kv_transfer", "config", key_type::json,
                "a JSON object like '{\"kv_connector\":\"none\",\"kv_role\":\"kv_both\"}'",
                "vLLM's --kv-transfer-config: kv_connector, kv_role, kv_connector_extra_config (address, "
                "connectors); a --set overrides the file's other form, two forms given at one level must agree",
                nullptr, nullptr),
      k::custom("kv_transfer", "connectors", key_type::list, rule_leaves,
                "connector = \"multi\": its leaves, in lookup order (docs/pd.md)", read_leaves, leaves_text)
          .when([](const node_config& c) { return !c.leaves.empty(); }),
      // [store]
      k::integer("store", "capacity_mb", &node_config::store_capacity_mb, 0, int64_t{1} << 30,
                 "a size in MiB between 0 and 2^30",
                 "the host-memory tier (pinned on a GPU device); at least 1 with connector offload, pd, pd_kv, "
                 "multi, or store over tcp (its staging arena)"),
      k::text("store", "address", &node_config::store_address, rule_address,
              "connector = \"store\": the store server's actor endpoint (or kv_connector_extra_config.address)")
          .when(with_store)
          .checked([](const node_config& c) {
            if (!c.store_address.empty() && !parse_host_port(c.store_address))
              fail("store.address = " + in_quotes(c.store_address) + ": must be " + rule_address);
          }),
      k::text_choice("store", "transport", &node_config::store_transport, store_transports,
                     "how the store's bytes travel: shm (its shared arena on this host) or tcp")
          .when(with_store),
      k::text("store", "expect_identity", &node_config::store_expect_identity, "a store engine id (\"\" = any)",
              "the store identity to insist on (docs/store.md)")
          .when([](const node_config& c) { return !c.store_expect_identity.empty(); })
          .described_after("deadline_ms")
          .checked([](const node_config& c) {
            if (!toml_config::is_name(c.store_expect_identity))
              fail("store.expect_identity = " + in_quotes(c.store_expect_identity) + ": must be " + rule_engine_id);
          }),
      k::integer("store", "deadline_ms", &node_config::store_deadline_ms, 100, 600000, rule_deadline,
                 "the deadline of every store request")
          .when(with_store),
      // [pd]
      k::integer("pd", "lease_ms", &node_config::pd_lease_ms, 0, 3600000, rule_lease_ms,
                 "how long a prefill node holds a transfer's objects for the decode node; 0 = no lease")
          .when([](const node_config& c) { return c.uses_pd(); }),
      k::text_choice("pd", "transport", &node_config::pd_transport, store_transports,
                     "how a decode node pulls: shm (the prefill node's arena on this host) or tcp (CAF messages)")
          .when([](const node_config& c) { return c.uses_pd(); }),
      k::custom("pd", "peers", key_type::list, rule_pd_peers,
                "prefill nodes (their server.actor_port) a decode node pulls from without signed "
                "kv_transfer_params (docs/security.md)",
                read_pd_peers, [](const node_config& c) { return join(c.pd_peers, ","); })
          .when([](const node_config& c) { return !c.pd_peers.empty(); }),
  }, config_keys::security_keys<node_config>(), {
      // [node]
      k::text("node", "engine_id", &node_config::engine_id, rule_engine_id,
              "this node's identity (docs/store.md); \"\" = derived from the HTTP port, an instance nonce and the "
              "boot id")
          .when([](const node_config& c) { return !c.engine_id.empty(); })
          .checked([](const node_config& c) {
            if (!toml_config::is_name(c.engine_id))
              fail("node.engine_id = " + in_quotes(c.engine_id) + ": must be " + rule_engine_id);
          }),
      // [server]
      k::text("server", "host", &node_config::host, rule_host,
              "where the HTTP server listens (and, with P/D, the actor port)")
          .checked([](const node_config& c) {
            if (!is_host(c.host))
              fail("server.host = " + in_quotes(c.host) + ": must be " + rule_host);
          }),
      k::integer("server", "port", &node_config::port, 0, 65535, "between 0 and 65535",
                 "the HTTP port; 0 = any free port"),
      k::integer("server", "actor_port", &node_config::actor_port, 0, 65535, "between 0 and 65535",
                 "P/D: where peers reach this node's host tier; 0 = any free port")
          .when([](const node_config& c) { return c.actor_port != 0; }),
      k::integer("server", "header_timeout_s", &node_config::header_timeout_s, 1, 3600, rule_timeout,
                 "seconds for a request's line and headers to arrive"),
      k::integer("server", "body_timeout_s", &node_config::body_timeout_s, 1, 3600, rule_timeout,
                 "seconds for its body, once the headers are in"),
      k::integer("server", "idle_timeout_s", &node_config::idle_timeout_s, 1, 3600, rule_timeout,
                 "seconds a keep-alive connection may sit idle"),
      k::integer("server", "max_connections", &node_config::max_connections, 1, 65536, rule_max_connections,
                 "open connections at once"),
      k::integer("server", "max_body_bytes", &node_config::max_body_bytes, 0, int64_t{1} << 30, rule_max_body_bytes,
                 "the request body limit; 0 = 64 KiB + 8 bytes per context token"),
      k::secret("server", "api_key", &node_config::api_key, rule_secret,
                "the bearer token API clients must send (docs/api.md); never shown")
          .checked([](const node_config& c) { check_secret("server.api_key", c.api_key); }),
      k::secret("server", "admin_key", &node_config::admin_key, rule_secret,
                "the bearer token `/admin/*` callers must send; never shown")
          .checked([](const node_config& c) { check_secret("server.admin_key", c.admin_key); }),
      config_keys::log_level_key<node_config>(),
      // [trace]
      k::text("trace", "path", &node_config::trace_path, "a file path (\"\" = no recording)",
              "record the run to this file (docs/traces.md)")
          .when([](const node_config& c) { return !c.trace_path.empty(); }),
      k::text("trace", "node", &node_config::trace_node, "a name for this node in a timeline",
              "this node's name in a timeline of several nodes: 1 to 64 letters, digits, '_', '-' or '.'")
          .when([](const node_config& c) { return c.trace_node != "node"; })
          .checked([](const node_config& c) {
            if (c.trace_node.empty() || !toml_config::is_name(c.trace_node))
              fail("trace.node = " + in_quotes(c.trace_node) + ": must be 1 to 64 letters, digits, '_', '-' or '.'");
          }),
      // [faults]
      k::choice("faults", "drop_edge", &node_config::drop_edge, fault_edge_names,
                "testing `ordo trace check` only: the step executor leaves this ordering edge out")
          .when([](const node_config& c) { return c.drop_edge != fault_edge::none; }),
      k::text_choice("faults", "corrupt_commits", &node_config::corrupt_commits, corrupt_kinds,
                     "testing only (P/D): flip a data byte of every object of this kind right after its commit")
          .when([](const node_config& c) { return c.corrupt_commits != "none"; }),
  }});
  return keys;
}

const toml_config::schema& node_schema() {
  static const toml_config::schema s = config_keys::schema_of(node_keys(), "cache.block_size=16", "server.port", true);
  return s;
}

node_config from_table(const toml::table& root, const std::set<std::string>& set_keys) {
  const reader r(root, node_schema());
  node_config cfg;
  config_keys::read_keys(node_keys(), r, cfg);
  apply_kv_transfer_json(r, cfg, set_keys);
  if (!cfg.model_path.empty() && r.find("model", "preset"))
    fail("model.path = " + in_quotes(cfg.model_path) + " with model.preset = " + in_quotes(name_of(preset_names, cfg.preset)) +
         ": a node serves either a Hugging Face checkpoint or a seeded preset; leave model.preset out");
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
std::string composition_refusal(const node_config& cfg) {
  const std::string names = leaves_text(cfg);
  const std::string key = "kv_transfer.connectors = " + in_quotes(names);
  if (cfg.connector != connector_kind::multi) {
    if (!cfg.leaves.empty())
      return key + ": leaves are composed by kv_transfer.connector = \"multi\", not " +
             in_quotes(name_of(connector_names, cfg.connector));
    return {};
  }
  if (cfg.leaves.size() < 2)
    return "kv_transfer.connector = \"multi\" needs at least two leaves in kv_transfer.connectors (e.g. \"pd,offload\"), "
           "got " + in_quotes(names);
  std::vector<connector_kind> offload, pd;
  for (auto l : cfg.leaves) {
    if (l == connector_kind::none || l == connector_kind::multi)
      return key + ": " + in_quotes(name_of(connector_names, l)) + " cannot be a leaf (leaves: offload, store, pd, pd_kv)";
    (is_offload_leaf(l) ? offload : pd).push_back(l);
  }
  if (offload.size() > 1)
    return key + ": two offload leaves (" + name_of(connector_names, offload[0]) + " and " +
           name_of(connector_names, offload[1]) +
           ") would each keep every save of this node; compose at most one offload leaf with a P/D leaf";
  if (pd.size() > 1)
    return key + ": two P/D leaves (" + name_of(connector_names, pd[0]) + " and " + name_of(connector_names, pd[1]) +
           ") would each serve this node's host tier to peers; use one";
  if (cfg.has_leaf(connector_kind::store))
    return key + ": a store leaf inside multi is not supported yet; compose the in-process offload leaf with the P/D "
                 "leaf, or use kv_transfer.connector = \"store\" alone";
  return {};
}

void validate(const node_config& cfg) {
  config_keys::check_keys(node_keys(), cfg); // each key's own rule, in table order
  // Rules between keys.
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

  if ((cfg.connector == connector_kind::offload || cfg.connector == connector_kind::pd ||
       cfg.connector == connector_kind::pd_kv || cfg.connector == connector_kind::multi) &&
      cfg.store_capacity_mb < 1)
    bad("store.capacity_mb", cfg.store_capacity_mb,
        std::string("at least 1 with kv_transfer.connector = \"") + to_string(cfg.connector) + "\"");
  if (cfg.connector == connector_kind::store && cfg.store_address.empty())
    fail("store.address = \"\": kv_transfer.connector = \"store\" needs the store server's actor endpoint; "
         "must be " + rule_address);
  if (cfg.connector == connector_kind::store && cfg.store_transport == "tcp" && cfg.store_capacity_mb < 1)
    bad("store.capacity_mb", cfg.store_capacity_mb,
        "at least 1 with store.transport = \"tcp\" (the node's staging arena for the store's bytes)");
  if (auto why = composition_refusal(cfg); !why.empty())
    fail(why);
  if (cfg.corrupt_commits != "none" && !cfg.uses_pd())
    fail("faults.corrupt_commits = " + in_quotes(cfg.corrupt_commits) +
         ": corrupts what a P/D node's host tier commits; it needs kv_transfer.connector = \"pd\"");
  if (auto why = check_tls_settings(cfg.tls); !why.empty())
    fail(why);
  if (cfg.uses_pd())
    if (auto why = check_caf_bind("server.host", cfg.host, cfg.tls); !why.empty())
      fail(why + " (this node serves its P/D host tier on server.actor_port)");
}

std::string describe(const node_config& cfg) { return config_keys::describe_keys(node_keys(), cfg); }

std::string node_config_keys_table() { return config_keys::markdown_table(node_keys()); }

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
  return config_keys::render_toml(node_keys(), shown);
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
