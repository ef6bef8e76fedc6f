// The store's core (issue 38 item 2): the host store plus who holds what in it. Sessions and the
// hello checks that open them (wire, credential, certificate, role, one engine id per store),
// ownership (a session releases only its own pins and reservations), namespace filters (a session
// sees and orders only its namespace), read-only and admin rights, P/D leases and their expiry,
// and the bounds of every piece read or written. Pure: no CAF, no timers, no logging. The store
// server actor (actors/store_server.cpp) is its shell: it names each sender with a store_peer,
// arms a timer for each lease_timer a step returns, logs each note, and replies.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <utility>
#include <variant>
#include <vector>

#include "messages/store.hpp"
#include "runtime/deployment_secret.hpp"
#include "runtime/host_store.hpp"
#include "runtime/sequence_check.hpp"
#include "runtime/tls.hpp"

namespace ordo {

// The largest piece of a store_read / store_write (store.transport = "tcp"): a few MiB, so one
// BASP message never approaches the connection timeout (the receiver's liveness is refreshed per
// whole message).
inline constexpr uint64_t store_piece_max_bytes = uint64_t{4} << 20;

// The shell's name for one sender (one per actor); never reused while it has a session.
using store_peer = uint64_t;

// Counters the store's /metrics shows (docs/store.md, docs/security.md).
struct store_session_counters {
  uint64_t hellos_refused_total = 0;
  uint64_t requests_refused_total = 0;          // store_step / store_contains refused (no session, order)
  uint64_t sessions_ended_total = 0;
  uint64_t hellos_refused_credential_total = 0; // no valid MAC or certificate over the hello
  uint64_t orders_refused_role_total = 0;       // reserves / evict_all beyond the session's rights
  uint64_t leases_total = 0;
  uint64_t leases_released_total = 0;
  uint64_t leases_expired_total = 0;
  uint64_t commits_corrupted_total = 0; // faults.corrupt_commits
};

struct store_sessions_options {
  std::string wire;         // what a hello must name (store_wire_name)
  uint64_t wire_digest = 0; // and its schema digest (store_wire_digest())
  uint8_t* arena = nullptr; // null: no store (tests of the wire only)
  uint64_t arena_bytes = 0;
  std::string granularity = "block";
  // A node serving its own host tier to peers (P/D): its own actors get a session of this
  // namespace without a hello (open_local).
  std::optional<uint64_t> local_namespace;
  // faults.corrupt_commits: flip one data byte of every committed object of this kind (255 = none).
  uint8_t corrupt_commits_kind = 255;
  std::optional<secret_key> secret;         // hellos carry a MAC over it; welcomes prove it
  std::shared_ptr<const tls_context> tls;   // hellos are signed by a certificate of its CA
};

// A timer the shell arms: after `after_ms`, lease_expired(namespace_id, transfer_id, generation).
struct lease_timer {
  uint64_t namespace_id = 0;
  std::string transfer_id;
  uint64_t generation = 0;
  int64_t after_ms = 0;
};

struct hello_outcome {
  store_welcome welcome; // ok or why; proof; the store's arena size, granularity and wire digest
  bool opened = false;   // a new session: the shell watches its sender
  std::string note;      // for the log
};

struct step_outcome {
  std::string engine_id;       // the session's ("" = none)
  std::string refused;         // non-empty: the step was refused whole (no session, order, shape)
  store_step_done done;        // else its answer
  std::vector<lease_timer> timers;
  std::vector<std::string> notes; // skipped orders, refused rights, corrupt reports: for the log
};

struct session_end {
  std::string engine_id;
  size_t pins = 0;
  size_t reservations = 0;
};

class store_sessions {
public:
  explicit store_sessions(store_sessions_options options);

  // `peer` asks for a session. The welcome's proof names `store_id` (the store's identity).
  hello_outcome hello(store_peer peer, const store_hello& h, const std::string& store_id);
  // A peer of this process (the shell knows) gets a session of local_namespace without a hello;
  // true if it has one now. `name` is its engine id.
  bool open_local(store_peer peer, const std::string& name);
  bool has_session(store_peer peer) const { return sessions_.count(peer) != 0; }

  // What of `q` is present in the peer's namespace (others' keys answer absent); nullopt and
  // counted when the peer has no session.
  std::optional<store_contains_done> contains(store_peer peer, const store_contains& q);
  // A step of the peer's session: order checked, filtered to what it owns and may do, applied.
  step_outcome step(store_peer peer, const store_step& s);
  // The arena offset of a piece [offset, offset + bytes) of `key`'s data the peer holds as asked
  // (a pin to read, a reservation to write), or why not.
  std::variant<uint64_t, std::string> piece(store_peer peer, const object_key& key, uint64_t offset, uint64_t bytes,
                                            bool write) const;
  // The peer is gone: its pins are dropped and its reservations aborted; its commits stay.
  std::optional<session_end> end_session(store_peer peer);
  // A lease timer fired: how many objects the lease held if this ended it; nullopt if it was
  // released or replaced since.
  std::optional<size_t> lease_expired(uint64_t namespace_id, const std::string& transfer_id, uint64_t generation);

  uint8_t* arena() const { return core_ ? core_->arena() : nullptr; }
  const host_store* core() const { return core_.get(); }
  store_stats stats() const { return core_ ? core_->stats() : store_stats{}; }
  int64_t num_sessions() const { return static_cast<int64_t>(sessions_.size()); }
  int64_t leases_active() const { return static_cast<int64_t>(leases_.size()); }
  int64_t leased_objects() const;
  const store_session_counters& counters() const { return counters_; }
  const std::string& granularity() const { return opt_.granularity; }

private:
  struct session {
    std::string engine_id;
    uint64_t namespace_id = 0;
    bool read_only = false;        // role kv_consumer: pins and lookups only
    std::string certificate_role;  // with certificates: only "admin" may evict_all
    sequence_check steps;
    std::unordered_map<object_key, int32_t, object_key_hash> pins; // key → pins it holds
    std::unordered_set<object_key, object_key_hash> reservations;  // reserved, not committed or aborted
    std::unordered_map<object_key, std::pair<uint64_t, uint64_t>, object_key_hash> extents; // data offset, bytes
  };
  struct lease {
    std::vector<object_key> held;
    uint64_t generation = 0;
  };
  using lease_id = std::pair<uint64_t, std::string>; // namespace, transfer id

  static void track(session& s, const store_step& step, const store_step_done& done);
  bool end_lease(const lease_id& id);
  void apply_leases(const session& s, const store_step& step, step_outcome& out);

  store_sessions_options opt_;
  std::unique_ptr<host_store> core_;
  std::map<store_peer, session> sessions_;
  std::map<lease_id, lease> leases_;
  uint64_t lease_generation_ = 0;
  store_session_counters counters_;
};

// "0x" and 16 hex digits: how the store's messages show a namespace or a key's hash.
std::string hex64(uint64_t v);

// The text a hello's MAC and certificate signature cover (docs/security.md).
std::string store_hello_message(const store_hello& h);
// The text a welcome's proof covers.
std::string store_welcome_message(const std::string& store_id, const store_hello& hello);

} // namespace ordo
