// The node's store client (actors/store_client.hpp) against a real store server over a socket:
// it connects, maps the store's arena into its window (grants point into the store's memory),
// answers without a store once the store is gone (lookups find nothing, transfers are refused),
// reconnects to a store restarted on the same port, and keeps every grant of the ended session
// apart from the new one: a key still held by the ended session is refused, its commit and unpin
// never reach the new store, and its arena stays mapped until those transfers finished.
#include <catch.hpp>

#include <chrono>
#include <cstring>
#include <memory>
#include <string>
#include <thread>
#include <variant>

#include <unistd.h>

#include <caf/all.hpp>
#include <caf/io/middleman.hpp>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include "actors/auth_acceptor.hpp"
#include "actors/store_client.hpp"
#include "actors/store_server.hpp"
#include "runtime/device.hpp"
#include "runtime/engine_identity.hpp"
#include "runtime/shared_arena.hpp"

using namespace ordo;

namespace {

constexpr uint64_t arena_bytes = 4u << 20;

void quiet(caf::actor_system_config& cfg) {
  cfg.set("logger.file-verbosity", caf::atom("quiet"));
  cfg.set("logger.console-verbosity", caf::atom("quiet"));
}

// An `ordo store` in this process: arena, arena socket, published server.
struct store_process {
  store_arena arena{arena_bytes};
  std::unique_ptr<arena_fd_server> fds;
  caf::actor_system_config cfg;
  std::unique_ptr<caf::actor_system> sys;
  std::shared_ptr<store_server_shared> shared;
  store_server_actor server;
  auth_acceptor_handle acceptor;
  uint16_t port = 0;

  store_process(uint16_t want_port, const std::string& id, std::optional<secret_key> secret = std::nullopt) {
    configure_store_wire(cfg);
    quiet(cfg);
    sys = std::make_unique<caf::actor_system>(cfg);
    fds = std::make_unique<arena_fd_server>("ordo-test-client-" + id + "-" + std::to_string(getpid()), arena.fd(),
                                            arena.size());
    store_server_options opt;
    opt.arena = arena.data();
    opt.arena_bytes = arena.size();
    opt.boot_id = boot_id();
    opt.secret = secret;
    shared = opt.shared;
    shared->set_engine_id(id);
    shared->set_arena_socket(fds->name());
    server = spawn_store_server(*sys, std::move(opt));
    if (secret) { // as ordo publishes: behind the acceptor (actors/auth_acceptor.hpp)
      auth_acceptor_options ao;
      ao.port = want_port;
      ao.key = *secret;
      acceptor = spawn_auth_acceptor(*sys, server, ao);
      port = acceptor.port;
      return;
    }
    auto bound = sys->middleman().publish(server, want_port, "127.0.0.1", true);
    REQUIRE(bound);
    port = *bound;
  }
  ~store_process() {
    if (acceptor.broker)
      caf::anon_send_exit(acceptor.broker, caf::exit_reason::user_shutdown);
    caf::anon_send_exit(server, caf::exit_reason::user_shutdown);
    server = nullptr;
    sys.reset(); // closes every connection: the client sees the store go
  }
};

template <class Pred>
bool eventually(Pred pred, int seconds = 15) {
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(seconds);
  while (std::chrono::steady_clock::now() < until) {
    if (pred())
      return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return pred();
}

// A client of namespace 7 for the store at 127.0.0.1:`port`, mapping arenas into `window`.
store_client_options client_options(uint16_t port, std::shared_ptr<host_window> window, uint32_t deadline_ms) {
  store_client_options opt;
  opt.host = "127.0.0.1";
  opt.port = port;
  opt.namespace_id = 7;
  opt.deadline_ms = deadline_ms;
  opt.window = std::move(window);
  opt.dev = std::shared_ptr<device>(make_cpu_device({}));
  return opt;
}

object_key key_of(uint64_t hash) { return object_key{7, hash, 0}; }
object_ref ref_of(uint64_t hash) { return object_ref{key_of(hash), 0, 64, 4, 4096}; }

} // namespace

TEST_CASE("the store client keeps every grant exact across a store that dies and comes back",
          "[store_client]") {
  auto first = std::make_unique<store_process>(0, "store-one");
  const uint16_t port = first->port;

  caf::actor_system_config cfg;
  configure_store_wire(cfg);
  quiet(cfg);
  caf::actor_system sys{cfg};
  auto window = std::make_shared<host_window>(uint64_t{1} << 34);
  store_client_options opt = client_options(port, window, 2000);
  auto status = opt.status;
  auto client = spawn_store_client(sys, opt);
  caf::scoped_actor self{sys};
  uint64_t seq = 0;
  auto step = [&](store_step s) {
    s.header = command_header{1, ++seq};
    store_step_done out;
    bool answered = false;
    self->request(client, std::chrono::seconds(10), std::move(s))
        .receive([&](store_step_done& d) { out = std::move(d), answered = true; },
                 [&](caf::error& e) { FAIL("store_step failed: " << sys.render(e)); });
    REQUIRE(answered);
    return out;
  };
  auto present = [&](uint64_t hash) {
    int present = -1;
    self->request(client, std::chrono::seconds(10), store_contains{{key_of(hash)}})
        .receive([&](store_contains_done& d) { present = d.present.at(0); },
                 [&](caf::error& e) { FAIL("store_contains failed: " << sys.render(e)); });
    return present;
  };

  self->send(client, store_connect_atom_v, std::string("node-test"));
  REQUIRE(eventually([&] { return status->view().connected; }));
  CHECK(status->view().store_id == "store-one");
  CHECK(window->mapped_bytes() == arena_bytes);

  // A save: reserve, write through the window, commit; the bytes are the store's.
  store_step s;
  s.reserves = {ref_of(1)};
  auto d = step(s);
  REQUIRE(d.reserves.at(0).ok);
  const uint64_t off1 = d.reserves[0].data_offset;
  std::memset(window->base() + off1, 0x11, 4096);
  s = {};
  s.commits = {key_of(1)};
  step(s);
  CHECK(present(1) == 1);
  CHECK(first->shared->view().stats.commits_total == 1);
  // Held across the store's death: a pin of object 1 and a reservation of object 2.
  s = {};
  s.pins = {ref_of(1)};
  s.reserves = {ref_of(2)};
  d = step(s);
  REQUIRE(d.pins.at(0).ok);
  REQUIRE(d.reserves.at(0).ok);
  CHECK(window->base()[d.pins[0].data_offset] == 0x11);

  first.reset(); // the store goes away
  REQUIRE(eventually([&] { return !status->view().connected; }));
  CHECK(status->view().error.find("went away") != std::string::npos);
  CHECK(present(1) == 0); // nothing found without a store
  s = {};
  s.reserves = {ref_of(3)};
  d = step(s);
  CHECK_FALSE(d.reserves.at(0).ok);
  CHECK(d.reserves[0].status.rfind("store unreachable: ", 0) == 0);
  // The ended session's grants keep its arena mapped: the pinned bytes are still readable.
  CHECK(window->mapped_bytes() == arena_bytes);
  CHECK(window->base()[off1] == 0x11);

  store_process second(port, "store-two");
  REQUIRE(eventually([&] { return status->view().connected; }));
  CHECK(status->view().store_id == "store-two");
  CHECK(window->mapped_bytes() == 2 * arena_bytes); // the old arena is still in use

  // Keys the ended session still holds are refused; other keys go to the new store, whose
  // arena lies at its own offset of the window.
  s = {};
  s.pins = {ref_of(1)};
  s.reserves = {ref_of(2), ref_of(4)};
  d = step(s);
  CHECK_FALSE(d.pins.at(0).ok);
  CHECK(d.pins[0].status.find("held by an ended store session") != std::string::npos);
  CHECK_FALSE(d.reserves.at(0).ok);
  REQUIRE(d.reserves.at(1).ok);
  const uint64_t off4 = d.reserves[1].data_offset;
  CHECK(off4 >= arena_bytes);
  std::memset(window->base() + off4, 0x44, 4096);
  bool in_new_store = false;
  for (uint64_t i = 0; i + 4096 <= second.arena.size() && !in_new_store; i += 64)
    in_new_store = second.arena.data()[i] == 0x44 && second.arena.data()[i + 4095] == 0x44;
  CHECK(in_new_store);

  // The old session's transfers finish: their commit and unpin never reach the new store, and the
  // old arena is unmapped.
  s = {};
  s.commits = {key_of(2), key_of(4)};
  s.unpins = {key_of(1)};
  step(s);
  CHECK(second.shared->view().stats.commits_total == 1); // object 4 only
  CHECK(present(2) == 0);
  CHECK(present(4) == 1);
  CHECK(window->mapped_bytes() == arena_bytes);
  // Object 2 is free to be saved in the new session now.
  s = {};
  s.reserves = {ref_of(2)};
  d = step(s);
  CHECK(d.reserves.at(0).ok);
  CHECK(status->view().connects_total == 2);
  CHECK(status->view().disconnects_total == 1);

  caf::anon_send_exit(client, caf::exit_reason::user_shutdown);
}

namespace {

// A loopback port nothing listens on (bound once, then closed).
uint16_t free_port() {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a);
  socklen_t n = sizeof a;
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &n);
  ::close(fd);
  return ntohs(a.sin_port);
}

} // namespace

TEST_CASE("a P/D peer's client: a first lookup waits for the session, a stranger is refused, idle ends it",
          "[store_client]") {
  secret_key key{};
  key[5] = 9;
  const uint16_t port = free_port();
  caf::actor_system_config cfg;
  configure_store_wire(cfg);
  quiet(cfg);
  caf::actor_system sys{cfg};
  auto window = std::make_shared<host_window>(uint64_t{1} << 34);
  store_client_options opt = client_options(port, window, 4000);
  opt.secret = key;
  opt.on_demand = true;
  opt.idle_exit_ms = 400;
  auto status = opt.status;
  auto client = spawn_store_client(sys, opt);
  caf::scoped_actor self{sys};
  self->send(client, store_connect_atom_v, std::string("node-peer-test"));

  // Nothing listens yet: the lookup waits while the connect is retried, and is answered through
  // the session once the store appears (not "nothing found" from an unreachable store).
  std::unique_ptr<store_process> store;
  std::thread later([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(600));
    store = std::make_unique<store_process>(port, "peer-one", key);
  });
  const auto t0 = std::chrono::steady_clock::now();
  bool answered = false;
  self->request(client, std::chrono::seconds(10), store_contains{{key_of(1)}})
      .receive([&](store_contains_done&) { answered = true; },
               [&](caf::error& e) { FAIL("store_contains failed: " << sys.render(e)); });
  later.join();
  const auto waited = std::chrono::steady_clock::now() - t0;
  CHECK(answered);
  CHECK(waited >= std::chrono::milliseconds(500));
  CHECK(status->view().connected);
  CHECK(status->view().unreachable_answers_total == 0);
  CHECK(status->view().connects_total == 1);
  CHECK(window->mapped_bytes() == arena_bytes);

  // Unused for idle_exit_ms with nothing outstanding: the client ends and unmaps the arena.
  self->monitor(client);
  bool down = false;
  self->receive([&](caf::down_msg&) { down = true; }, caf::after(std::chrono::seconds(5)) >> [] {});
  CHECK(down);
  CHECK(window->mapped_bytes() == 0);
  REQUIRE(eventually([&] { return store->shared->view().sessions == 0; }));

  // A store holding another secret: its welcome's proof does not verify; refused, nothing mapped,
  // and the lookup is answered at once (no retry for a refusal).
  store.reset();
  secret_key other = key;
  other[0] ^= 1;
  store_process stranger(port, "peer-stranger", other);
  auto opt2 = opt;
  opt2.status = std::make_shared<store_link_status>();
  opt2.idle_exit_ms = 0;
  auto client2 = spawn_store_client(sys, opt2);
  self->send(client2, store_connect_atom_v, std::string("node-peer-test-2"));
  int present = -1;
  self->request(client2, std::chrono::seconds(10), store_contains{{key_of(1)}})
      .receive([&](store_contains_done& d) { present = d.present.at(0); },
               [&](caf::error& e) { FAIL("store_contains failed: " << sys.render(e)); });
  CHECK(present == 0);
  CHECK(opt2.status->view().refused);
  CHECK(opt2.status->view().error.find("did not prove it holds this deployment's secret") != std::string::npos);
  CHECK(window->mapped_bytes() == 0);
  caf::anon_send_exit(client2, caf::exit_reason::user_shutdown);
}
