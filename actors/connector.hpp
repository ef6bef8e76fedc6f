// connector actor: the offload tiers' bookkeeping. This issue ships the `none` connector, which
// holds nothing and answers every lookup with 0 tokens in each tier; the offload connector of
// the host-tier issue replaces its core, not its interface.
//   ready ──connector_lookup──► connector_lookup_done ──► ready
#pragma once

#include <string>

#include <caf/actor_system.hpp>

#include "actors/interfaces.hpp"

namespace ordo {

// `kind` is kv_transfer.connector; only "none" exists so far (config validation refuses others).
connector_actor spawn_connector(caf::actor_system& sys, const std::string& kind, store_actor store);

} // namespace ordo
