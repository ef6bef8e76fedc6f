#include "tools/store.hpp"

#include <iostream>
#include <memory>

#include <unistd.h>


#include <caf/all.hpp>
#include <caf/io/middleman.hpp>
#include <spdlog/spdlog.h>

#include "actors/auth_acceptor.hpp"
#include "actors/net/http_server.hpp"
#include "actors/store_server.hpp"
#include "runtime/deployment_secret.hpp"
#include "runtime/engine_identity.hpp"
#include "runtime/shared_arena.hpp"
#include "runtime/store_config.hpp"
#include "tools/process_signals.hpp"

namespace ordo {

namespace {

http_server::handler store_http_handler(std::shared_ptr<store_server_shared> shared,
                                        std::shared_ptr<auth_acceptor_stats> auth) {
  return [shared, auth](http_request req, std::shared_ptr<http_responder> res) {
    if (req.path != "/health" && req.path != "/metrics")
      return res->send(404, "application/json",
                       write_error_body(404, "no route for " + req.method + " " + req.path +
                                                "; try GET /health, GET /metrics"));
    if (req.method != "GET")
      return res->send(405, "application/json", write_error_body(405, req.path + " takes GET"), {{"Allow", "GET"}});
    if (req.path == "/health")
      return res->send(200, "application/json", render_store_health(shared->view()));
    return res->send(200, "text/plain; version=0.0.4",
                     render_store_metrics(shared->view()) + render_auth_acceptor_metrics(*auth));
  };
}

} // namespace

int run_store(const std::string& config_path, const std::vector<std::string>& sets, std::optional<int> port) {
  auto signals = block_process_signals(); // before any thread starts

  store_config cfg;
  try {
    auto overrides = sets;
    if (port)
      overrides.push_back("store.port=" + std::to_string(*port));
    cfg = config_path.empty() ? parse_store_config("", overrides) : load_store_config_file(config_path, overrides);
  } catch (const std::exception& e) {
    std::cerr << "ordo store: invalid config: " << e.what() << "\n";
    return 2;
  }
  spdlog::set_level(spdlog::level::from_str(cfg.log_level));
  deployment_secret secret;
  std::shared_ptr<const tls_context> tls; // security.tls on: mutual TLS, hellos signed (docs/security.md)
  try {
    secret = load_or_create_secret(cfg.secret_file);
    if (cfg.tls.on())
      tls = tls_context::load(cfg.tls.files());
  } catch (const std::exception& e) {
    std::cerr << "ordo store: " << e.what() << "\n";
    return 2;
  }

  std::unique_ptr<store_arena> arena;
  try {
    arena = std::make_unique<store_arena>(cfg.capacity_bytes());
  } catch (const std::exception& e) {
    std::cerr << "ordo store: " << e.what() << " (store.capacity_mb = " << cfg.capacity_mb << ")\n";
    return 1;
  }

  caf::actor_system_config sys_cfg;
  configure_store_wire(sys_cfg);
  caf::actor_system sys{sys_cfg};

  store_server_options opt;
  opt.arena = arena->data();
  opt.arena_bytes = arena->size();
  opt.granularity = cfg.granularity;
  opt.boot_id = boot_id();
  opt.secret = secret.key;
  opt.tls = tls;
  auto shared = opt.shared;
  store_server_actor server = spawn_store_server(sys, std::move(opt));
  auth_acceptor_handle acceptor;
  auto stop_server = [&] {
    if (acceptor.broker)
      caf::anon_send_exit(acceptor.broker, caf::exit_reason::user_shutdown);
    caf::anon_send_exit(server, caf::exit_reason::user_shutdown);
  };

  const std::string tcp_where = "tcp://" + cfg.host + ":" + std::to_string(cfg.port);
  // SO_REUSEADDR: a store restarted on its port binds despite the old connections in TIME_WAIT (a
  // port another process listens on is still refused).
  // Through ordo's acceptor: no byte reaches CAF's BASP before the peer proved the secret
  // (actors/auth_acceptor.hpp, docs/security.md).
  try {
    auth_acceptor_options ao;
    ao.host = cfg.host;
    ao.port = static_cast<uint16_t>(cfg.port);
    ao.key = secret.key;
    ao.tls = tls;
    ao.live = [shared] { return shared->view().sessions; };
    acceptor = spawn_auth_acceptor(sys, server, ao);
  } catch (const std::exception& e) {
    std::cerr << "ordo store: " << e.what() << " (store.port = " << cfg.port << ")\n";
    stop_server();
    return 1;
  }
  const uint16_t actor_port = acceptor.port;
  const std::string engine_id =
      cfg.engine_id.empty() ? make_engine_id("store", actor_port, instance_nonce(), boot_id()) : cfg.engine_id;
  shared->set_engine_id(engine_id);
  // The byte plane: nodes of this host get the arena's fd from an abstract Unix socket whose name
  // the welcome carries (runtime/shared_arena.hpp).
  std::unique_ptr<arena_fd_server> arena_socket;
  try {
    arena_socket = std::make_unique<arena_fd_server>("ordo-store-" + engine_id + "-" + std::to_string(::getpid()),
                                                     arena->fd(), arena->size());
  } catch (const std::exception& e) {
    std::cerr << "ordo store: cannot serve the arena to nodes: " << e.what() << "\n";
    stop_server();
    return 1;
  }
  shared->set_arena_socket(arena_socket->name());

  http_server_options http_opt;
  http_opt.host = cfg.host;
  http_opt.port = cfg.http_port;
  http_server http(http_opt, store_http_handler(shared, acceptor.stats));
  int http_port = 0;
  try {
    http_port = http.start();
  } catch (const std::exception& e) {
    std::cerr << "ordo store: cannot listen on http://" << cfg.host << ":" << cfg.http_port
              << " (store.http_port = " << cfg.http_port << "): " << e.what() << "\n";
    stop_server();
    return 1;
  }
  spdlog::info("ordo store: engine id {}, arena {} MiB (sealed memfd), granularity {}", engine_id, cfg.capacity_mb,
               cfg.granularity);
  std::cout << "listening on http://" << cfg.host << ":" << http_port << " tcp://" << cfg.host << ":" << actor_port
            << std::endl;

  int sig = wait_for_stop_signal(signals, "ordo store", "SIGINT or SIGTERM stops the store");
  spdlog::info("ordo store: {}: stopping", signal_name(sig));
  http.stop_accepting();
  caf::anon_send_exit(acceptor.broker, caf::exit_reason::user_shutdown); // no new peers
  sys.middleman().unpublish(server, actor_port);
  http.stop();
  stop_server();
  spdlog::info("ordo store: stopped");
  return 0;
}

} // namespace ordo
