// connector actor: the shell of runtime/transfer_routes (the connector's core), one for every
// connector kind (its route table, built by runtime/node_options.cpp:derive_node_options, says
// which stores it reaches; the shell never branches on the kind). It names each store the core
// routes to with an actor, sends what the core returns and replies:
//   ready ──connector_lookup──► asking a store ──store_contains_done──► (next store, first hit wins) … ──► ready (reply)
//   ready ──connector_step (seq checked)──► split ──store_step to every store at once──► all answered ──► merge ──► ready (reply)
// Where the core asks no store (none; a lookup probing no keys) the reply is immediate.
// NOTE(peer-clients): a P/D leaf's peers' store clients are spawned on first use through
// connector_stores::peer_store and monitored; one that ends (idle) is forgotten by the core too.
#pragma once

#include <atomic>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include <caf/actor_system.hpp>

#include "actors/door.hpp"
#include "actors/interfaces.hpp"
#include "runtime/transfer_routes.hpp"

namespace ordo {

// The actors behind a route table.
struct connector_stores {
  std::vector<store_actor> leaves; // per leaf of the table: its own store (none: a store never asked)
  // P/D: the store client of the prefill node at an endpoint ("HOST:PORT"), connecting on first use.
  std::function<store_actor(const std::string&)> peer_store;
  // multi: per leaf, the lookups it answered with KV (ordo_multi_lookup_hits_total{leaf}), read by /metrics.
  std::vector<std::shared_ptr<std::atomic<uint64_t>>> hits;
};

connector_actor spawn_connector(caf::actor_system& sys, route_table routes, connector_stores stores, trace_tap tap = {});

} // namespace ordo
