// The `ordo store` server (issue 12, docs/store.md): the store of one host, shared by its nodes,
// reached over CAF remote actors (store_server_actor in actors/interfaces.hpp). Its bytes live in
// a sealed memfd arena the server process owns (store_arena); the objects' bookkeeping is the same
// pure core as the in-process store (runtime/host_store.hpp, through apply()).
//
// Sessions: a store_hello opens a session for its sender (monitored). Refused, with both values
// named: another wire or wire digest, or an engine id another live session already uses.
// store_step and store_contains from an actor with no session are refused ("send store_hello
// first"). Each session has its own (epoch, seq) check and sees only its namespace: keys of
// another namespace are absent to it and refused, and its evict_all drops only its namespace. When a session's actor goes down (its
// process ended or its connection broke) its pins are dropped and its reservations aborted;
// committed objects stay.
// Threads: the actor owns the host_store; the HTTP thread reads only store_server_shared.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include <caf/fwd.hpp>

#include "actors/door.hpp"
#include "actors/interfaces.hpp"
#include "messages/store.hpp"
#include "runtime/deployment_secret.hpp"
#include "runtime/locked_view.hpp"
#include "runtime/store_sessions.hpp" // store_piece_max_bytes, store_session_counters
#include "runtime/tls.hpp"

namespace ordo {

// The CAF app identifier both sides set (middleman.app-identifiers) and store_hello::wire.
inline constexpr const char* store_wire_name = "ordo-wire-1";

// The first 64 bits of the SHA-256 of messages/ordo.capnp as this binary was built from it
// (CMakeLists.txt embeds it). Equal on both sides iff they were built from the same schema text.
uint64_t store_wire_digest();

// What a store's welcome proves over a hello's challenge: HMAC-SHA256 with the deployment secret
// over the store's identity, the node's engine id, its namespace and the challenge.
std::string store_welcome_proof(const secret_key& key, const std::string& store_id, const store_hello& hello);
// Whether `welcome.proof` is that proof (constant time).
bool store_welcome_proven(const secret_key& key, const store_welcome& welcome, const store_hello& hello);
// The node's credential in its hello: HMAC-SHA256 with the deployment secret over the wire, the
// engine id, the namespace, the boot id, the challenge and the role it declares.
std::string store_hello_mac(const secret_key& key, const store_hello& hello);
// With a certificate: the hello's certificate and signature (hex) by `tls`, over what its MAC covers.
void sign_store_hello(const tls_context& tls, store_hello& hello);

// Loads the middleman and sets what every ordo store peer needs: the ordo type ids, the app
// identifier, heartbeats (1 s) and the connection timeout (15 s). Call before creating the system.
void configure_store_wire(caf::actor_system_config& cfg);

// A shared-memory arena: a memfd (MFD_CLOEXEC | MFD_ALLOW_SEALING) of `bytes`, sealed against
// growing and shrinking, mapped shared and read-write. Throws std::runtime_error naming the step
// that failed and why (e.g. "memfd_create: Function not implemented").
class store_arena {
public:
  explicit store_arena(uint64_t bytes);
  ~store_arena();
  store_arena(const store_arena&) = delete;
  store_arena& operator=(const store_arena&) = delete;

  uint8_t* data() const { return data_; }
  uint64_t size() const { return size_; }
  int fd() const { return fd_; } // handed to nodes by an arena_fd_server (runtime/shared_arena.hpp)

private:
  int fd_ = -1;
  uint8_t* data_ = nullptr;
  uint64_t size_ = 0;
};

// What GET /health and /metrics show: a copy made under the lock.
struct store_server_view : store_session_counters {
  std::string engine_id;
  std::string arena_socket; // abstract AF_UNIX name handing out the arena's fd ("" = none yet)
  std::string granularity;
  store_stats stats;
  int64_t sessions = 0;
  // P/D leases (docs/pd.md) held now; the counters say how each one ended.
  int64_t leases_active = 0;
  int64_t leased_objects = 0;
};

// The state the server actor shares with other threads (the HTTP thread, the process's main).
class store_server_shared : public locked_view<store_server_view> {
public:
  void set_engine_id(std::string id) {
    update([&](store_server_view& v) { v.engine_id = std::move(id); });
  }
  std::string engine_id() const { return view().engine_id; }
  void set_arena_socket(std::string name) {
    update([&](store_server_view& v) { v.arena_socket = std::move(name); });
  }
  std::string arena_socket() const { return view().arena_socket; }
};

struct store_server_options {
  uint8_t* arena = nullptr; // owned by the caller (a store_arena), outlives the actor
  uint64_t arena_bytes = 0;
  std::string granularity = "block";
  std::string boot_id; // the store's host (runtime/engine_identity.hpp), sent in the welcome
  // Set by a node serving its own host tier to peers (P/D): its own actors get a session of this
  // namespace without a hello.
  std::optional<uint64_t> local_namespace;
  // The name its records carry in a trace: "store" when it is a node's own host tier (so the
  // trace checks see it as the node's store), "store_server" in `ordo store`.
  const char* door_name = "store_server";
  // Fault injection (faults.corrupt_commits, a P/D node): flip one data byte of every object of
  // this kind right after its commit, so a reader's checksum finds it (255 = none).
  uint8_t corrupt_commits_kind = 255;
  // The deployment secret (docs/security.md): a welcome carries a proof over the hello's challenge,
  // so a node knows it reached a store of its deployment. Empty: no proof (tests of the core only).
  std::optional<secret_key> secret;
  // security.tls on: every hello must be signed by a certificate of this CA; only admin
  // certificates may evict_all (docs/security.md).
  std::shared_ptr<const tls_context> tls;
  std::shared_ptr<store_server_shared> shared = std::make_shared<store_server_shared>();
  trace_tap tap;
};

store_server_actor spawn_store_server(caf::actor_system& sys, store_server_options options);

// GET /health's body: {"status":"ok","engine_id":…,"sessions":N,"objects":…,"bytes_used":…,
// "capacity_bytes":…,"granularity":…}.
std::string render_store_health(const store_server_view& v);
// GET /metrics's body: Prometheus text, ordo_store_* series and the leases'.
std::string render_store_metrics(const store_server_view& v);
// The P/D lease series (ordo_pd_leases_*) alone, for a P/D node's own /metrics.
std::string render_pd_lease_metrics(const store_server_view& v);

} // namespace ordo
