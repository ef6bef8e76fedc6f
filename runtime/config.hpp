// Node configuration: TOML file + `--set key=value` overrides, validated before serving (SPEC A1).
// configs/default.toml spells out every key with its default; the fields below say what each
// allows. Secrets (server.api_key, server.admin_key) are never printed, only whether they are set.
#pragma once

#include "runtime/tls.hpp"

#include <cstdint>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "runtime/model.hpp"
#include "messages/trace/device_ops.hpp"

namespace ordo {

enum class device_kind : uint8_t { cpu, hip };
enum class connector_kind : uint8_t { none, offload, store, pd, pd_kv, multi };
enum class kv_role : uint8_t { kv_both, kv_producer, kv_consumer };

// P/D connectors: the node serves its host tier to peers and pulls from the prefill node a
// request names (docs/pd.md).
inline bool is_pd(connector_kind k) { return k == connector_kind::pd || k == connector_kind::pd_kv; }
// Offload leaves keep the node's saves for its own later requests (the in-process tier, a store).
inline bool is_offload_leaf(connector_kind k) { return k == connector_kind::offload || k == connector_kind::store; }

// The names the config file uses.
const char* to_string(device_kind k);
const char* to_string(connector_kind k);
const char* to_string(kv_role r);

// Enum fields are named after their types, so the types are qualified inside the struct.
struct node_config {
  // [model]
  model_preset preset = model_preset::qsa_gdn_ple;
  model_size size = model_size::tiny;
  uint64_t model_seed = 0;
  kv_dtype kv = kv_dtype::fp32;
  weight_dtype weights = weight_dtype::fp32; // bf16: matmul weights as bf16 on the matrix units (hip only)
  // model.path: a Hugging Face checkpoint directory (runtime/models/), refused beside model.preset.
  std::string model_path;
  std::string served_model_name; // what /v1/models shows; default: model.path's directory name, or ordo-PRESET-SIZE
  // [device]
  ordo::device_kind device_kind = ordo::device_kind::cpu;
  uint64_t chaos_seed = 0;         // 0 = off
  matmul_mode matmul = matmul_mode::exact; // exact (bitwise = CPU) | tf32 (matrix units, hip only)
  // [cache]
  int32_t block_size = 64;
  int32_t chunk_size = 256;
  int32_t num_blocks = 512;
  int32_t checkpoint_interval = 256; // 0 none, -1 anchor only, >0 ladder
  // [scheduler]
  int32_t max_batch_tokens = 512;
  int32_t max_num_seqs = 16;
  int32_t max_waiting = 256; // requests queued for admission (1..2^20); one more gets HTTP 429
  // [kv_transfer] (also settable as vLLM-shaped JSON: config = '{"kv_connector":..,"kv_role":..}')
  connector_kind connector = connector_kind::none; // offload: the in-process host-memory tier;
                                                   // store: an `ordo store` server (store.address);
                                                   // pd: P/D, this node's host tier served to peers;
                                                   // pd_kv: P/D of KV pages only (refused with state)
  ordo::kv_role kv_role = ordo::kv_role::kv_both;  // kv_producer saves only, kv_consumer loads only
  // connector = "multi" (docs/pd.md): its leaves in lookup order (kv_transfer.connectors =
  // "pd,offload", or the JSON forms' connectors list); kv_role is the node's, for every leaf.
  std::vector<connector_kind> leaves;
  bool has_leaf(connector_kind k) const {
    for (auto l : leaves)
      if (l == k)
        return true;
    return false;
  }
  // This node serves a P/D host tier to peers: connector pd / pd_kv, or a P/D leaf of multi.
  bool uses_pd() const {
    return is_pd(connector) || has_leaf(connector_kind::pd) || has_leaf(connector_kind::pd_kv);
  }
  // [store]
  int64_t store_capacity_mb = 256; // host-memory tier size (pinned on a GPU device)
  // With connector = "store" (docs/store.md): the server's actor endpoint "HOST:PORT" (also
  // kv_connector_extra_config.address), how bytes travel ("shm": the store's shared arena on
  // this host), the store identity to insist on ("" = any), the deadline of every store request.
  std::string store_address;
  std::string store_transport = "shm";
  std::string store_expect_identity;
  int32_t store_deadline_ms = 5000;
  // [pd] (connector "pd", docs/pd.md): how long a prefill node holds a transfer's objects for the
  // decode node (0 = no lease: they are kept like any host-tier object), and how a decode node
  // pulls them ("shm": the prefill node's arena mapped on this host; "tcp": as CAF messages).
  int64_t pd_lease_ms = 30000;
  std::string pd_transport = "shm";
  // pd.peers: prefill nodes ("HOST:PORT" of their server.actor_port) a decode node pulls from
  // even without signed kv_transfer_params (docs/security.md); every other peer must come signed.
  std::vector<std::string> pd_peers;
  // [security] (docs/security.md): the deployment secret's file ("" = $XDG_RUNTIME_DIR/ordo/secret,
  // else ~/.config/ordo/secret).
  std::string secret_file;
  // security.tls / certificate / key / cafile: mutual TLS on the actor port and to peers (runtime/tls.hpp).
  tls_settings tls;
  // [node]
  std::string engine_id; // "" = derived from the HTTP port, an instance nonce and the boot id
  // [server]
  std::string host = "127.0.0.1"; // an IP address or a host name the HTTP server resolves
  int32_t port = 8000;
  int32_t actor_port = 0;         // with connector "pd": where peers reach this node's store (0 = any)
  int32_t header_timeout_s = 10;  // seconds for a request's line and headers to arrive (1..3600)
  int32_t body_timeout_s = 30;    // seconds for its body, once the headers are in (1..3600)
  int32_t idle_timeout_s = 60;    // seconds a keep-alive connection may sit idle (1..3600)
  int32_t max_connections = 1024; // open connections at once (1..65536)
  int64_t max_body_bytes = 0;     // request body limit (up to 2^30); 0 = derived from the model's
                                  // context length by the node
  // Bearer tokens (printable ASCII, no spaces; "" = none asked). Secrets: never printed.
  std::string api_key;   // what API clients must send
  std::string admin_key; // what /admin/* callers must send
  // [log]
  std::string log_level = "info";
  // [trace] (docs/traces.md)
  std::string trace_path; // "" = no recording; else the run is recorded to this file
  std::string trace_node = "node"; // this node's name in a timeline of several nodes
  // [faults]
  fault_edge drop_edge = fault_edge::none; // testing trace check only: leaves one step edge out
  // Testing only (connector "pd"): flip a data byte of every object of this kind right after its
  // commit ("none" | "kv_chunk" | "state_image"), so readers find a bad checksum.
  std::string corrupt_commits = "none";
};

// The config as a TOML document that parse_config reads back to the same config, without the
// secrets (server.api_key / admin_key) and without trace.path (a trace's header carries it).
std::string render_config_toml(const node_config& cfg);

// One message naming the key, the bad value and what is allowed.
struct config_error : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// Parses TOML text, applies each "key=value" override (dotted keys, e.g. "cache.block_size=16"),
// then validates. Throws config_error on any unknown key, wrong type or value out of range.
node_config parse_config(const std::string& toml_text, const std::vector<std::string>& overrides = {});
node_config load_config_file(const std::string& path, const std::vector<std::string>& overrides = {});

// Why kv_transfer.connectors may not be composed ("" = it may; SPEC E3): leaves without "multi",
// fewer than two, a leaf that is none or multi, two offload leaves (each would keep every save),
// two P/D leaves (each would serve this node's tier to peers), a store leaf (not supported yet).
// validate() refuses with it; runtime/node_options' route_table_of throws it.
std::string composition_refusal(const node_config& cfg);

// Throws config_error when a field is out of range or fields disagree.
void validate(const node_config& cfg);

// Canonical one-line description (stable key order); the node logs it at startup.
std::string describe(const node_config& cfg);

// Every key of the node config as a markdown table (key, type, default, allowed, what it does),
// made from the one declaration of each key (runtime/config.cpp:node_keys); docs/config.md holds it.
std::string node_config_keys_table();

model_options to_model_options(const node_config& cfg);
// to_model_options, and with model.path the checkpoint loaded whole (every tensor converted, its
// digest taken); throws config_error naming model.path and the fault.
model_options load_model_options(const node_config& cfg);

// "HOST:PORT" (an IPv6 host in brackets: "[::1]:7000") → host and port 1..65535; nullopt when
// it is not one.
struct host_port {
  std::string host;
  uint16_t port = 0;
};
std::optional<host_port> parse_host_port(const std::string& text);

// The device `device.kind` names: the CPU device (with `device.chaos_seed`), or GPU 0 of the
// linked GPU backend (throws, naming the build option, in a build without one).
std::unique_ptr<device> make_configured_device(const node_config& cfg);

} // namespace ordo
