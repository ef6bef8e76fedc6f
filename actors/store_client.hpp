// store client actor: a node's end of an `ordo store` server (kv_transfer.connector = "store",
// docs/store.md). To the connector it is a store like the in-process one (store_actor); behind
// it, one session at a time with the remote store server:
//   idle ──store_connect(engine id)──► connecting: connect_atom to the middleman (async), hello,
//        the arena's fd from the store's abstract socket, mapped into the node's window (and
//        registered with the device) ──► live
//   live ──store_contains / store_step──► forwarded through the session's own actor, each with a
//        deadline; grants' offsets moved into the window ──► reply
//        (store.transport = "tcp": no shared arena; pinned bytes are read into the node's staging
//        arena before the grants go out, saved bytes written before their commits)
//   live ──store down, deadline passed, error──► session ended (its actor exits, so the server
//        releases its pins and reservations) ──► retry with backoff (0.2 s doubling to 5 s)
//   not live: lookups find nothing, pins and reserves are refused ("store unreachable: …"), so
//        requests recompute and nothing waits on a dead store.
// Bookkeeping that keeps every answer exact across sessions: a key's outstanding grants all
// belong to one session (a key still held from an ended session is refused in the next one until
// its transfers finish); unpins, commits and aborts of an ended session's grants are dropped;
// an ended session's arena stays mapped until its last granted transfer finished.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include <caf/actor_system.hpp>

#include "actors/door.hpp"
#include "actors/interfaces.hpp"
#include "runtime/deployment_secret.hpp"
#include "runtime/tls.hpp"
#include "runtime/locked_view.hpp"

namespace ordo {

class device;
class host_window;

// What /health and /metrics show of the link; shared with the HTTP thread (a copy under a lock).
struct store_link_view {
  std::string address;        // store.address
  bool connected = false;
  bool attempted = false;     // the first connection attempt has ended (either way)
  bool refused = false;       // the last attempt was refused by a rule (identity, wire, host)
  std::string store_id;       // of the live (or last) session
  std::string granularity;    // of the live (or last) session
  std::string error;          // why the link is down ("" while connected)
  uint64_t arena_bytes = 0;
  uint64_t connects_total = 0;
  uint64_t disconnects_total = 0;
  uint64_t refusals_total = 0;       // hellos refused, or welcomes this node refused
  uint64_t failed_requests_total = 0; // requests that met a deadline, an error or a dead store
  uint64_t unreachable_answers_total = 0; // lookups and steps answered without a store
};

using store_link_status = locked_view<store_link_view>;

struct store_client_options {
  std::string host;
  uint16_t port = 0;
  uint64_t namespace_id = 0;
  std::string expect_identity; // "" = any store
  uint32_t deadline_ms = 5000;
  std::shared_ptr<host_window> window; // where arenas are mapped (the runner's host arena)
  // store.transport = "tcp": no shared arena; grants point into this staging arena of the node
  // (the runner's host arena), filled by store_read pieces before a pin's grant goes out and sent
  // by store_write pieces before a save's commit. A store on another host is allowed.
  bool tcp = false;
  uint8_t* staging_base = nullptr;
  uint64_t staging_bytes = 0;
  // Where staging_base lies in the runner's host arena (grants are offsets there): 0 for a store
  // node (its staging arena is the host arena), the window offset of a P/D peer's staging arena.
  uint64_t staging_offset = 0;
  std::shared_ptr<device> dev;         // registers each mapped arena (GPU) and unregisters it
  std::shared_ptr<store_link_status> status = std::make_shared<store_link_status>();
  // The deployment secret (docs/security.md): the hello carries a fresh challenge and a welcome
  // whose proof does not verify under this key is refused. Empty: no proof asked.
  std::optional<secret_key> secret;
  // The role its hello declares ("kv_consumer": read only, the store refuses its reserves and
  // evict_all); covered by the hello's MAC.
  std::string role = "kv_both";
  // security.tls on: the connection is mutual TLS and the hello is signed with this certificate.
  std::shared_ptr<const tls_context> tls;
  // A P/D peer (docs/pd.md): connects only while a lookup wants it. A lookup that finds no live
  // session waits for one, the connect retried, up to deadline_ms; no retry when nobody waits.
  bool on_demand = false;
  // With on_demand: the client ends itself after this long without a request and with no
  // transfer outstanding (0 = never); whoever spawned it monitors it and forgets it.
  uint32_t idle_exit_ms = 0;
  // Kept alive as long as the client (a P/D peer's staging arena with tcp: its deleter unmaps it).
  std::shared_ptr<void> keep_alive;
  std::string trace_name = "store"; // its records' actor name ("peer:HOST:PORT" for a P/D peer)
  trace_tap tap;
};

using store_client_actor = store_actor::extend<
  // the node, once its engine id is known (after the HTTP port is bound): connect as it.
  caf::reacts_to<store_connect_atom, std::string>,
  // itself, after a backoff: try to connect again (the token drops stale retries).
  caf::reacts_to<store_retry_atom, uint64_t>,
  // itself (on_demand): 0 = a waiting lookup's deadline passed; 1 = check whether it is idle.
  caf::reacts_to<store_tick_atom, uint64_t>>;

store_client_actor spawn_store_client(caf::actor_system& sys, store_client_options options);

// /metrics lines of the link (ordo_store_connected, …), Prometheus text.
std::string render_store_link_metrics(const store_link_view& v);
// /health's "store" member, as JSON text.
std::string render_store_link_health(const store_link_view& v);

} // namespace ordo
