#include "actors/node.hpp"

#include <atomic>
#include <optional>
#include <thread>

#include <unistd.h>

#include <caf/all.hpp>
#include <caf/io/middleman.hpp>
#include <nlohmann/json.hpp>
#include <spdlog/spdlog.h>

#include "actors/auth_acceptor.hpp"
#include "actors/block_pool.hpp"
#include "actors/connector.hpp"
#include "actors/frontend.hpp"
#include "actors/net/http_server.hpp"
#include "actors/model_runner.hpp"
#include "actors/scheduler.hpp"
#include "actors/store.hpp"
#include "actors/store_client.hpp"
#include "actors/store_server.hpp"
#include "runtime/deployment_secret.hpp"
#include "runtime/engine_identity.hpp"
#include "runtime/pd_params.hpp"
#include "runtime/shared_arena.hpp"
#include "runtime/layouts.hpp"
#include "runtime/memory_check.hpp"
#include "runtime/model_presets.hpp"
#include "runtime/metrics.hpp"
#include "runtime/node_metrics.hpp"
#include "runtime/node_options.hpp"
#include "runtime/page_units.hpp"
#include "runtime/prefix_hash.hpp"
#include "runtime/version.hpp"

namespace ordo {

namespace {

// With a store server the middleman is loaded (configure_store_wire adds the message types).
caf::actor_system_config make_actor_config(const node_config& node) {
  caf::actor_system_config cfg;
  if (node.connector == connector_kind::store || node.uses_pd())
    configure_store_wire(cfg);
  else
    cfg.add_message_types<caf::id_block::ordo>();
  cfg.set("scheduler.max-threads", 2);
  cfg.set("logger.file-verbosity", caf::atom("quiet"));
  cfg.set("logger.console-verbosity", caf::atom("quiet"));
  return cfg;
}

// Refuses sizes the host cannot hold before allocating them (Linux overcommits: a huge arena
// would "succeed" and the node be killed later): the host tier always, and on the CPU device
// the KV arena with the weights.
void check_host_memory(const node_config& cfg, const model_options& mo) {
  const uint64_t available = available_memory_bytes();
  // A store server's arena is the store's memory; with store.transport = "tcp" the node stages.
  if (cfg.connector == connector_kind::offload || cfg.connector == connector_kind::multi ||
      (cfg.connector == connector_kind::store && cfg.store_transport == "tcp"))
    check_allocation("store.capacity_mb = " + std::to_string(cfg.store_capacity_mb),
                     static_cast<uint64_t>(cfg.store_capacity_mb) << 20, available);
  if (cfg.device_kind != device_kind::cpu)
    return;
  const model_dims dims = dims_of(mo);
  uint64_t unit_bytes = 0;
  for (const auto& r : region_layout(dims, mo.kv, mo.block_size))
    unit_bytes += r.row_bytes * static_cast<uint64_t>(r.rows_per_block);
  const uint64_t kv = unit_bytes * static_cast<uint64_t>(cfg.num_blocks);
  const uint64_t weights = parameter_count(dims) * sizeof(float);
  check_allocation("cache.num_blocks = " + std::to_string(cfg.num_blocks) + " (with the " +
                       format_bytes(weights) + " of weights)",
                   kv + weights, available);
}

// The first connection to the store server, waited for (bounded): a refusal (identity, wire,
// host, expected identity) stops the node; an unreachable store is retried in the background
// while the node serves and recomputes.
void connect_store(const store_client_actor& client, store_link_status& link, const std::string& engine_id,
                   const node_config& cfg) {
  caf::anon_send(client, store_connect_atom_v, engine_id);
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(2 * cfg.store_deadline_ms + 2000);
  while (!link.view().attempted && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  const store_link_view v = link.view();
  if (v.refused)
    throw std::runtime_error("store.address = " + cfg.store_address + ": " + v.error);
  if (!v.connected)
    spdlog::warn("ordo node: the store server at tcp://{} is unreachable ({}); serving without it and retrying",
                 cfg.store_address, v.attempted ? v.error : "no answer yet");
}

} // namespace

struct node::impl {
  node_config cfg;
  trace_tap tap;
  caf::actor_system_config actor_cfg = make_actor_config(cfg);
  std::unique_ptr<caf::actor_system> sys;
  std::shared_ptr<http_bridge> bridge = std::make_shared<http_bridge>();
  std::shared_ptr<std::atomic<bool>> draining = std::make_shared<std::atomic<bool>>(false);
  std::unique_ptr<http_server> http;
  std::shared_ptr<parse_worker> parser = std::make_shared<parse_worker>();
  std::vector<caf::actor> actors;
  node_metrics_ptr metrics;
  std::shared_ptr<device> dev;
  uint8_t* host_arena = nullptr; // the store's memory, freed after every actor stopped
  std::shared_ptr<host_window> window; // connector "store": where store arenas are mapped
  std::shared_ptr<store_link_status> store_link;
  std::string engine_id;
  // Sealed memfd arenas this node maps into its window and registers with the device (window
  // offset, arena): P/D's own host tier first (offset 0, a store server published to peers), then
  // multi's offload leaf and each peer's staging arena with pd.transport = "tcp".
  std::vector<std::pair<uint64_t, std::unique_ptr<store_arena>>> window_arenas;
  std::unique_ptr<arena_fd_server> pd_arena_socket;
  std::shared_ptr<store_server_shared> pd_shared;
  std::vector<std::pair<std::string, std::shared_ptr<std::atomic<uint64_t>>>> multi_hits; // per leaf
  int actor_port = 0;
  caf::actor pd_acceptor; // P/D: the acceptor in front of the published host tier
  std::shared_ptr<auth_acceptor_stats> pd_auth_stats;
  caf::actor store;
  scheduler_actor scheduler;
  int port = 0;
  bool stopped = false;

  explicit impl(node_config c) : cfg(std::move(c)) {}

  // A new arena of `bytes` in the window, registered with the device; returns its window offset.
  uint64_t map_arena(uint64_t bytes) {
    auto arena = std::make_unique<store_arena>(bytes);
    const uint64_t at = window->attach(arena->fd(), bytes);
    window_arenas.emplace_back(at, std::move(arena));
    dev->register_host(window->base() + at, bytes);
    return at;
  }

  void free_host_arena() {
    if (host_arena && dev && !window)
      dev->free_host_pinned(host_arena);
    if (dev && window)
      for (const auto& [at, arena] : window_arenas)
        dev->unregister_host(window->base() + at);
    pd_arena_socket.reset();
    host_arena = nullptr;
    window.reset(); // after every actor stopped: the client unregistered what it mapped
    window_arenas.clear();
  }
};

node::node(node_config config) : impl_(std::make_unique<impl>(std::move(config))) {}

node::~node() { drain_and_stop(std::chrono::milliseconds(0)); }

int node::port() const { return impl_->port; }
int node::actor_port() const { return impl_->actor_port; }
const node_config& node::config() const { return impl_->cfg; }

int node::start() {
  auto& d = *impl_;
  validate(d.cfg);
  auto model_opts = load_model_options(d.cfg);
  check_host_memory(d.cfg, model_opts);
  std::shared_ptr<device> dev = make_configured_device(d.cfg);
  auto mdl = std::make_shared<model>(model_opts, *dev);
  // The published page regions must match independent byte arithmetic, or no copy of a page
  // unit can be trusted (DESIGN §4).
  auto mismatch = check_regions(region_layout(mdl->dims(), d.cfg.kv, d.cfg.block_size), mdl->kv_fields());
  if (!mismatch.empty())
    throw std::runtime_error("KV arena does not match its region layout: " + mismatch);
  std::vector<std::string> state_groups;
  for (const auto& seg : mdl->state_slots().segments)
    state_groups.push_back(seg.name);
  if (auto why = connector_refusal(d.cfg, state_groups); !why.empty())
    throw std::runtime_error(why);
  const page_units units(mdl->kv_fields(), mdl->state_slots());
  node_model_facts facts;
  facts.geometry = mdl->geometry();
  facts.dims = mdl->dims();
  facts.state_layout_id = state_layout_id(mdl->state_slots());
  facts.units_per_image = units.units_per_image();
  facts.unit_bytes = units.unit_bytes();
  facts.device_name = dev->name();
  const node_options opts = derive_node_options(d.cfg, facts);
  spdlog::info("ordo node: {} | device {} | namespace {:016x} | state layout {}", describe(d.cfg), dev->name(),
               opts.namespace_id, facts.state_layout_id);
  for (const auto& w : opts.warnings)
    spdlog::warn("{}", w);
  if (d.cfg.drop_edge != fault_edge::none)
    spdlog::warn("ordo node: FAULT INJECTION faults.drop_edge = {}: the step executor leaves that ordering edge out; "
                 "outputs may be wrong (this setting exists to test `ordo trace check`)",
                 to_string(d.cfg.drop_edge));
  if (!d.cfg.trace_path.empty()) {
    trace_header_info info;
    info.ordo_version = ordo_version();
    info.config_text = render_config_toml(d.cfg);
    info.node = d.cfg.trace_node;
    info.drop_edge = to_string(d.cfg.drop_edge);
    info.namespace_id = opts.namespace_id;
    info.chaos_seed = d.cfg.chaos_seed;
    d.tap.recorder = std::make_shared<trace_recorder>(d.cfg.trace_path, info);
    spdlog::info("ordo node: recording a trace to {}", d.cfg.trace_path);
  }
  auto& tap = d.tap;
  // The deployment secret (docs/security.md): a node that reaches peers or a store server, or
  // that peers reach, proves itself and checks them with it.
  std::optional<secret_key> secret;
  if (d.cfg.uses_pd() || d.cfg.connector == connector_kind::store) {
    const deployment_secret loaded = load_or_create_secret(d.cfg.secret_file);
    secret = loaded.key;
    spdlog::info("ordo node: deployment secret {}", loaded.path);
  }
  // security.tls on: mutual TLS on the actor port and to every peer and store (docs/security.md).
  std::shared_ptr<const tls_context> tls;
  if (d.cfg.tls.on() && secret) {
    tls = tls_context::load(d.cfg.tls.files());
    spdlog::info("ordo node: TLS on, certificate {} (role {}), CA {}", d.cfg.tls.certificate, tls->role(),
                 d.cfg.tls.cafile);
  }

  d.metrics = make_node_metrics(d.cfg);
  d.sys = std::make_unique<caf::actor_system>(d.actor_cfg);
  auto& sys = *d.sys;
  d.dev = dev;
  store_actor store;
  if (d.cfg.connector == connector_kind::store) {
    // A store server's arenas are mapped into this window as sessions open (actors/store_client).
    const bool tcp = d.cfg.store_transport == "tcp";
    if (tcp) {
      d.host_arena = static_cast<uint8_t*>(dev->alloc_host_pinned(opts.host_arena_bytes));
    } else {
      d.window = std::make_shared<host_window>(opts.host_arena_bytes);
      d.host_arena = d.window->base();
    }
    const auto address = parse_host_port(d.cfg.store_address);
    store_client_options sc;
    sc.host = address->host;
    sc.port = address->port;
    sc.namespace_id = opts.namespace_id;
    sc.expect_identity = d.cfg.store_expect_identity;
    sc.deadline_ms = static_cast<uint32_t>(d.cfg.store_deadline_ms);
    sc.window = d.window;
    sc.tcp = tcp;
    sc.staging_base = tcp ? d.host_arena : nullptr;
    sc.staging_bytes = tcp ? opts.host_arena_bytes : 0;
    sc.dev = dev;
    sc.tap = tap;
    sc.secret = secret;
    sc.tls = tls;
    sc.role = to_string(d.cfg.kv_role);
    d.store_link = sc.status;
    auto client = spawn_store_client(sys, std::move(sc));
    store = caf::actor_cast<store_actor>(client);
    spdlog::info("ordo node: host tier is the store server at tcp://{} (transport {}, deadline {} ms), chunk {} "
                 "tokens, kv_role {}",
                 d.cfg.store_address, d.cfg.store_transport, d.cfg.store_deadline_ms, d.cfg.chunk_size,
                 to_string(d.cfg.kv_role));
  } else if (d.cfg.uses_pd()) {
    // P/D: the host tier is a store server over a sealed memfd, mapped first into the window (so
    // its grants are window offsets), registered with the device, published to peers; peers'
    // arenas are mapped after it as their sessions open.
    const uint64_t bytes = static_cast<uint64_t>(d.cfg.store_capacity_mb) << 20;
    d.window = std::make_shared<host_window>(opts.host_arena_bytes);
    if (d.map_arena(bytes) != 0)
      throw std::runtime_error("P/D: this node's arena did not map at the start of its window");
    d.host_arena = d.window->base();
    store_server_options so;
    so.arena = d.host_arena;
    so.arena_bytes = bytes;
    so.boot_id = boot_id();
    so.local_namespace = opts.namespace_id;
    so.door_name = "store";
    so.tap = tap;
    so.secret = secret;
    so.tls = tls;
    if (d.cfg.corrupt_commits != "none")
      so.corrupt_commits_kind = static_cast<uint8_t>(d.cfg.corrupt_commits == "kv_chunk" ? object_kind::kv_chunk
                                                                                         : object_kind::state_image);
    d.pd_shared = so.shared;
    auto server = spawn_store_server(sys, so);
    store = caf::actor_cast<store_actor>(server);
    // Peers reach it through ordo's acceptor: no byte reaches CAF's BASP before the peer proved the
    // secret (actors/auth_acceptor.hpp, docs/security.md).
    try {
      auth_acceptor_options ao;
      ao.host = d.cfg.host;
      ao.port = static_cast<uint16_t>(d.cfg.actor_port);
      ao.key = *secret;
      ao.tls = tls;
      ao.live = [shared = so.shared] { return shared->view().sessions; };
      auto acceptor = spawn_auth_acceptor(sys, server, ao);
      d.pd_acceptor = acceptor.broker;
      d.pd_auth_stats = acceptor.stats;
      d.actor_port = acceptor.port;
    } catch (const std::exception& e) {
      caf::anon_send_exit(server, caf::exit_reason::user_shutdown);
      throw std::runtime_error(std::string(e.what()) + " (server.actor_port = " + std::to_string(d.cfg.actor_port) + ")");
    }
    spdlog::info("ordo node: P/D: host tier of {} MiB served to peers at tcp://{}:{}, kv_role {}",
                 d.cfg.store_capacity_mb, d.cfg.host, d.actor_port, to_string(d.cfg.kv_role));
  } else {
    if (opts.host_arena_bytes > 0)
      d.host_arena = static_cast<uint8_t*>(dev->alloc_host_pinned(opts.host_arena_bytes));
    store = spawn_store(sys, d.host_arena, opts.host_arena_bytes, tap);
  }
  tap.names->add(store.id(), "store");
  d.store = caf::actor_cast<caf::actor>(store);
  store_actor offload_store; // multi's offload leaf: an in-process tier in the window after pd's arena
  uint64_t offload_base = 0;
  if (d.cfg.connector == connector_kind::multi && d.cfg.has_leaf(connector_kind::offload)) {
    const uint64_t bytes = static_cast<uint64_t>(d.cfg.store_capacity_mb) << 20;
    offload_base = d.map_arena(bytes);
    offload_store = spawn_store(sys, d.window->base() + offload_base, bytes, tap);
    tap.names->add(offload_store.id(), "store:offload");
    spdlog::info("ordo node: multi: offload leaf of {} MiB at window offset {}", d.cfg.store_capacity_mb,
                 offload_base);
  }
  if (opts.offload && !d.window)
    spdlog::info("ordo node: host tier of {} MiB ({}), chunk {} tokens, kv_role {}", d.cfg.store_capacity_mb,
                 dev->runs_host_work() ? "host memory" : "pinned", d.cfg.chunk_size, to_string(d.cfg.kv_role));
  auto pd_engine = std::make_shared<std::string>(); // this node's engine id, once known
  // The connector's stores: each leaf's own (multi's offload leaf: the tier mapped after P/D's).
  route_table routes = opts.routes;
  connector_stores stores;
  for (auto& leaf : routes.leaves) {
    const bool offload_leaf = routes.multi() && leaf.kind == route_kind::offload;
    if (offload_leaf)
      leaf.window_offset = offload_base;
    stores.leaves.push_back(offload_leaf ? offload_store : store);
    if (routes.multi()) {
      stores.hits.push_back(std::make_shared<std::atomic<uint64_t>>(0));
      d.multi_hits.emplace_back(leaf.name, stores.hits.back());
    }
  }
  if (d.cfg.uses_pd()) {
    // A peer's store client connects on first use, as this node ("<engine id>-pd").
    stores.peer_store = [&sys, &d, window = d.window, dev, ns = opts.namespace_id, deadline = d.cfg.store_deadline_ms,
                       tap, pd_engine, secret, tls](const std::string& endpoint) {
      store_client_options pc;
      if (d.cfg.pd_transport == "tcp") {
        // The peer's bytes come as CAF messages into a staging arena of this node's own, mapped
        // into the window (so grants stay window offsets) and registered with the device; the
        // client owns it, and it is unmapped when the client ends (idle).
        const uint64_t bytes = static_cast<uint64_t>(d.cfg.store_capacity_mb) << 20;
        auto arena = std::make_shared<store_arena>(bytes);
        const uint64_t at = window->attach(arena->fd(), bytes);
        dev->register_host(window->base() + at, bytes);
        pc.keep_alive = std::shared_ptr<void>(nullptr, [arena, window, dev, at](void*) {
          try {
            dev->unregister_host(window->base() + at);
          } catch (const std::exception& e) {
            spdlog::error("P/D: unregistering a peer's staging arena: {}", e.what());
          }
          window->detach(at);
        });
        pc.tcp = true;
        pc.staging_base = window->base() + at;
        pc.staging_bytes = bytes;
        pc.staging_offset = at;
      }
      pc.secret = secret;
      pc.tls = tls;
      pc.role = "kv_consumer"; // a decode node only reads a prefill node's tier
      pc.on_demand = true;
      pc.idle_exit_ms = 60000;
      const auto address = parse_host_port(endpoint);
      pc.host = address ? address->host : endpoint;
      pc.port = address ? address->port : 0;
      pc.namespace_id = ns;
      pc.deadline_ms = static_cast<uint32_t>(deadline);
      pc.window = window;
      pc.dev = dev;
      pc.tap = tap;
      pc.trace_name = "peer:" + endpoint;
      auto client = spawn_store_client(sys, std::move(pc));
      tap.names->add(client.id(), "peer:" + endpoint);
      caf::anon_send(client, store_connect_atom_v, *pd_engine + "-pd");
      spdlog::info("ordo node: P/D: connecting to the prefill node at tcp://{} (pd.transport {})", endpoint,
                   d.cfg.pd_transport);
      return caf::actor_cast<store_actor>(client);
    };
  }
  auto connector = spawn_connector(sys, std::move(routes), std::move(stores), tap);
  tap.names->add(connector.id(), "connector");
  auto pool = spawn_block_pool(sys, d.cfg.num_blocks, d.cfg.block_size, tap);
  tap.names->add(pool.id(), "block_pool");
  step_executor_options exec_opts = opts.executor;
  exec_opts.drop_edge = d.cfg.drop_edge;
  exec_opts.host_arena = d.host_arena;
  auto runner = spawn_model_runner(sys, dev, mdl, exec_opts, tap);
  tap.names->add(runner.id(), "model_runner");

  auto metrics = d.metrics;
  auto scheduler = spawn_scheduler(sys, opts.scheduler, {pool, runner, connector},
                                   [metrics](const scheduler_stats& s, const completion_result* r) {
                                     metrics->observe(s, r);
                                   },
                                   tap);
  tap.names->add(scheduler.id(), "scheduler");
  d.scheduler = scheduler;

  frontend_options fe_opts;
  fe_opts.model_name = opts.model_name;
  fe_opts.limits = opts.limits;
  fe_opts.created = unix_seconds();
  fe_opts.api_key = d.cfg.api_key;
  fe_opts.admin_key = d.cfg.admin_key;
  fe_opts.admin_disabled = d.cfg.admin_key.empty() && !is_loopback_host(d.cfg.host);
  if (fe_opts.admin_disabled)
    spdlog::warn("ordo node: server.host = {} is not loopback and server.admin_key is not set: /admin/* answers 403 "
                 "until an admin key is configured",
                 d.cfg.host);
  auto link = d.store_link;
  fe_opts.render_metrics = [metrics, link, pd = d.pd_shared, leaves = d.multi_hits, auth = d.pd_auth_stats] {
    std::string text = metrics->render();
    if (!leaves.empty()) {
      metrics_registry r;
      for (const auto& [leaf, hits] : leaves)
        r.counter("ordo_multi_lookup_hits_total", "Lookups a multi connector's leaf answered with KV (first hit wins)",
                  {{"leaf", leaf}})
            .inc(hits->load());
      text += r.render_prometheus();
    }
    if (link)
      text += render_store_link_metrics(link->view());
    if (pd)
      text += render_pd_lease_metrics(pd->view());
    if (auth)
      text += render_auth_acceptor_metrics(*auth);
    return text;
  };
  fe_opts.host_tier = d.cfg.connector == connector_kind::store                                ? "store"
                      : d.cfg.connector == connector_kind::offload || d.cfg.uses_pd()       ? "cpu"
                                                                                              : "";
  auto engine_id = std::make_shared<std::string>();
  if (d.cfg.uses_pd()) {
    // What a prefill answer tells whoever fronts the pair (vLLM's shape): where to pull from.
    // The transfer id names the lease (the prefill's request id, runtime/offload_policy.cpp).
    // Signed with the deployment secret over who, where, which transfer, which prompt and until
    // when (runtime/pd_params.hpp), so a decode node pulls from no endpoint a client made up.
    fe_opts.kv_transfer_params = [engine_id, host = d.cfg.host, port = &d.actor_port,
                                  secret](const completion_result& r, const std::string& prompt) {
      kv_params_claim c;
      c.engine_id = *engine_id;
      c.host = host;
      c.port = *port;
      c.transfer_id = std::to_string(r.request_id);
      c.expires_at = unix_seconds() + std::max<int64_t>(r.lease_ms / 1000, 0) + 60;
      return nlohmann::json{{"do_remote_decode", false},
                            {"do_remote_prefill", true},
                            {"remote_engine_id", c.engine_id},
                            {"remote_host", c.host},
                            {"remote_port", c.port},
                            {"transfer_id", c.transfer_id},
                            {"lease_ms", r.lease_ms},
                            {"lease_objects", r.lease_objects},
                            {"expires_at", c.expires_at},
                            {"signature", sign_kv_params(*secret, c, prompt)}};
    };
    fe_opts.check_kv_peer = [secret, peers = d.cfg.pd_peers,
                             metrics = d.metrics](const api_request& call) -> std::optional<api_error> {
      const kv_params_verdict v =
          check_kv_params(secret, call.kv_claim, prompt_hash(call.request), peers, unix_seconds());
      if (v.refusal.empty())
        return std::nullopt;
      metrics->count_kv_params_refused();
      spdlog::warn("ordo node: refused a request: {}", v.refusal);
      return api_error{400, v.refusal, "invalid_request_error"};
    };
  } else {
    // This node pulls from no peer, so a request naming one is told so instead of ignored.
    fe_opts.check_kv_peer = [](const api_request& call) -> std::optional<api_error> {
      return api_error{400,
                       "kv_transfer_params names the prefill node " + call.kv_claim.endpoint() +
                           ", but this node pulls from no prefill node (kv_transfer.connector is not \"pd\"); "
                           "send kv_transfer_params to a decode node, or none",
                       "invalid_request_error"};
    };
  }
  fe_opts.health_fields = [engine_id, link]() {
    nlohmann::json j = {{"engine_id", *engine_id}};
    if (link)
      j["store"] = nlohmann::json::parse(render_store_link_health(link->view()));
    return j;
  };
  fe_opts.on_error = [metrics](int status) { metrics->count_error(status); };
  auto fe = spawn_frontend(sys, scheduler, d.bridge, fe_opts, tap);
  tap.names->add(fe.id(), "frontend");
  d.actors = {caf::actor_cast<caf::actor>(fe),     caf::actor_cast<caf::actor>(scheduler),
              caf::actor_cast<caf::actor>(runner), caf::actor_cast<caf::actor>(pool),
              caf::actor_cast<caf::actor>(connector), caf::actor_cast<caf::actor>(store)};
  if (d.pd_acceptor)
    d.actors.push_back(d.pd_acceptor);

  http_server_options http_opts;
  http_opts.host = opts.http.host;
  http_opts.port = opts.http.port;
  http_opts.max_body_bytes = opts.http.max_body_bytes;
  http_opts.header_timeout_ms = opts.http.header_timeout_ms;
  http_opts.body_timeout_ms = opts.http.body_timeout_ms;
  http_opts.idle_timeout_ms = opts.http.idle_timeout_ms;
  http_opts.max_connections = opts.http.max_connections;
  http_opts.on_error = fe_opts.on_error;
  d.http = std::make_unique<http_server>(http_opts, make_http_handler(fe, d.bridge, fe_opts, d.draining, d.parser));
  try {
    d.port = d.http->start();
    // The engine identity names this live node (SPEC D3): its HTTP port, a nonce, the boot id.
    d.engine_id = d.cfg.engine_id.empty()
                      ? make_engine_id("node", static_cast<uint16_t>(d.port), instance_nonce(), boot_id())
                      : d.cfg.engine_id;
    *engine_id = d.engine_id;
    *pd_engine = d.engine_id;
    spdlog::info("ordo node: engine id {}", d.engine_id);
    if (d.pd_shared) {
      d.pd_shared->set_engine_id(d.engine_id);
      const store_arena& own = *d.window_arenas.front().second; // P/D's own host tier: what peers map
      d.pd_arena_socket = std::make_unique<arena_fd_server>(
          "ordo-node-" + d.engine_id + "-" + std::to_string(::getpid()), own.fd(), own.size());
      d.pd_shared->set_arena_socket(d.pd_arena_socket->name());
    }
    if (d.store_link)
      connect_store(caf::actor_cast<store_client_actor>(d.store), *d.store_link, d.engine_id, d.cfg);
  } catch (...) {
    d.http.reset();
    for (auto& a : d.actors)
      caf::anon_send_exit(a, caf::exit_reason::user_shutdown);
    d.actors.clear();
    d.store = nullptr;
    d.scheduler = nullptr;
    d.sys.reset();
    d.free_host_arena();
    d.stopped = true;
    throw;
  }
  return d.port;
}

void node::drain_and_stop(std::chrono::milliseconds timeout) {
  auto& d = *impl_;
  if (d.stopped)
    return;
  d.stopped = true;
  d.draining->store(true);
  if (d.http) {
    d.http->stop_accepting();
    auto deadline = std::chrono::steady_clock::now() + timeout;
    while ((d.bridge->size() > 0 || d.http->num_in_flight() > 0) && std::chrono::steady_clock::now() < deadline)
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    if (d.bridge->size() > 0)
      spdlog::warn("ordo node: stopping with {} requests still in flight", d.bridge->size());
    d.http->stop();
  }
  d.parser->stop(); // before the actors: its jobs send to them
  for (auto& a : d.actors)
    caf::anon_send_exit(a, caf::exit_reason::user_shutdown);
  d.actors.clear();
  d.store = nullptr;
  d.scheduler = nullptr;
  d.sys.reset(); // waits for every actor; the runner's state then drains and frees the device
  d.http.reset();
  d.tap.recorder.reset(); // after the device drained: its last completions are recorded
  d.free_host_arena();
}

std::variant<completion_result, completion_failed> node::complete(const completion_request& request,
                                                                  std::chrono::milliseconds timeout) {
  auto& d = *impl_;
  if (!d.sys || !d.scheduler)
    return completion_failed{request.request_id, "the node is not running", "server_error"};
  caf::scoped_actor self{*d.sys};
  self->send(d.scheduler, request);
  std::optional<std::variant<completion_result, completion_failed>> answer;
  auto deadline = std::chrono::steady_clock::now() + timeout;
  while (!answer) {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0)
      return completion_failed{request.request_id, "no answer within " + std::to_string(timeout.count()) + " ms",
                               "timeout"};
    self->receive([&](const completion_chunk&) {}, [&](const completion_result& r) { answer = r; },
                  [&](const completion_failed& f) { answer = f; }, [&](const evict_result&) {},
                  caf::after(left) >> [] {});
  }
  return *answer;
}

bool node::evict(const evict_request& request, std::chrono::milliseconds timeout) {
  auto& d = *impl_;
  if (!d.sys || !d.scheduler)
    return false;
  caf::scoped_actor self{*d.sys};
  self->send(d.scheduler, request);
  bool done = false;
  self->receive([&](const evict_result&) { done = true; }, caf::after(timeout) >> [] {});
  return done;
}

int32_t node::test_corrupt_store(uint8_t kind) {
  auto& d = *impl_;
  if (!d.sys || !d.store)
    return 0;
  caf::scoped_actor self{*d.sys};
  int32_t changed = 0;
  self->request(caf::actor_cast<store_actor>(d.store), std::chrono::seconds(10), store_corrupt{kind})
      .receive([&](int32_t n) { changed = n; }, [&](caf::error& err) {
        throw std::runtime_error("store corrupt hook failed: " + caf::to_string(err));
      });
  return changed;
}

std::string node::trace_path() const { return impl_->tap.recorder ? impl_->tap.recorder->path() : std::string(); }

std::string node::render_metrics() const { return impl_->metrics ? impl_->metrics->render() : std::string(); }

} // namespace ordo
