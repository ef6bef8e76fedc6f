#include "actors/connector.hpp"

#include <memory>

#include <caf/all.hpp>
#include <spdlog/spdlog.h>

#include "runtime/connector_policy.hpp"
#include "runtime/sequence_check.hpp"

namespace ordo {

namespace {

struct connector_state {
  std::shared_ptr<const connector_policy> policy;
  store_actor store;
  sequence_check steps;
  static inline const char* name = "connector";
};

using self_ptr = connector_actor::stateful_pointer<connector_state>;

connector_actor::behavior_type connector(self_ptr self, std::string kind, std::optional<offload_options> options,
                                         store_actor store, uint64_t epoch) {
  auto& st = self->state;
  st.policy = make_connector_policy(kind, options);
  st.store = std::move(store);
  (void)epoch; // the first step of any epoch is accepted (sequence_check)
  return {
    [=](const connector_lookup& lookup) -> caf::result<connector_lookup_done> {
      auto& st = self->state;
      auto probe = st.policy->lookup(lookup);
      if (!probe)
        return st.policy->lookup_answered(lookup, {});
      auto rp = self->make_response_promise<connector_lookup_done>();
      self->request(st.store, caf::infinite, std::move(*probe))
          .then(
              [=](store_contains_done& found) mutable { rp.deliver(self->state.policy->lookup_answered(lookup, found)); },
              [=](caf::error& err) mutable { rp.deliver(std::move(err)); });
      return rp;
    },
    [=](const connector_step& step) -> caf::result<connector_step_done> {
      auto& st = self->state;
      if (auto why = st.steps.accept(step.header.epoch, step.header.seq); !why.empty()) {
        spdlog::critical("connector: {}", why);
        return caf::make_error(caf::sec::invalid_argument, why);
      }
      auto to_store = st.policy->step(step);
      if (!to_store)
        return st.policy->step_answered(step, {});
      auto rp = self->make_response_promise<connector_step_done>();
      self->request(st.store, caf::infinite, std::move(*to_store))
          .then(
              [=](store_step_done& answer) mutable {
                try {
                  rp.deliver(self->state.policy->step_answered(step, answer));
                } catch (const std::exception& e) {
                  rp.deliver(caf::make_error(caf::sec::invalid_argument, e.what()));
                }
              },
              [=](caf::error& err) mutable { rp.deliver(std::move(err)); });
      return rp;
    },
  };
}

} // namespace

connector_actor spawn_connector(caf::actor_system& sys, const std::string& kind,
                                std::optional<offload_options> policy, store_actor store, uint64_t epoch) {
  return sys.spawn(connector, kind, std::move(policy), std::move(store), epoch);
}

} // namespace ordo
