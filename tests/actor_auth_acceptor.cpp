// No unauthenticated byte reaches CAF's BASP (issue 36, actors/auth_acceptor.hpp). A store server
// runs in a child process, published either plainly (CAF's publish: the baseline, which the
// forged bytes kill, so this test can see a crash) or through ordo's acceptor (which must survive
// forged BASP headers, a 4 GiB length claim, random bytes and 2000 idle sockets, with bounded
// memory, and still serve an authenticated node). The connector's side refuses a listener that
// answers junk and a store holding another secret.
#include <catch.hpp>

#include <chrono>
#include <cstring>
#include <fstream>
#include <random>
#include <set>
#include <string>
#include <thread>
#include <variant>
#include <vector>

#include <arpa/inet.h>
#include <poll.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <caf/all.hpp>
#include <caf/io/middleman.hpp>

#include "actors/auth_acceptor.hpp"
#include "actors/store_server.hpp"
#include "runtime/engine_identity.hpp"

using namespace ordo;

namespace {

secret_key key_of(uint8_t seed) {
  secret_key k{};
  for (size_t i = 0; i < k.size(); ++i)
    k[i] = static_cast<uint8_t>(seed * 31 + i);
  return k;
}

void quiet(caf::actor_system_config& cfg) {
  cfg.set("logger.file-verbosity", caf::atom("quiet"));
  cfg.set("logger.console-verbosity", caf::atom("quiet"));
}

// A store server in a child process; `guarded`: behind the acceptor. The child writes its port to
// a pipe and lives until the parent closes the other pipe (or 120 s).
struct store_child {
  pid_t pid = -1;
  uint16_t port = 0;
  int to_child = -1;

  explicit store_child(bool guarded) {
    int up[2], down[2];
    REQUIRE(::pipe(up) == 0);
    REQUIRE(::pipe(down) == 0);
    pid = ::fork();
    REQUIRE(pid >= 0);
    if (pid == 0) {
      ::close(up[0]);
      ::close(down[1]);
      run_child(guarded, up[1], down[0]);
      ::_exit(0);
    }
    ::close(up[1]);
    ::close(down[0]);
    to_child = down[1];
    uint16_t p = 0;
    REQUIRE(::read(up[0], &p, sizeof p) == static_cast<ssize_t>(sizeof p));
    ::close(up[0]);
    port = p;
  }
  ~store_child() {
    if (to_child >= 0)
      ::close(to_child);
    if (pid > 0) {
      ::kill(pid, SIGKILL);
      ::waitpid(pid, nullptr, 0);
    }
  }
  bool alive() const { return ::waitpid(pid, nullptr, WNOHANG) == 0; }
  // Waits up to `ms` for the child to end; its wait status, or -1 if it still runs.
  int ended_within(int ms) {
    for (int i = 0; i < ms / 10; ++i) {
      int status = 0;
      if (::waitpid(pid, &status, WNOHANG) == pid) {
        pid = -1;
        return status;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    return -1;
  }
  int64_t rss_kib() const {
    std::ifstream f("/proc/" + std::to_string(pid) + "/status");
    std::string line;
    while (std::getline(f, line))
      if (line.rfind("VmRSS:", 0) == 0)
        return std::stoll(line.substr(6));
    return -1;
  }

  static void run_child(bool guarded, int up, int down) {
    store_arena arena(4u << 20);
    caf::actor_system_config cfg;
    configure_store_wire(cfg);
    quiet(cfg);
    caf::actor_system sys{cfg};
    store_server_options opt;
    opt.arena = arena.data();
    opt.arena_bytes = arena.size();
    opt.boot_id = boot_id();
    opt.secret = key_of(1);
    opt.shared->set_engine_id("store-child");
    auto shared = opt.shared;
    auto server = spawn_store_server(sys, opt);
    uint16_t port = 0;
    auth_acceptor_handle acceptor;
    if (guarded) {
      auth_acceptor_options ao;
      ao.key = key_of(1);
      ao.live = [shared] { return shared->view().sessions; };
      acceptor = spawn_auth_acceptor(sys, server, ao);
      port = acceptor.port;
    } else {
      port = *sys.middleman().publish(server, 0, "127.0.0.1", false);
    }
    (void)!::write(up, &port, sizeof port);
    char c;
    pollfd p{down, POLLIN, 0};
    ::poll(&p, 1, 120000);
    (void)!::read(down, &c, 1);
    if (acceptor.broker)
      caf::anon_send_exit(acceptor.broker, caf::exit_reason::user_shutdown);
    caf::anon_send_exit(server, caf::exit_reason::user_shutdown);
  }
};

int connect_to(uint16_t port) {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(port);
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) {
    ::close(fd);
    return -1;
  }
  return fd;
}

// Sends `bytes` on a fresh connection and keeps it open for `hold_ms`.
void send_raw(uint16_t port, const std::string& bytes, int hold_ms = 300) {
  const int fd = connect_to(port);
  if (fd < 0)
    return;
  (void)!::send(fd, bytes.data(), bytes.size(), MSG_NOSIGNAL);
  std::this_thread::sleep_for(std::chrono::milliseconds(hold_ms));
  ::close(fd);
}

// The attacks of issue 35/36: two forged BASP handshake headers, a header claiming a 4 GiB
// payload (sent with 1 MiB of it), and seeded random bytes.
std::vector<std::string> attacks() {
  std::vector<std::string> out;
  out.push_back(std::string(15, '\0') + '\x01' + std::string(16, '\0'));
  out.push_back('\x01' + std::string(31, '\0'));
  std::string claim(32, '\0');
  claim[0] = 1;                        // server handshake
  claim[4] = claim[5] = claim[6] = claim[7] = '\xff'; // payload_len = 2^32 - 1
  out.push_back(claim + std::string(1 << 20, 'x'));
  std::mt19937 rng(35);
  for (int i = 0; i < 20; ++i) {
    std::string r(64 + rng() % 4096, '\0');
    for (auto& c : r)
      c = static_cast<char>(rng());
    out.push_back(r);
  }
  return out;
}

// Opens a session the way a node does: the authenticated connect, then a hello; the welcome.
std::variant<store_welcome, std::string> hello_through_acceptor(uint16_t port, const secret_key& key) {
  caf::actor_system_config cfg;
  configure_store_wire(cfg);
  quiet(cfg);
  caf::actor_system sys{cfg};
  caf::scoped_actor self{sys};
  auto connector = spawn_auth_connector(sys, key, 3000);
  std::variant<store_welcome, std::string> out = std::string("no answer");
  store_server_actor store;
  self->request(connector, std::chrono::seconds(10), caf::connect_atom::value, std::string("127.0.0.1"), port)
      .receive(
          [&](caf::node_id&, caf::strong_actor_ptr& ptr, std::set<std::string>& ifs) {
            if (ptr && sys.assignable<store_server_actor>(ifs))
              store = caf::actor_cast<store_server_actor>(ptr);
            else
              out = std::string("not a store server");
          },
          [&](caf::error& e) { out = (e == caf::sec::invalid_argument ? "refused: " : "unreachable: ") + sys.render(e); });
  if (store) {
    store_hello h{store_wire_name, store_wire_digest(), "node-auth-test", 7, boot_id(), random_hex(32), "kv_both", ""};
    h.mac = store_hello_mac(key, h);
    self->request(store, std::chrono::seconds(5), h)
        .receive([&](store_welcome& w) { out = w; }, [&](caf::error& e) { out = sys.render(e); });
  }
  caf::anon_send_exit(connector, caf::exit_reason::user_shutdown);
  return out;
}

} // namespace

TEST_CASE("forged BASP bytes kill a plain CAF publish; the acceptor takes them and still serves",
          "[auth_acceptor]") {
  // The baseline: the test can see the crash it guards against.
  {
    store_child plain(false);
    send_raw(plain.port, std::string(15, '\0') + '\x01' + std::string(16, '\0'));
    const int status = plain.ended_within(5000);
    INFO("wait status " << status);
    CHECK(status != -1);
    CHECK(WIFSIGNALED(status));
  }

  rlimit lim{};
  ::getrlimit(RLIMIT_NOFILE, &lim);
  lim.rlim_cur = std::min<rlim_t>(lim.rlim_max, 8192);
  ::setrlimit(RLIMIT_NOFILE, &lim);
  const size_t num_idle = std::min<size_t>(2000, lim.rlim_cur > 200 ? lim.rlim_cur - 200 : 0);

  store_child guarded(true);
  const int64_t rss_before = guarded.rss_kib();
  for (const auto& a : attacks())
    send_raw(guarded.port, a, 50);
  // Idle sockets: opened and held, never a byte.
  std::vector<int> idle;
  for (size_t i = 0; i < num_idle; ++i)
    if (int fd = connect_to(guarded.port); fd >= 0)
      idle.push_back(fd);
  std::this_thread::sleep_for(std::chrono::milliseconds(2500)); // past the 2 s handshake deadline
  CHECK(guarded.alive());
  const int64_t rss_after = guarded.rss_kib();
  INFO("RSS " << rss_before << " KiB -> " << rss_after << " KiB, " << idle.size() << " idle sockets");
  CHECK(rss_after - rss_before < 64 * 1024);
  // The acceptor closed every idle socket (past the cap at once, the others at the deadline).
  size_t closed = 0;
  for (int fd : idle) {
    char c;
    pollfd p{fd, POLLIN, 0};
    if (::poll(&p, 1, 0) == 1 && ::recv(fd, &c, 1, MSG_DONTWAIT) <= 0)
      ++closed;
    ::close(fd);
  }
  CHECK(closed + 64 >= idle.size());

  // A node holding the secret still opens a session, and the store proves the secret too.
  auto got = hello_through_acceptor(guarded.port, key_of(1));
  if (auto* why = std::get_if<std::string>(&got))
    FAIL("no session through the acceptor: " << *why);
  CHECK(std::get<store_welcome>(got).ok);
  // Another secret is refused at the preamble, before BASP.
  auto stranger = hello_through_acceptor(guarded.port, key_of(2));
  REQUIRE(std::holds_alternative<std::string>(stranger));
  CHECK(std::get<std::string>(stranger).rfind("refused: ", 0) == 0);
  CHECK(guarded.alive());
}

TEST_CASE("the connector refuses a listener that answers junk, before BASP reads it", "[auth_acceptor]") {
  const int ls = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  REQUIRE(::bind(ls, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0);
  REQUIRE(::listen(ls, 4) == 0);
  socklen_t n = sizeof a;
  ::getsockname(ls, reinterpret_cast<sockaddr*>(&a), &n);
  std::thread junk([ls] {
    const int c = ::accept(ls, nullptr, nullptr);
    if (c < 0)
      return;
    const std::string j = std::string(8, '\0') + std::string(24, 'J');
    (void)!::send(c, j.data(), j.size(), MSG_NOSIGNAL);
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    ::close(c);
  });
  auto got = hello_through_acceptor(ntohs(a.sin_port), key_of(1));
  junk.join();
  ::close(ls);
  REQUIRE(std::holds_alternative<std::string>(got));
  CHECK(std::get<std::string>(got).rfind("refused: ", 0) == 0);
  CHECK(std::get<std::string>(got).find("did not prove it holds this deployment's secret") != std::string::npos);
}
