#include "actors/connector.hpp"

#include <caf/all.hpp>

namespace ordo {

namespace {

struct connector_state {
  std::string kind;
  store_actor store;
  static inline const char* name = "connector";
};

connector_actor::behavior_type connector(connector_actor::stateful_pointer<connector_state> self,
                                         std::string kind, store_actor store) {
  self->state.kind = std::move(kind);
  self->state.store = std::move(store);
  return {
    [=](const connector_lookup& lookup) -> connector_lookup_done {
      // NOTE(none): with no offload tier there is nothing outside HBM to find.
      return {lookup.request_id, 0, 0, self->state.kind};
    },
  };
}

} // namespace

connector_actor spawn_connector(caf::actor_system& sys, const std::string& kind, store_actor store) {
  return sys.spawn(connector, kind, std::move(store));
}

} // namespace ordo
