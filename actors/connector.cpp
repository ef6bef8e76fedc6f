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
  door io;
  static inline const char* name = "connector";
};

using self_ptr = connector_actor::stateful_pointer<connector_state>;

connector_actor::behavior_type connector(self_ptr self, std::string kind, std::optional<offload_options> options,
                                         store_actor store, uint64_t epoch, trace_tap tap) {
  auto& st = self->state;
  st.policy = make_connector_policy(kind, options);
  st.store = std::move(store);
  st.io = door("connector", std::move(tap));
  (void)epoch; // the first step of any epoch is accepted (sequence_check)
  return {
    [=](const connector_lookup& lookup) -> caf::result<connector_lookup_done> {
      auto& st = self->state;
      st.io.received(self->current_sender(), lookup);
      auto probe = st.policy->lookup(lookup);
      if (!probe)
        return st.io.reply(self, st.policy->lookup_answered(lookup, {}));
      auto requester = self->current_sender(); // before the promise takes the request over
      auto rp = self->make_response_promise<connector_lookup_done>();
      st.io.request(
          self, st.store, std::move(*probe),
          [=](store_contains_done& found, uint64_t) mutable {
            self->state.io.deliver(rp, requester, self->state.policy->lookup_answered(lookup, found));
          },
          [=](caf::error& err) mutable { self->state.io.fail(rp, requester, "connector_lookup_done", err); });
      return rp;
    },
    [=](const connector_step& step) -> caf::result<connector_step_done> {
      auto& st = self->state;
      st.io.received(self->current_sender(), step);
      if (auto why = st.steps.accept(step.header.epoch, step.header.seq); !why.empty()) {
        spdlog::critical("connector: {}", why);
        return st.io.refuse(self, "connector_step_done", why);
      }
      auto to_store = st.policy->step(step);
      if (!to_store)
        return st.io.reply(self, st.policy->step_answered(step, {}));
      auto requester = self->current_sender(); // before the promise takes the request over
      auto rp = self->make_response_promise<connector_step_done>();
      st.io.request(
          self, st.store, std::move(*to_store),
          [=](store_step_done& answer, uint64_t) mutable {
            try {
              self->state.io.deliver(rp, requester, self->state.policy->step_answered(step, answer));
            } catch (const std::exception& e) {
              self->state.io.fail(rp, requester, "connector_step_done",
                                  caf::make_error(caf::sec::invalid_argument, e.what()));
            }
          },
          [=](caf::error& err) mutable { self->state.io.fail(rp, requester, "connector_step_done", err); });
      return rp;
    },
  };
}

} // namespace

connector_actor spawn_connector(caf::actor_system& sys, const std::string& kind,
                                std::optional<offload_options> policy, store_actor store, uint64_t epoch,
                                trace_tap tap) {
  return sys.spawn(connector, kind, std::move(policy), std::move(store), epoch, std::move(tap));
}

} // namespace ordo
