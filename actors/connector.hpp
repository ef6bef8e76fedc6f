// connector actor: the offload tiers' bookkeeping, a thin shell over runtime/connector_policy
// (its kind chosen once at spawn; the shell never branches on it).
//   none:    every lookup answers 0 tokens in each tier; a connector step grants nothing.
//   offload: the in-process host tier: a lookup asks the store which objects are committed and
//            answers the contiguous KV coverage and the state boundaries; a connector step
//            becomes one store step (commits, aborts, unpins, pins, reserves) and its grants.
//   ready ──connector_lookup──► awaiting store ──store_contains_done──► ready (reply)
//   ready ──connector_step (seq checked)──► awaiting store ──store_step_done──► ready (reply)
// Where the policy needs no store (none; a lookup probing no keys) the reply is immediate.
#pragma once

#include <atomic>
#include <functional>
#include <memory>
#include <optional>
#include <string>

#include <caf/actor_system.hpp>

#include "actors/door.hpp"
#include "actors/interfaces.hpp"
#include "runtime/offload_policy.hpp"

namespace ordo {

// `policy` is empty for the `none` connector, which answers under the name `kind`.
connector_actor spawn_connector(caf::actor_system& sys, const std::string& kind,
                                std::optional<offload_options> policy, store_actor store, uint64_t epoch,
                                trace_tap tap = {});

} // namespace ordo

namespace ordo {

// The P/D connector (kv_transfer.connector = "pd", docs/pd.md): the offload policy over this
// node's own store (which peers also reach: the node publishes it), and, for a request whose
// lookup names a peer (its kv_transfer_params named a prefill node), that prefill node's store
// through a store client: the lookup and the loads of that request go there, everything else here.
// `peer_store(endpoint)` returns the store client of a peer, connecting it on first use.
connector_actor spawn_pd_connector(caf::actor_system& sys, offload_options policy, store_actor local,
                                   std::function<store_actor(const std::string&)> peer_store, trace_tap tap = {});

} // namespace ordo

namespace ordo {

// One leaf of the multi connector: a connector actor, its name (a lookup it answers reports
// "multi:<name>"), where its store's arena lies in the node's host window (its grants are offsets
// in that arena), and whether it takes P/D leases.
struct multi_leaf {
  connector_actor actor;
  std::string name;
  uint64_t window_offset = 0;
  bool takes_leases = false;
  // Lookups this leaf answered with KV (ordo_multi_lookup_hits_total{leaf}), read by /metrics.
  std::shared_ptr<std::atomic<uint64_t>> hits = std::make_shared<std::atomic<uint64_t>>(0);
};

// The multi connector (kv_transfer.connector = "multi", SPEC E3, actors/multi_connector.cpp):
// lookups first-hit-wins in leaf order, saves fan out to every leaf (a save granted by several
// leaves carries the others' offsets in transfer_grant.copies), loads and unpins go to the leaf
// whose lookup answered, leases to the P/D leaves.
connector_actor spawn_multi_connector(caf::actor_system& sys, std::vector<multi_leaf> leaves, trace_tap tap = {});

} // namespace ordo
