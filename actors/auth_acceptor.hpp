// The acceptor in front of every CAF port of ordo (issue 36, docs/security.md): a CAF broker that
// listens itself, passes each connection through the preamble of runtime/peer_auth.hpp and only
// then hands the socket to CAF's BASP broker as an incoming connection to `published`. So forged
// BASP headers, length claims and random bytes from a stranger meet a fixed 64-byte read and are
// dropped; BASP parses only what an authenticated peer sends.
//   accepted ──(64 bytes within 2 s, MAC verifies)──► handed to BASP (its server handshake first)
//            └─(bad MAC, short, late, over a cap)───► closed, counted
// With security.tls on, the listener is a TLS doorman (actors/tls_transport.hpp): the connector
// completes a mutual TLS handshake and sends the 8-byte opener before the challenge, all within the
// same deadline, and the preamble runs inside TLS.
// NOTE(caps): at most 64 connections in the preamble at once and 256 handed over at once (counted
// through `live`: the sessions the published actor holds); more are closed at once.
// Threads: the broker runs in CAF's multiplexer thread; auth_acceptor_stats is read from any.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <set>
#include <string>

#include <caf/actor.hpp>
#include <caf/actor_cast.hpp>
#include <caf/actor_system.hpp>
#include <caf/fwd.hpp>

#include "runtime/deployment_secret.hpp"
#include "runtime/tls.hpp"

namespace ordo {

struct auth_acceptor_stats {
  std::atomic<uint64_t> accepted{0};      // connections the listener took
  std::atomic<uint64_t> authenticated{0}; // handed to BASP
  std::atomic<uint64_t> refused_mac{0};   // answered with a MAC that does not verify
  std::atomic<uint64_t> refused_deadline{0}; // no whole answer within the deadline (idle, short)
  std::atomic<uint64_t> refused_busy{0};  // over a cap
  std::atomic<int64_t> pending{0};        // in the preamble now
};

struct auth_acceptor_options {
  std::string host = "127.0.0.1";
  uint16_t port = 0; // 0: any free port
  secret_key key{};
  uint32_t deadline_ms = 2000;
  size_t max_pending = 64;
  size_t max_handed = 256;
  // How many handed-over connections are still alive (the published actor's sessions); "" = not
  // capped by it.
  std::function<int64_t()> live;
  // security.tls = "on": connections are mutual TLS under this context (a certificate of the
  // deployment's CA on both ends) before the preamble, which then runs inside TLS; null = plain.
  std::shared_ptr<const tls_context> tls;
  std::shared_ptr<auth_acceptor_stats> stats = std::make_shared<auth_acceptor_stats>();
};

struct auth_acceptor_handle {
  caf::actor broker; // send it an exit to stop listening
  uint16_t port = 0;
  std::shared_ptr<auth_acceptor_stats> stats;
};

// Listens on options.host:port for connections to `published`, whose messaging interface
// (`interfaces`, what CAF's publish advertises) a connecting node checks. Throws
// std::runtime_error naming the address when it cannot listen.
auth_acceptor_handle spawn_auth_acceptor(caf::actor_system& sys, caf::strong_actor_ptr published,
                                         std::set<std::string> interfaces, auth_acceptor_options options);

// The same for a typed actor handle: its interface comes from its type.
template <class Handle>
auth_acceptor_handle spawn_auth_acceptor(caf::actor_system& sys, const Handle& published,
                                         auth_acceptor_options options) {
  return spawn_auth_acceptor(sys, caf::actor_cast<caf::strong_actor_ptr>(published), sys.message_types(published),
                             std::move(options));
}

// /metrics lines of an acceptor: ordo_auth_connections_total{outcome=authenticated|bad_mac|
// deadline|busy} and ordo_auth_pending (Prometheus text).
std::string render_auth_acceptor_metrics(const auth_acceptor_stats& stats);

// The connector's side: an actor on a thread of its own that answers (caf::connect_atom, host,
// port) the way CAF's middleman actor does — (node_id, strong_actor_ptr, interfaces) — after the
// preamble, by handing the authenticated socket to BASP as an outgoing connection. A peer that
// does not prove the secret (or answers junk) is an error with caf::sec::invalid_argument; one that
// cannot be reached within `timeout_ms`, caf::sec::cannot_connect_to_node. Send it an exit when done.
// With `tls`, the connection is mutual TLS first and the preamble runs inside it.
caf::actor spawn_auth_connector(caf::actor_system& sys, const secret_key& key, uint32_t timeout_ms,
                                std::shared_ptr<const tls_context> tls = nullptr);

} // namespace ordo
