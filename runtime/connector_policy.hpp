// The connector actor's core, one interface for every connector kind (DESIGN §2 connector),
// chosen once at spawn so the actor never branches on the kind:
//   none:    nothing outside HBM: a lookup answers 0 tokens at once, a step grants nothing and
//            never reaches the store.
//   offload: the in-process host tier (runtime/offload_policy): a lookup asks the store which
//            objects are committed, a step becomes one store step.
// Each event is two calls: what to ask the store (nullopt: nothing, answer at once with an
// empty store answer), then the reply built from the store's answer. Pure: no CAF.
#pragma once

#include <memory>
#include <optional>
#include <string>

#include "messages/connector.hpp"
#include "messages/store.hpp"
#include "runtime/offload_policy.hpp"

namespace ordo {

class connector_policy {
public:
  virtual ~connector_policy() = default;

  // The store query a lookup needs; nullopt: answer lookup_answered(lookup, {}) at once.
  virtual std::optional<store_contains> lookup(const connector_lookup& lookup) const = 0;
  virtual connector_lookup_done lookup_answered(const connector_lookup& lookup,
                                                const store_contains_done& found) const = 0;
  // The store step a connector step needs; nullopt: answer step_answered(step, {}) at once.
  virtual std::optional<store_step> step(const connector_step& step) const = 0;
  // Throws std::logic_error if `done` does not answer every order step(step) sent.
  virtual connector_step_done step_answered(const connector_step& step, const store_step_done& done) const = 0;
};

// `offload` empty: the `none` connector, answering under `name`; otherwise the host tier.
std::shared_ptr<const connector_policy> make_connector_policy(const std::string& name,
                                                              const std::optional<offload_options>& offload);

} // namespace ordo
