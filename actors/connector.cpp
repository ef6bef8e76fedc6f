#include "actors/connector.hpp"

#include <caf/all.hpp>
#include <spdlog/spdlog.h>

#include "runtime/sequence_check.hpp"

namespace ordo {

namespace {

struct connector_state {
  std::string kind;
  std::optional<offload_policy> policy;
  store_actor store;
  sequence_check steps;
  static inline const char* name = "connector";
};

using self_ptr = connector_actor::stateful_pointer<connector_state>;

connector_actor::behavior_type connector(self_ptr self, std::string kind, std::optional<offload_options> options,
                                         store_actor store, uint64_t epoch) {
  auto& st = self->state;
  st.kind = std::move(kind);
  if (options)
    st.policy.emplace(*options);
  st.store = std::move(store);
  (void)epoch; // the first step of any epoch is accepted (sequence_check)
  return {
    [=](const connector_lookup& lookup) -> caf::result<connector_lookup_done> {
      auto& st = self->state;
      // NOTE(none): with no offload tier there is nothing outside HBM to find.
      if (!st.policy)
        return connector_lookup_done{lookup.request_id, 0, 0, st.kind, {}, {}};
      auto probe = st.policy->probe(lookup);
      if (probe.keys.empty())
        return st.policy->answer(lookup, {});
      auto rp = self->make_response_promise<connector_lookup_done>();
      self->request(st.store, caf::infinite, std::move(probe))
          .then([=](store_contains_done& found) mutable { rp.deliver(self->state.policy->answer(lookup, found)); },
                [=](caf::error& err) mutable { rp.deliver(std::move(err)); });
      return rp;
    },
    [=](const connector_step& step) -> caf::result<connector_step_done> {
      auto& st = self->state;
      if (auto why = st.steps.accept(step.header.epoch, step.header.seq); !why.empty()) {
        spdlog::critical("connector: {}", why);
        return caf::make_error(caf::sec::invalid_argument, why);
      }
      if (!st.policy) { // `none`: nothing is ever granted
        connector_step_done done; // an eviction finds nothing to drop
        done.header = step.header;
        for (const auto& l : step.loads)
          done.loads.push_back({l.request_id, l.object.key, false, "connector none holds nothing", 0, 0});
        for (const auto& s : step.saves)
          done.saves.push_back({s.request_id, s.object.key, false, "connector none stores nothing", 0, 0});
        return done;
      }
      auto rp = self->make_response_promise<connector_step_done>();
      self->request(st.store, caf::infinite, st.policy->to_store(step))
          .then(
              [=](store_step_done& answer) mutable {
                try {
                  rp.deliver(self->state.policy->from_store(step, answer));
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
