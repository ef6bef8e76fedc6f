// A node's options for each part, derived from its config and what the built model reports:
// plain data, so the derivation is tested without a device or an actor system.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "runtime/completion_api.hpp"
#include "runtime/config.hpp"
#include "runtime/layouts.hpp"
#include "runtime/model.hpp"
#include "runtime/model_presets.hpp"
#include "runtime/offload_policy.hpp"
#include "runtime/scheduling.hpp"
#include "runtime/step_executor.hpp"
#include "runtime/transfer_routes.hpp"

namespace ordo {

// Facts of the built model and device the options depend on.
struct node_model_facts {
  model_geometry geometry;
  model_dims dims;
  std::string state_layout_id;
  int32_t units_per_image = 0; // page_units::units_per_image()
  uint64_t unit_bytes = 0;     // page_units::unit_bytes()
  std::string device_name;     // names the numerics of non-exact matmuls
};

// The HTTP server's numbers (actors/net/http_server.hpp's options take them).
struct node_http_limits {
  std::string host;
  int port = 0;
  size_t max_body_bytes = 0;
  uint64_t header_timeout_ms = 0;
  uint64_t body_timeout_ms = 0;
  uint64_t idle_timeout_ms = 0;
  size_t max_connections = 0;
};

// The address space a node reserves for the arenas of its store server sessions (connector
// "store"): each session's arena is mapped at its own offset inside it, so a transfer granted by a
// session that has ended still reaches that session's memory until it completes.
inline constexpr uint64_t store_window_bytes = uint64_t{1} << 40;

struct node_options {
  namespace_inputs namespace_in;
  uint64_t namespace_id = 0;
  size_t host_arena_bytes = 0;           // the store's memory (window with "store"); 0 without a host tier
  std::optional<offload_options> offload; // set with every connector but "none"
  // The connector's stores and what each leaf plays (runtime/transfer_routes.hpp); the node sets
  // each leaf's window_offset where it maps that leaf's arena.
  route_table routes;
  step_executor_options executor;        // host_arena and test switches are the node's to set
  scheduler_options scheduler;
  std::string model_name; // what /v1/models lists
  api_limits limits;
  node_http_limits http;
  std::vector<std::string> warnings; // settings adjusted, for the node to log
};

// The route table of cfg.connector over `offload` (runtime/transfer_routes.hpp). Throws
// std::invalid_argument with composition_refusal's reason (runtime/config.hpp).
route_table route_table_of(const node_config& cfg, const std::optional<offload_options>& offload);

// Why this node must not start with its connector ("" = it may): composition_refusal, or a P/D connector that moves KV
// only (pd_kv) for a model with recurrent state, naming the state groups (state segment names:
// gdn_conv, gdn_ssm, ple_window, ple_conv) that would be lost. SPEC E2.
std::string connector_refusal(const node_config& cfg, const std::vector<std::string>& state_groups);

// Pure; `cfg` is validated already.
node_options derive_node_options(const node_config& cfg, const node_model_facts& facts);

} // namespace ordo
