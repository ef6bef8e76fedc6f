// The store client's core (issue 38 item 2): which of a node's pins and reservations at a store
// server are outstanding, through which session, and (store.transport = "tcp") where their bytes
// are staged in the node's own arena. A store session ends (the store died, a deadline passed)
// while transfers it granted are in flight: their grants stay valid in its still-mapped arena, so
// each finished transfer goes back to the session that granted it, and an order for a key still
// held by an ended session is refused until that transfer finishes. Pure: no CAF; the store
// client actor (actors/store_client.cpp) keeps the connection state machine and the arenas.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <unordered_map>
#include <vector>

#include "messages/store.hpp"
#include "runtime/host_store.hpp" // object_key_hash

namespace ordo {

// One object's bytes between the staging arena and the store (store.transport = "tcp").
struct staged_object {
  object_key key;
  uint64_t staged = 0; // offset in the staging arena
  uint64_t bytes = 0;
};

// A connector step's finished transfers, routed: what goes to the live session, which bytes are
// written to the store first (tcp), which staging ranges come back, and which ended sessions may
// now let go of their arena.
struct finished_routes {
  store_step forward; // commits (with their checksums), aborts, unpins, corrupt unpins
  std::vector<staged_object> writes;     // tcp: saved bytes to write before the commits
  std::vector<uint64_t> give_back_after; // tcp: ranges of those writes, free once written
  std::vector<uint64_t> give_back_now;   // tcp: ranges free now
  std::vector<uint64_t> ended_sessions;  // sessions a finished transfer belonged to, not live
};

class store_grant_ledger {
public:
  // Session `gen` granted a pin or a reservation of `key` (`bytes` of data), staged at `staged`.
  void granted(uint64_t gen, const object_key& key, uint64_t bytes, bool reservation,
               std::optional<uint64_t> staged = std::nullopt);
  // One pin or reservation of `key` finished: the session that granted it (nullopt: none, a
  // refused order) and its staging range.
  struct finished {
    std::optional<uint64_t> gen;
    std::optional<uint64_t> staged;
    uint64_t bytes = 0;
  };
  finished finish(const object_key& key, bool reservation);
  // Routes a connector step's commits, aborts, unpins and corrupt unpins with the live session
  // (nullopt: none).
  finished_routes finish_step(const store_step& step, std::optional<uint64_t> live);

  // Whether an order for `key` must be refused: a session other than `gen` still holds it.
  bool held_elsewhere(const object_key& key, uint64_t gen) const;
  // Granted pins and reservations of session `gen` whose transfer has not finished.
  int64_t outstanding(uint64_t gen) const;
  bool empty() const { return held_.empty(); }

  // tcp: a grant the node could not stage is released with session `gen`'s next step.
  void defer_release(uint64_t gen, const object_key& key, bool reservation);
  // The deferred releases for session `gen`'s next step (unpins, aborts), cleared.
  store_step take_deferred(uint64_t gen);

private:
  struct held_key {
    uint64_t gen = 0;
    int32_t pins = 0;
    int32_t reservations = 0;
    std::vector<uint64_t> staged_pins;
    std::optional<uint64_t> staged_reservation;
    uint64_t bytes = 0;
  };
  std::unordered_map<object_key, held_key, object_key_hash> held_;
  std::map<uint64_t, int64_t> outstanding_; // per session
  store_step deferred_;
  uint64_t deferred_gen_ = 0;
};

} // namespace ordo
