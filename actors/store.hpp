// store actor: the in-process host-memory tier. Until the host-tier issue it holds no objects:
// every contains query finds none committed.
//   ready ──store_contains──► store_contains_done ──► ready
#pragma once

#include <caf/actor_system.hpp>

#include "actors/interfaces.hpp"

namespace ordo {

store_actor spawn_store(caf::actor_system& sys);

} // namespace ordo
