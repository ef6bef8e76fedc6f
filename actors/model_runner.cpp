#include "actors/model_runner.hpp"

#include <map>

#include <caf/all.hpp>
#include <spdlog/spdlog.h>

#include "runtime/sequence_check.hpp"

namespace ordo {

namespace {

struct model_runner_state {
  std::shared_ptr<device> dev;
  std::shared_ptr<model> mdl;
  std::unique_ptr<step_executor> executor;
  sequence_check order;
  door io;
  struct waiting {
    caf::typed_response_promise<step_done> promise;
    caf::strong_actor_ptr requester;
  };
  std::map<uint64_t, waiting> in_flight; // by seq
  static inline const char* name = "model_runner";
};

model_runner_actor::behavior_type model_runner(model_runner_actor::stateful_pointer<model_runner_state> self,
                                               std::shared_ptr<device> dev, std::shared_ptr<model> mdl,
                                               step_executor_options options, trace_tap tap) {
  auto& st = self->state;
  st.dev = std::move(dev);
  st.mdl = std::move(mdl);
  if (tap.recorder)
    options.ops = tap.recorder.get(); // device operations are recorded by the executor, in enqueue order
  st.executor = std::make_unique<step_executor>(*st.dev, *st.mdl, options);
  st.io = door("model_runner", std::move(tap));
  return {
    [=](const step_plan& plan) -> caf::result<step_done> {
      auto& st = self->state;
      st.io.received(self->current_sender(), plan);
      auto why = st.order.accept(plan.header.epoch, plan.header.seq);
      if (!why.empty()) {
        spdlog::error("model_runner: refused step_plan: {}", why);
        return st.io.refuse(self, "step_done", why);
      }
      auto requester = self->current_sender(); // before the promise takes the request over
      auto promise = self->make_response_promise<step_done>();
      auto me = caf::actor_cast<model_runner_actor>(self);
      try {
        // Runs on a device thread once the step's work completed.
        st.executor->execute(plan, [me](step_done done) { caf::anon_send(me, std::move(done)); });
      } catch (const std::exception& e) {
        spdlog::error("model_runner: step ({}, {}) refused: {}", plan.header.epoch, plan.header.seq, e.what());
        return st.io.refuse(self, "step_done", e.what());
      }
      st.in_flight.emplace(plan.header.seq, model_runner_state::waiting{promise, requester});
      return promise;
    },
    [=](step_done& done) {
      auto& st = self->state;
      st.io.received("device", done);
      auto it = st.in_flight.find(done.header.seq);
      if (it == st.in_flight.end()) {
        spdlog::error("model_runner: completion of unknown step ({}, {})", done.header.epoch, done.header.seq);
        return;
      }
      spdlog::debug("model_runner: step ({}, {}) done in {:.2f} ms, {} samples", done.header.epoch,
                    done.header.seq, done.device_ms, done.samples.size());
      st.io.deliver(it->second.promise, it->second.requester, std::move(done));
      st.in_flight.erase(it);
    },
  };
}

} // namespace

model_runner_actor spawn_model_runner(caf::actor_system& sys, std::shared_ptr<device> dev,
                                      std::shared_ptr<model> mdl, const step_executor_options& options,
                                      trace_tap tap) {
  return sys.spawn(model_runner, std::move(dev), std::move(mdl), options, std::move(tap));
}

} // namespace ordo
