// The `ordo store` server actor over a real socket: one actor system publishes it on 127.0.0.1
// (port 0), other actor systems in this process connect through their own middleman, as nodes
// of the host would. Every request has a 3 s deadline; every wait is bounded.
#include <catch.hpp>

#include <chrono>
#include <cstring>
#include <memory>
#include <string>
#include <thread>
#include <variant>

#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <caf/all.hpp>
#include <caf/io/middleman.hpp>

#include "actors/store_server.hpp"
#include "runtime/tls.hpp"
#include "tests/scratch_dir.hpp"
#include "runtime/engine_identity.hpp"

using namespace ordo;

namespace {

constexpr auto deadline = std::chrono::seconds(3);

void quiet(caf::actor_system_config& cfg) {
  cfg.set("logger.file-verbosity", caf::atom("quiet"));
  cfg.set("logger.console-verbosity", caf::atom("quiet"));
}

struct server_side {
  store_arena arena{4u << 20};
  caf::actor_system_config cfg;
  std::unique_ptr<caf::actor_system> sys;
  std::shared_ptr<store_server_shared> shared;
  store_server_actor server;
  uint16_t port = 0;

  explicit server_side(std::optional<secret_key> secret = std::nullopt,
                       std::shared_ptr<const tls_context> tls = nullptr) {
    configure_store_wire(cfg);
    quiet(cfg);
    sys = std::make_unique<caf::actor_system>(cfg);
    store_server_options opt;
    opt.arena = arena.data();
    opt.arena_bytes = arena.size();
    opt.granularity = "block";
    opt.boot_id = boot_id();
    opt.secret = secret;
    opt.tls = std::move(tls);
    shared = opt.shared;
    shared->set_engine_id("store-test");
    server = spawn_store_server(*sys, std::move(opt));
    auto bound = sys->middleman().publish(server, 0, "127.0.0.1", false);
    REQUIRE(bound);
    port = *bound;
  }
  ~server_side() {
    caf::anon_send_exit(server, caf::exit_reason::user_shutdown);
  }
};

// A node stand-in: its own actor system, one actor (its session) talking to the remote store.
struct client_side {
  caf::actor_system_config cfg;
  std::unique_ptr<caf::actor_system> sys;
  std::unique_ptr<caf::scoped_actor> self;
  store_server_actor store;

  explicit client_side(uint16_t port) {
    configure_store_wire(cfg);
    quiet(cfg);
    sys = std::make_unique<caf::actor_system>(cfg);
    self = std::make_unique<caf::scoped_actor>(*sys);
    auto h = sys->middleman().remote_actor<store_server_actor>("127.0.0.1", port);
    REQUIRE(h);
    store = *h;
  }
  ~client_side() {
    self.reset();
    store = nullptr;
  }

  // The reply, or the rendered error.
  template <class Reply, class Msg>
  std::variant<Reply, std::string> ask(Msg m) {
    std::variant<Reply, std::string> out = std::string("no answer");
    (*self)->request(store, deadline, std::move(m))
        .receive([&](Reply& r) { out = std::move(r); }, [&](caf::error& e) { out = sys->render(e); });
    return out;
  }
};

store_hello hello_as(const std::string& engine_id) {
  return store_hello{store_wire_name, store_wire_digest(), engine_id, 7, boot_id(), random_hex(32), "", ""};
}

object_key key_of(uint64_t hash) {
  return object_key{7, hash, 0};
}

object_ref ref_of(uint64_t hash) {
  return object_ref{key_of(hash), 0, 64, 4, 4096};
}

store_step step_of(uint64_t seq) {
  store_step s;
  s.header = command_header{1, seq};
  return s;
}

template <class T, class V>
T get_ok(const V& v) {
  if (auto* err = std::get_if<std::string>(&v))
    FAIL("request failed: " << *err);
  return std::get<T>(v);
}

template <class V>
std::string error_of(const V& v) {
  if (auto* err = std::get_if<std::string>(&v))
    return *err;
  return "(answered, not refused)";
}

bool contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}


// Polls `pred` every 10 ms for up to 10 s.
template <class Pred>
bool eventually(Pred pred) {
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (std::chrono::steady_clock::now() < until) {
    if (pred())
      return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return pred();
}

} // namespace

TEST_CASE("store server: sessions over a real socket", "[store_server]") {
  server_side server;
  REQUIRE(server.port != 0);
  auto a = std::make_unique<client_side>(server.port);

  // Before its hello, an actor has no session: steps and lookups are refused.
  {
    auto early = a->ask<store_step_done>(step_of(1));
    CHECK(contains(error_of(early), "no session: send store_hello first"));
    store_contains q;
    q.keys = {key_of(1)};
    auto early_q = a->ask<store_contains_done>(q);
    CHECK(contains(error_of(early_q), "send store_hello first"));
  }

  // Another wire digest is refused, naming both.
  {
    store_hello h = hello_as("node-a");
    h.wire_digest = store_wire_digest() ^ 0xffu;
    const auto& w = get_ok<store_welcome>(a->ask<store_welcome>(h));
    CHECK_FALSE(w.ok);
    CHECK(contains(w.why, hex64(h.wire_digest)));
    CHECK(contains(w.why, hex64(store_wire_digest())));
    CHECK(w.wire_digest == store_wire_digest());
  }
  // Another wire name too.
  {
    store_hello h = hello_as("node-a");
    h.wire = "ordo-wire-0";
    const auto& w = get_ok<store_welcome>(a->ask<store_welcome>(h));
    CHECK_FALSE(w.ok);
    CHECK(contains(w.why, "\"ordo-wire-0\""));
    CHECK(contains(w.why, "\"ordo-wire-1\""));
  }

  // The hello that opens A's session.
  {
    const auto& w = get_ok<store_welcome>(a->ask<store_welcome>(hello_as("node-a")));
    REQUIRE(w.ok);
    CHECK(w.why.empty());
    CHECK(w.store_id == "store-test");
    CHECK(w.arena_bytes == server.arena.size());
    CHECK(w.granularity == "block");
    CHECK(w.wire_digest == store_wire_digest());
    CHECK(w.boot_id == boot_id());
  }
  CHECK(eventually([&] { return server.shared->view().sessions == 1; }));

  // Reserve, write the bytes into the arena, commit and pin; reserve a second object and leave
  // it open.
  uint64_t offset = 0;
  {
    store_step s = step_of(1);
    s.reserves = {ref_of(1)};
    const auto& done = get_ok<store_step_done>(a->ask<store_step_done>(s));
    REQUIRE(done.reserves.size() == 1);
    REQUIRE(done.reserves[0].ok);
    offset = done.reserves[0].data_offset;
    REQUIRE(offset + 4096 <= server.arena.size());
    std::memset(server.arena.data() + offset, 0x5a, 4096);
  }
  {
    store_step s = step_of(2);
    s.commits = {key_of(1)};
    s.pins = {ref_of(1)};
    s.reserves = {ref_of(2)};
    const auto& done = get_ok<store_step_done>(a->ask<store_step_done>(s));
    REQUIRE(done.pins.size() == 1);
    CHECK(done.pins[0].ok);
    CHECK(done.pins[0].data_offset == offset);
    REQUIRE(done.reserves.size() == 1);
    CHECK(done.reserves[0].ok);
    CHECK(done.stats.commits_total == 1);
    CHECK(done.stats.num_objects == 1);
  }
  // A step out of order is refused; the session's order is its own.
  {
    auto skipped = a->ask<store_step_done>(step_of(5));
    CHECK(contains(error_of(skipped), "out of order"));
  }
  {
    store_contains q;
    q.keys = {key_of(1), key_of(2)};
    const auto& found = get_ok<store_contains_done>(a->ask<store_contains_done>(q));
    CHECK(found.num_leading_committed == 1);
    CHECK(found.present == std::vector<uint8_t>{1, 0});
  }
  CHECK(eventually([&] { return server.shared->view().stats.num_objects == 1; }));

  // A second live session with A's engine id is refused, naming it.
  auto b = std::make_unique<client_side>(server.port);
  {
    const auto& w = get_ok<store_welcome>(b->ask<store_welcome>(hello_as("node-a")));
    CHECK_FALSE(w.ok);
    CHECK(w.why == "engine id node-a is already connected to this store");
    auto refused_step = b->ask<store_step_done>(step_of(1));
    CHECK(contains(error_of(refused_step), "send store_hello first"));
  }
  CHECK(server.shared->view().hellos_refused_total == 3);
  CHECK(server.shared->view().sessions == 1);

  // A's process goes away: its session ends, its pin is dropped and its open reservation
  // aborted; its committed object stays.
  a.reset();
  REQUIRE(eventually([&] { return server.shared->view().sessions == 0; }));
  CHECK(server.shared->view().sessions_ended_total == 1);
  CHECK(server.shared->view().stats.aborts_total == 1);
  CHECK(server.shared->view().stats.num_objects == 1);

  // Its engine id is free again; the object is still there and, unpinned now, evictable.
  {
    const auto& w = get_ok<store_welcome>(b->ask<store_welcome>(hello_as("node-a")));
    REQUIRE(w.ok);
    store_contains q;
    q.keys = {key_of(1)};
    const auto& found = get_ok<store_contains_done>(b->ask<store_contains_done>(q));
    CHECK(found.num_leading_committed == 1);
    store_step s = step_of(1); // B's own order starts at 1
    s.evict_all = true;
    const auto& done = get_ok<store_step_done>(b->ask<store_step_done>(s));
    CHECK(done.num_evicted == 1); // a pin A still held would keep it
    CHECK(done.stats.num_objects == 0);
    CHECK(done.stats.bytes_used == 0); // the aborted reservation's room is free too
  }
  b.reset();
  CHECK(eventually([&] { return server.shared->view().sessions == 0; }));
}

TEST_CASE("store server: its welcome proves the deployment secret over the hello's challenge", "[store_server]") {
  secret_key key{};
  key[0] = 42;
  server_side server(key);
  client_side node(server.port);
  store_hello h = hello_as("node-proof");
  h.mac = store_hello_mac(key, h);
  auto w = get_ok<store_welcome>(node.ask<store_welcome>(h));
  CHECK(w.ok);
  CHECK(w.proof.size() == 64);
  CHECK(store_welcome_proven(key, w, h));
  // Another secret, another challenge, a proof moved to another store's name: none verifies.
  secret_key other = key;
  other[31] ^= 1;
  CHECK_FALSE(store_welcome_proven(other, w, h));
  store_hello replayed = h;
  replayed.challenge = random_hex(32);
  CHECK_FALSE(store_welcome_proven(key, w, replayed));
  store_welcome renamed = w;
  renamed.store_id = "store-evil";
  CHECK_FALSE(store_welcome_proven(key, renamed, h));
  // The node's credential: a hello without a valid MAC is refused, and so is a changed role.
  store_hello forged = hello_as("node-forged");
  auto refused = get_ok<store_welcome>(node.ask<store_welcome>(forged));
  CHECK_FALSE(refused.ok);
  CHECK(refused.why.find("no valid credential") != std::string::npos);
  store_hello promoted = hello_as("node-promoted");
  promoted.role = "kv_consumer";
  promoted.mac = store_hello_mac(key, promoted);
  promoted.role = "kv_both"; // declared read only, claimed otherwise
  CHECK_FALSE(get_ok<store_welcome>(node.ask<store_welcome>(promoted)).ok);
  CHECK(server.shared->view().hellos_refused_credential_total == 2);

  // A read-only (kv_consumer) session pins, but reserves and evicts nothing.
  client_side reader(server.port);
  store_hello ro = hello_as("node-reader");
  ro.role = "kv_consumer";
  ro.mac = store_hello_mac(key, ro);
  REQUIRE(get_ok<store_welcome>(reader.ask<store_welcome>(ro)).ok);
  store_step s = step_of(1);
  s.reserves = {ref_of(1)};
  s.evict_all = true;
  auto done = get_ok<store_step_done>(reader.ask<store_step_done>(s));
  REQUIRE(done.reserves.size() == 1);
  CHECK_FALSE(done.reserves[0].ok);
  CHECK(done.reserves[0].status.find("read only (role kv_consumer)") != std::string::npos);
  CHECK(server.shared->view().orders_refused_role_total == 2);
  CHECK(server.shared->view().stats.reserves_total == 0);

  // A store without the secret proves nothing.
  server_side stranger;
  client_side node2(stranger.port);
  auto w2 = get_ok<store_welcome>(node2.ask<store_welcome>(hello_as("node-proof-2")));
  CHECK(w2.proof.empty());
  CHECK_FALSE(store_welcome_proven(key, w2, hello_as("node-proof-2")));
}

TEST_CASE("store server: with certificates a hello is signed, and only an admin certificate may evict_all",
          "[store_server]") {
  const std::string pki = ordo::test::scratch_dir("store_tls");
  ensure_certificate_authority(pki);
  for (const char* name : {"store", "node"})
    issue_certificate(pki, name, "node", 30);
  issue_certificate(pki, "ops", "admin", 30);
  const std::string other = pki + "/other";
  ensure_certificate_authority(other);
  issue_certificate(other, "stranger", "admin", 30);
  auto load = [](const std::string& dir, const std::string& name, const std::string& ca_dir) {
    return tls_context::load({dir + "/" + name + ".crt", dir + "/" + name + ".key", ca_dir + "/ca.crt"});
  };
  secret_key key{};
  key[0] = 7;
  server_side server(key, load(pki, "store", pki));
  auto signed_hello = [&](const std::string& engine, const tls_context* by) {
    store_hello h = hello_as(engine);
    h.mac = store_hello_mac(key, h);
    if (by)
      sign_store_hello(*by, h);
    return h;
  };
  auto node_cert = load(pki, "node", pki);
  auto admin_cert = load(pki, "ops", pki);
  auto stranger_cert = load(other, "stranger", other);

  client_side plain(server.port);
  auto w = get_ok<store_welcome>(plain.ask<store_welcome>(signed_hello("node-plain", nullptr)));
  CHECK_FALSE(w.ok);
  CHECK_THAT(w.why, Catch::Matchers::Contains("no certificate"));
  w = get_ok<store_welcome>(plain.ask<store_welcome>(signed_hello("node-stranger", stranger_cert.get())));
  CHECK_FALSE(w.ok);
  CHECK_THAT(w.why, Catch::Matchers::Contains("does not verify against the deployment's CA"));
  store_hello promoted = signed_hello("node-promoted", node_cert.get());
  promoted.certificate = admin_cert->certificate_pem(); // another certificate over the node's signature
  w = get_ok<store_welcome>(plain.ask<store_welcome>(promoted));
  CHECK_FALSE(w.ok);
  CHECK_THAT(w.why, Catch::Matchers::Contains("signature that does not verify"));
  CHECK(server.shared->view().hellos_refused_credential_total == 3);

  // A node certificate's session writes, but its evict_all is dropped and counted.
  client_side node(server.port);
  REQUIRE(get_ok<store_welcome>(node.ask<store_welcome>(signed_hello("node-n", node_cert.get()))).ok);
  store_step s = step_of(1);
  s.reserves = {ref_of(1)};
  REQUIRE(get_ok<store_step_done>(node.ask<store_step_done>(s)).reserves.at(0).ok);
  s = step_of(2);
  s.commits = {key_of(1)};
  REQUIRE(get_ok<store_step_done>(node.ask<store_step_done>(s)).stats.commits_total == 1);
  s = step_of(3);
  s.evict_all = true;
  auto done = get_ok<store_step_done>(node.ask<store_step_done>(s));
  CHECK(done.num_evicted == 0);
  CHECK(done.stats.num_objects == 1);
  CHECK(server.shared->view().orders_refused_role_total == 1);

  // An admin certificate's session of the same namespace evicts.
  client_side ops(server.port);
  REQUIRE(get_ok<store_welcome>(ops.ask<store_welcome>(signed_hello("ops", admin_cert.get()))).ok);
  s = step_of(1);
  s.evict_all = true;
  done = get_ok<store_step_done>(ops.ask<store_step_done>(s));
  CHECK(done.num_evicted == 1);
  CHECK(done.stats.num_objects == 0);
  CHECK(server.shared->view().orders_refused_role_total == 1);
}

TEST_CASE("store server: a session cannot release another session's pins", "[store_server]") {
  server_side server;
  auto a = std::make_unique<client_side>(server.port);
  auto b = std::make_unique<client_side>(server.port);
  REQUIRE(get_ok<store_welcome>(a->ask<store_welcome>(hello_as("node-a"))).ok);
  REQUIRE(get_ok<store_welcome>(b->ask<store_welcome>(hello_as("node-b"))).ok);
  {
    store_step s = step_of(1);
    s.reserves = {ref_of(1)};
    REQUIRE(get_ok<store_step_done>(a->ask<store_step_done>(s)).reserves.at(0).ok);
    store_step c = step_of(2);
    c.commits = {key_of(1)};
    c.pins = {ref_of(1)};
    REQUIRE(get_ok<store_step_done>(a->ask<store_step_done>(c)).pins.at(0).ok);
  }
  // B unpins A's pin and aborts nothing of its own: skipped, so evict_all finds nothing to evict.
  {
    store_step s = step_of(1);
    s.unpins = {key_of(1)};
    s.evict_all = true;
    const auto& done = get_ok<store_step_done>(b->ask<store_step_done>(s));
    CHECK(done.num_evicted == 0);
    CHECK(done.stats.num_objects == 1);
  }
  // A unpins its own: now it can be evicted.
  {
    store_step s = step_of(3);
    s.unpins = {key_of(1)};
    s.evict_all = true;
    const auto& done = get_ok<store_step_done>(a->ask<store_step_done>(s));
    CHECK(done.num_evicted == 1);
  }
}

TEST_CASE("store arena: a sealed memfd of the asked size", "[store_server]") {
  store_arena arena(1u << 20);
  REQUIRE(arena.data() != nullptr);
  CHECK(arena.size() == (1u << 20));
  CHECK(arena.fd() >= 0);
  arena.data()[0] = 1;
  arena.data()[arena.size() - 1] = 2;
  CHECK(arena.data()[arena.size() - 1] == 2);
  CHECK_THROWS_WITH(store_arena(0), Catch::Contains("size is 0 bytes"));
}

// The node's process dies without a word (SIGKILL): the connection breaks, CAF kills the proxy of
// its actor, and the server's down handler releases the session. Forked before this test starts
// any actor system (no other thread is running then), the child is a plain client process.
TEST_CASE("store server: a node process killed with SIGKILL loses its session and pins", "[store_server]") {
  int to_child[2], to_parent[2];
  REQUIRE(pipe(to_child) == 0);
  REQUIRE(pipe(to_parent) == 0);
  const pid_t pid = fork();
  REQUIRE(pid >= 0);
  if (pid == 0) { // the node: connect, hello, store and pin one object, report, then wait to die
    close(to_child[1]);
    close(to_parent[0]);
    uint16_t port = 0;
    if (read(to_child[0], &port, sizeof port) != static_cast<ssize_t>(sizeof port))
      _exit(2);
    bool ok = false;
    try {
      caf::actor_system_config cfg;
      configure_store_wire(cfg);
      quiet(cfg);
      caf::actor_system sys{cfg};
      auto h = sys.middleman().remote_actor<store_server_actor>("127.0.0.1", port);
      if (h) {
        caf::scoped_actor self{sys};
        store_step s1 = step_of(1);
        s1.reserves = {ref_of(1)};
        store_step s2 = step_of(2);
        s2.commits = {key_of(1)};
        s2.pins = {ref_of(1)};
        bool hello_ok = false, reserved = false, pinned = false;
        self->request(*h, deadline, hello_as("node-k"))
            .receive([&](store_welcome& w) { hello_ok = w.ok; }, [&](caf::error&) {});
        if (hello_ok)
          self->request(*h, deadline, s1)
              .receive([&](store_step_done& d) { reserved = d.reserves.size() == 1 && d.reserves[0].ok; },
                       [&](caf::error&) {});
        if (reserved)
          self->request(*h, deadline, s2)
              .receive([&](store_step_done& d) { pinned = d.pins.size() == 1 && d.pins[0].ok; }, [&](caf::error&) {});
        ok = pinned;
        if (ok) {
          char c = 'r';
          if (write(to_parent[1], &c, 1) != 1)
            _exit(3);
          for (;;)
            pause(); // SIGKILL ends it here
        }
      }
    } catch (...) {
    }
    _exit(ok ? 0 : 4);
  }
  close(to_child[0]);
  close(to_parent[1]);
  struct child_guard { // never leave the child behind
    pid_t pid;
    ~child_guard() {
      kill(pid, SIGKILL);
      waitpid(pid, nullptr, 0);
    }
  } guard{pid};

  server_side server;
  REQUIRE(write(to_child[1], &server.port, sizeof server.port) == static_cast<ssize_t>(sizeof server.port));
  pollfd pfd{to_parent[0], POLLIN, 0};
  REQUIRE(poll(&pfd, 1, 10000) == 1);
  char c = 0;
  REQUIRE(read(to_parent[0], &c, 1) == 1);
  REQUIRE(c == 'r');
  REQUIRE(eventually([&] { return server.shared->view().sessions == 1; }));
  CHECK(server.shared->view().stats.num_objects == 1);

  kill(pid, SIGKILL);
  REQUIRE(eventually([&] { return server.shared->view().sessions == 0; }));
  CHECK(server.shared->view().sessions_ended_total == 1);

  // Its pin is gone: the committed object stays, and is evictable now.
  client_side b(server.port);
  REQUIRE(get_ok<store_welcome>(b.ask<store_welcome>(hello_as("node-k"))).ok); // the id is free again
  store_step s = step_of(1);
  s.evict_all = true;
  const auto done = get_ok<store_step_done>(b.ask<store_step_done>(s));
  CHECK(done.num_evicted == 1);
  close(to_child[1]);
  close(to_parent[0]);
}
