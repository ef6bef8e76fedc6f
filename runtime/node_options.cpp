#include "runtime/node_options.hpp"

#include <algorithm>
#include <stdexcept>

namespace ordo {

namespace {

// server.max_body_bytes, or enough for a prompt filling the context in the widest form a client
// may send (token ids of up to 7 bytes each, or escaped text) plus room for the other fields.
size_t body_limit(const node_config& cfg, int32_t max_context) {
  if (cfg.max_body_bytes > 0)
    return static_cast<size_t>(cfg.max_body_bytes);
  return (64u << 10) + 8u * static_cast<size_t>(max_context);
}

// The last component of a directory path ("a/b/" -> "b").
std::string directory_name(std::string path) {
  while (path.size() > 1 && path.back() == '/')
    path.pop_back();
  const size_t slash = path.rfind('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}

} // namespace

route_table route_table_of(const node_config& cfg, const std::optional<offload_options>& offload) {
  if (auto why = composition_refusal(cfg); !why.empty())
    throw std::invalid_argument(why);
  route_table t;
  t.name = to_string(cfg.connector);
  auto leaf = [&](connector_kind kind) {
    store_route r;
    r.name = to_string(kind);
    if (kind == connector_kind::none || !offload) {
      r.kind = route_kind::none;
      return r;
    }
    r.kind = is_pd(kind) ? route_kind::pd : route_kind::offload;
    r.policy = *offload;
    r.policy.name = r.name;
    r.takes_leases = is_pd(kind);
    if (!is_pd(kind) && cfg.connector == connector_kind::multi)
      r.policy.lease_ms = 0; // an offload leaf holds no P/D leases
    return r;
  };
  if (cfg.connector == connector_kind::multi)
    for (auto kind : cfg.leaves)
      t.leaves.push_back(leaf(kind));
  else
    t.leaves.push_back(leaf(cfg.connector));
  // P/D reaches several stores (this node's, the peers'), each with its own sequence of steps.
  t.store_stamps = cfg.uses_pd();
  return t;
}

std::string connector_refusal(const node_config& cfg, const std::vector<std::string>& state_groups) {
  if (auto why = composition_refusal(cfg); !why.empty())
    return why;
  const bool leaf = cfg.has_leaf(connector_kind::pd_kv); // SPEC E3: the rules apply to every leaf
  if ((cfg.connector != connector_kind::pd_kv && !leaf) || state_groups.empty())
    return {};
  std::string groups;
  for (const auto& g : state_groups)
    if (groups.find(g) == std::string::npos)
      groups += (groups.empty() ? "" : ", ") + g;
  return std::string(leaf ? "the multi connector's leaf \"pd_kv\"" : "kv_transfer.connector = \"pd_kv\"") +
         " moves KV pages only, and " +
         (cfg.model_path.empty() ? "model.preset = " + std::string(to_string(cfg.preset))
                                 : "the checkpoint at model.path = " + cfg.model_path) +
         " keeps recurrent state a decode node would lose (" + groups +
         "); use \"pd\", which moves the state images with the KV";
}

node_options derive_node_options(const node_config& cfg, const node_model_facts& facts) {
  node_options o;
  const auto& geo = facts.geometry;

  auto& ns = o.namespace_in;
  ns.preset = cfg.preset, ns.size = cfg.size, ns.seed = cfg.model_seed, ns.kv = cfg.kv;
  ns.block_size = cfg.block_size, ns.chunk_size = cfg.chunk_size;
  if (cfg.weights != weight_dtype::fp32)
    ns.matmul_numerics = std::string(to_string(cfg.weights)) + "@" + facts.device_name;
  else if (cfg.matmul != matmul_mode::exact)
    ns.matmul_numerics = std::string(to_string(cfg.matmul)) + "@" + facts.device_name;
  o.namespace_id = namespace_digest(ns, facts.dims, facts.state_layout_id);

  const bool store = cfg.connector == connector_kind::store;
  const bool pd = cfg.uses_pd();
  const bool offload = cfg.connector == connector_kind::offload || store || pd || cfg.connector == connector_kind::multi;
  const bool role_loads = cfg.kv_role != kv_role::kv_producer;
  const bool role_saves = cfg.kv_role != kv_role::kv_consumer;
  // A store server's arenas are mapped into a window the node reserves (runtime/shared_arena.hpp).
  // With store.transport = "tcp" the bytes are staged in the node's own arena of store.capacity_mb.
  // P/D: this node's own arena and its peers' arenas share one window too.
  const bool shared_arena = (store && cfg.store_transport == "shm") || pd;
  o.host_arena_bytes = shared_arena ? static_cast<size_t>(store_window_bytes)
                       : offload ? static_cast<size_t>(cfg.store_capacity_mb) << 20
                                 : 0;
  if (offload) {
    offload_options p;
    p.namespace_id = o.namespace_id;
    p.block_size = cfg.block_size;
    p.chunk_size = cfg.chunk_size;
    p.loads = role_loads;
    p.saves = role_saves;
    p.name = to_string(cfg.connector);
    p.lease_ms = pd && role_saves ? cfg.pd_lease_ms : 0;
    // The runner's scatters sum each load (step_executor::sums_transfers, from the same layout).
    const auto regions = region_layout(facts.dims, cfg.kv, cfg.block_size);
    p.loads_summed = std::all_of(regions.begin(), regions.end(), [](const region_spec& r) {
      return r.row_bytes * static_cast<size_t>(r.rows_per_block) % 8 == 0;
    });
    o.offload = p;
  }
  o.routes = route_table_of(cfg, o.offload);

  o.executor.max_batch_tokens = cfg.max_batch_tokens;
  o.executor.max_num_seqs = cfg.max_num_seqs;
  o.executor.host_arena_bytes = o.host_arena_bytes;

  auto& s = o.scheduler;
  s.block_size = cfg.block_size;
  s.num_blocks = cfg.num_blocks;
  s.max_batch_tokens = cfg.max_batch_tokens;
  s.max_num_seqs = cfg.max_num_seqs;
  s.max_state_slots = to_model_options(cfg).max_state_slots;
  s.has_recurrent_state = geo.has_recurrent_state;
  s.checkpoint_interval = snap_checkpoint_interval(cfg.checkpoint_interval, cfg.block_size);
  if (s.checkpoint_interval != cfg.checkpoint_interval)
    o.warnings.push_back("cache.checkpoint_interval = " + std::to_string(cfg.checkpoint_interval) +
                         " is not a multiple of cache.block_size = " + std::to_string(cfg.block_size) +
                         ": snapped down to " + std::to_string(s.checkpoint_interval));
  s.units_per_image = geo.has_recurrent_state ? facts.units_per_image : 0;
  s.eos_ids = geo.eos_ids;
  s.namespace_id = o.namespace_id;
  s.offload = offload;
  s.host_tier_is_store = store;
  s.pd = pd;
  s.offload_loads = role_loads;
  s.offload_saves = role_saves;
  s.chunk_size = cfg.chunk_size;
  s.unit_bytes = facts.unit_bytes;
  s.max_waiting = cfg.max_waiting;

  o.model_name = !cfg.served_model_name.empty() ? cfg.served_model_name
                 : !cfg.model_path.empty()        ? directory_name(cfg.model_path)
                                                  : std::string("ordo-") + to_string(cfg.preset) + "-" + to_string(cfg.size);
  // A checkpoint's tokenizer.json is not read yet (issue 37 part 1b): its prompts come as token ids.
  o.limits.text_prompts = cfg.model_path.empty();
  o.limits.max_context = geo.max_context;
  o.limits.vocab_size = geo.vocab_size;

  o.http.host = cfg.host;
  o.http.port = cfg.port;
  o.http.max_body_bytes = body_limit(cfg, geo.max_context);
  o.http.header_timeout_ms = static_cast<uint64_t>(cfg.header_timeout_s) * 1000;
  o.http.body_timeout_ms = static_cast<uint64_t>(cfg.body_timeout_s) * 1000;
  o.http.idle_timeout_ms = static_cast<uint64_t>(cfg.idle_timeout_s) * 1000;
  o.http.max_connections = static_cast<size_t>(cfg.max_connections);
  return o;
}

} // namespace ordo
