#include "actors/store.hpp"

#include <caf/all.hpp>

namespace ordo {

namespace {

store_actor::behavior_type store(store_actor::pointer) {
  return {
    [](const store_contains&) -> store_contains_done { return {0}; },
  };
}

} // namespace

store_actor spawn_store(caf::actor_system& sys) { return sys.spawn(store); }

} // namespace ordo
