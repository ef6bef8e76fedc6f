// Spike (issue 36): can CAF 0.17.6's BASP broker take a socket that our own code
// accepted/connected and authenticated, so that no unauthenticated byte reaches BASP?
//
// Build (one TU, no /work/main/build*):
//   g++ -std=c++17 -O1 probe.cpp -o probe -lcaf_openssl -lcaf_io -lcaf_core -lcrypto -lpthread
//
// Modes (all on 127.0.0.1):
//   probe server-auth  PORT KEYHEX   our acceptor (a CAF broker) + hand-off to BASP
//   probe server-plain PORT          plain middleman().publish (the vulnerable baseline)
//   probe server-tls   PORT DIR      caf::openssl::publish with mutual TLS (DIR/{ca,server}.*)
//   probe client-auth  PORT KEYHEX   connect + authenticate ourselves, hand the fd to BASP
//   probe client-plain PORT          plain middleman().remote_actor
//   probe client-tls   PORT DIR [nocert]  caf::openssl::remote_actor (DIR/{ca,client}.*)
//
// Preamble (mutual challenge-response, HMAC-SHA256 over a 32-byte shared secret):
//   S->C  ns (32 random bytes)
//   C->S  nc (32) || HMAC(k, "C" ns nc)      -- server checks, else closes
//   S->C  HMAC(k, "S" ns nc)                 -- client checks, else closes
// Then the server hands the connection to BASP as an INCOMING connection (BASP writes
// its server handshake first) and the client hands its fd to BASP as an OUTGOING one
// (BASP awaits the server handshake). BASP never sees a byte before both MACs checked.

#include <caf/all.hpp>
#include <caf/io/all.hpp>
#include <caf/io/basp_broker.hpp>
#include <caf/io/network/default_multiplexer.hpp>
#include <caf/openssl/all.hpp>

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/rand.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>
#include <fcntl.h>

#include <array>
#include <chrono>
#include <cstring>
#include <iostream>
#include <map>
#include <string>
#include <thread>

using namespace caf;
using namespace std::chrono_literals;
using bytes32 = std::array<uint8_t, 32>;

namespace {

constexpr uint16_t virtual_port = 1; // port key under which BASP knows the published actor
constexpr size_t max_pending = 64, max_conns = 256;
constexpr auto handshake_deadline = 2s;

using tick_atom_t = atom_constant<atom("authtick")>;

bytes32 parse_key(const std::string& hex) {
  bytes32 k{};
  for (size_t i = 0; i < 32 && 2 * i + 1 < hex.size(); ++i)
    k[i] = static_cast<uint8_t>(std::stoul(hex.substr(2 * i, 2), nullptr, 16));
  return k;
}

bytes32 mac(const bytes32& key, char role, const bytes32& ns, const bytes32& nc) {
  uint8_t msg[65];
  msg[0] = static_cast<uint8_t>(role);
  memcpy(msg + 1, ns.data(), 32);
  memcpy(msg + 33, nc.data(), 32);
  bytes32 out{};
  unsigned len = 32;
  HMAC(EVP_sha256(), key.data(), 32, msg, sizeof msg, out.data(), &len);
  return out;
}

bytes32 random32() {
  bytes32 x{};
  RAND_bytes(x.data(), 32);
  return x;
}

void configure(actor_system_config& cfg) {
  cfg.load<io::middleman>();
  cfg.set("middleman.app-identifiers", std::vector<std::string>{"ordo-spike"});
  cfg.set("middleman.heartbeat-interval", timespan{1s});
  cfg.set("middleman.connection-timeout", timespan{15s});
}

// The published "store": a typed actor doubling an int (typed, so the interface check
// -- `sys.assignable` / the sigs BASP advertises -- is exercised too).
using doubler_actor = typed_actor<replies_to<int>::with<int>>;
doubler_actor::behavior_type doubler() {
  return {[](int x) { std::cout << "store got " << x << std::endl; return x * 2; }};
}

// ---------------------------------------------------------------------------
// Server side: the authenticating acceptor is itself a CAF broker, so it runs in the
// multiplexer thread, non-blocking, with no extra threads. After a good MAC it
// `take()`s the scribe and sends it to the BASP broker with
//   (publish_atom, scribe_ptr, uint16_t port, strong_actor_ptr whom, std::set<std::string> sigs)
// a BASP handler CAF keeps "for test code to set up two instances without doorman":
// it add_scribe()s, registers `whom` under `port`, writes the SERVER handshake and
// reads the client's reply -- exactly what new_connection_msg does for a doorman.
struct pending_conn {
  bytes32 ns;
  uint64_t serial; // handles are fd numbers and get reused: key deadlines by serial too
};

struct auth_state {
  std::map<io::connection_handle, pending_conn> pending;
  size_t handed_over = 0; // connections given to BASP (a real impl decrements on close)
  size_t refused = 0;
  uint64_t next_serial = 0;
};

behavior auth_acceptor(io::stateful_broker<auth_state>* self, uint16_t port, bytes32 key,
                       actor basp, strong_actor_ptr whom, std::set<std::string> sigs) {
  // add_tcp_doorman must run inside the multiplexer loop: a broker's init does.
  auto dm = self->add_tcp_doorman(port, "127.0.0.1", true);
  if (!dm) {
    std::cerr << "bind failed: " << self->system().render(dm.error()) << std::endl;
    self->quit();
    return {};
  }
  std::cout << "auth acceptor on port " << dm->second << std::endl;
  return {
    [=](const io::new_connection_msg& msg) {
      auto& st = self->state;
      if (st.pending.size() >= max_pending || st.handed_over >= max_conns) {
        ++st.refused;
        self->close(msg.handle);
        return;
      }
      auto ns = random32();
      auto serial = ++st.next_serial;
      st.pending[msg.handle] = pending_conn{ns, serial};
      self->write(msg.handle, 32, ns.data());
      self->flush(msg.handle);
      self->configure_read(msg.handle, io::receive_policy::exactly(64));
      self->delayed_send(self, handshake_deadline, tick_atom_t::value, msg.handle, serial);
    },
    [=](const io::new_data_msg& msg) {
      auto& st = self->state;
      auto i = st.pending.find(msg.handle);
      if (i == st.pending.end() || msg.buf.size() != 64)
        return; // not ours (any more)
      bytes32 nc, got;
      memcpy(nc.data(), msg.buf.data(), 32);
      memcpy(got.data(), msg.buf.data() + 32, 32);
      auto ns = i->second.ns;
      st.pending.erase(i);
      auto want = mac(key, 'C', ns, nc);
      if (CRYPTO_memcmp(want.data(), got.data(), 32) != 0) {
        ++st.refused;
        self->close(msg.handle);
        return;
      }
      auto proof = mac(key, 'S', ns, nc);
      self->write(msg.handle, 32, proof.data());
      self->flush(msg.handle); // queued in the scribe; travels with it
      // PITFALL (found by this probe): the scribe's NEXT read is prepared with the
      // policy in force when this handler returns, before BASP's own configure_read
      // arrives. Left at exactly(64) it swallows BASP header+payload as one "header"
      // and BASP drops the connection. So arm exactly(basp::header_size) = what BASP
      // expects first.
      self->configure_read(msg.handle, io::receive_policy::exactly(io::basp::header_size));
      // Hand over: detach the scribe from this broker and give it to BASP.
      io::scribe_ptr sp = self->take(msg.handle);
      ++st.handed_over;
      self->send(basp, publish_atom::value, std::move(sp), virtual_port, whom, sigs);
    },
    [=](tick_atom_t, io::connection_handle hdl, uint64_t serial) {
      auto& st = self->state;
      auto i = st.pending.find(hdl);
      if (i != st.pending.end() && i->second.serial == serial) { // deadline passed, no valid MAC
        st.pending.erase(i);
        ++st.refused;
        self->close(hdl);
      }
    },
    [=](const io::connection_closed_msg& msg) { self->state.pending.erase(msg.handle); },
    [=](const io::acceptor_closed_msg&) {},
  };
}

actor basp_broker_of(actor_system& sys) {
  return sys.middleman().named_broker<io::basp_broker>(atom("BASP"));
}

int server_auth(uint16_t port, bytes32 key) {
  actor_system_config cfg;
  configure(cfg);
  actor_system sys{cfg};
  auto store = sys.spawn(doubler);
  auto basp = basp_broker_of(sys);
  auto whom = actor_cast<strong_actor_ptr>(store);
  auto sigs = sys.message_types(store); // what middleman::publish would advertise
  auto acceptor = sys.middleman().spawn_broker(auth_acceptor, port, key, basp, whom, sigs);
  std::cout << "ready" << std::endl;
  std::string line;
  std::getline(std::cin, line); // run until stdin closes
  // The acceptor broker is a normal (non-hidden) actor: ~actor_system waits for it.
  anon_send_exit(acceptor, exit_reason::user_shutdown);
  anon_send_exit(store, exit_reason::user_shutdown);
  return 0;
}

int server_plain(uint16_t port) {
  actor_system_config cfg;
  configure(cfg);
  actor_system sys{cfg};
  auto store = sys.spawn(doubler);
  auto p = sys.middleman().publish(store, port, "127.0.0.1", true);
  if (!p) { std::cerr << sys.render(p.error()) << std::endl; return 1; }
  std::cout << "ready" << std::endl;
  std::string line;
  std::getline(std::cin, line);
  anon_send_exit(store, exit_reason::user_shutdown);
  return 0;
}

void tls_cfg(actor_system_config& cfg, const std::string& dir, const std::string& who,
             bool with_cert) {
  cfg.load<openssl::manager>();
  if (with_cert) {
    cfg.openssl_certificate = dir + "/" + who + ".pem";
    cfg.openssl_key = dir + "/" + who + ".key";
  }
  cfg.openssl_cafile = dir + "/ca.pem";
}

int server_tls(uint16_t port, const std::string& dir) {
  actor_system_config cfg;
  configure(cfg);
  tls_cfg(cfg, dir, "server", true);
  actor_system sys{cfg};
  auto store = sys.spawn(doubler);
  auto p = openssl::publish(store, port, "127.0.0.1", true);
  if (!p) { std::cerr << sys.render(p.error()) << std::endl; return 1; }
  std::cout << "ready" << std::endl;
  std::string line;
  std::getline(std::cin, line);
  anon_send_exit(store, exit_reason::user_shutdown);
  return 0;
}

// ---------------------------------------------------------------------------
// Client side: blocking connect + preamble in our own thread (ordo would do this
// off the actor threads, e.g. in a detached actor or a broker), then
//   backend().new_scribe(fd)                       (documented @threadsafe)
//   request(basp, t, connect_atom, scribe_ptr, uint16_t port)
//     -> (node_id, strong_actor_ptr, std::set<std::string>)
// the same message middleman_actor_impl delegates to BASP after its own connect.

bool read_full(int fd, uint8_t* p, size_t n, int timeout_ms) {
  while (n > 0) {
    pollfd pfd{fd, POLLIN, 0};
    if (poll(&pfd, 1, timeout_ms) <= 0) return false;
    auto r = ::read(fd, p, n);
    if (r <= 0) return false;
    p += r; n -= static_cast<size_t>(r);
  }
  return true;
}

int connect_and_authenticate(uint16_t port, const bytes32& key, bool preamble) {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in sa{};
  sa.sin_family = AF_INET;
  sa.sin_port = htons(port);
  sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (::connect(fd, reinterpret_cast<sockaddr*>(&sa), sizeof sa) != 0) { ::close(fd); return -1; }
  bytes32 ns, nc = random32(), proof;
  if (!preamble) return fd; // "client-fd": hand a raw fd to BASP (against server-plain)
  if (!read_full(fd, ns.data(), 32, 2000)) { ::close(fd); return -2; }
  auto m = mac(key, 'C', ns, nc);
  uint8_t out[64];
  memcpy(out, nc.data(), 32);
  memcpy(out + 32, m.data(), 32);
  if (::write(fd, out, 64) != 64) { ::close(fd); return -3; }
  if (!read_full(fd, proof.data(), 32, 2000)) { ::close(fd); return -4; }
  auto want = mac(key, 'S', ns, nc);
  if (CRYPTO_memcmp(want.data(), proof.data(), 32) != 0) { ::close(fd); return -5; }
  // CAF's own new_tcp_connection leaves the socket blocking-agnostic; the multiplexer
  // sets non-blocking itself, but make it explicit, plus TCP_NODELAY like CAF does.
  int one = 1;
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
  return fd;
}

int ask(actor_system& sys, const doubler_actor& remote) {
  scoped_actor self{sys};
  int rc = 1;
  self->request(remote, 5s, 21).receive(
    [&](int y) { std::cout << "reply 21*2 = " << y << std::endl; rc = y == 42 ? 0 : 1; },
    [&](error& e) { std::cout << "request failed: " << sys.render(e) << std::endl; });
  return rc;
}

int client_auth_once(actor_system& sys, uint16_t port, bytes32 key, bool preamble);

int client_auth(uint16_t port, bytes32 key, bool preamble = true, int times = 1) {
  actor_system_config cfg;
  configure(cfg);
  actor_system sys{cfg};
  int rc = 0;
  for (int i = 0; i < times; ++i) // times > 1: a second hand-off to an already-connected node
    rc |= client_auth_once(sys, port, key, preamble);
  return rc;
}

int client_auth_once(actor_system& sys, uint16_t port, bytes32 key, bool preamble) {
  int fd = connect_and_authenticate(port, key, preamble);
  if (fd < 0) { std::cout << "preamble refused (" << fd << ")" << std::endl; return 2; }
  // Ownership of fd passes to the scribe (it closes it).
  io::scribe_ptr sp = sys.middleman().backend().new_scribe(fd);
  scoped_actor self{sys};
  doubler_actor remote;
  self->request(basp_broker_of(sys), 5s, connect_atom::value, std::move(sp), port).receive(
    [&](node_id& nid, strong_actor_ptr& ptr, std::set<std::string>& ifs) {
      std::cout << "BASP handshake ok, node " << to_string(nid) << ", ifs " << deep_to_string(ifs)
                << std::endl;
      if (!sys.assignable<doubler_actor>(ifs)) { std::cout << "wrong interface" << std::endl; return; }
      remote = actor_cast<doubler_actor>(ptr);
    },
    [&](error& e) { std::cout << "connect failed: " << sys.render(e) << std::endl; });
  if (!remote) return 1;
  return ask(sys, remote);
}

int client_plain(uint16_t port) {
  actor_system_config cfg;
  configure(cfg);
  cfg.set("middleman.connection-timeout", timespan{3s});
  actor_system sys{cfg};
  auto r = sys.middleman().remote_actor<doubler_actor>("127.0.0.1", port);
  if (!r) { std::cout << "remote_actor failed: " << sys.render(r.error()) << std::endl; return 1; }
  return ask(sys, *r);
}

int client_tls(uint16_t port, const std::string& dir, bool with_cert) {
  actor_system_config cfg;
  configure(cfg);
  tls_cfg(cfg, dir, "client", with_cert);
  actor_system sys{cfg};
  auto r = openssl::remote_actor<doubler_actor>(sys, "127.0.0.1", port);
  if (!r) { std::cout << "remote_actor failed: " << sys.render(r.error()) << std::endl; return 1; }
  return ask(sys, *r);
}

} // namespace

int main(int argc, char** argv) {
  if (argc < 3) { std::cerr << "usage: see header" << std::endl; return 64; }
  std::string mode = argv[1];
  auto port = static_cast<uint16_t>(std::stoi(argv[2]));
  std::string arg3 = argc > 3 ? argv[3] : "";
  if (mode == "server-auth") return server_auth(port, parse_key(arg3));
  if (mode == "server-plain") return server_plain(port);
  if (mode == "server-tls") return server_tls(port, arg3);
  if (mode == "client-auth")
    return client_auth(port, parse_key(arg3), true, argc > 4 ? std::stoi(argv[4]) : 1);
  if (mode == "client-fd") return client_auth(port, {}, false);
  if (mode == "client-plain") return client_plain(port);
  if (mode == "client-tls") return client_tls(port, arg3, !(argc > 4 && std::string(argv[4]) == "nocert"));
  std::cerr << "unknown mode" << std::endl;
  return 64;
}
