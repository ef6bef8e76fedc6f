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

#include <functional>
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
