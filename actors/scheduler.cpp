#include "actors/scheduler.hpp"

#include <map>

#include <caf/all.hpp>
#include <spdlog/spdlog.h>

#include "runtime/scheduler_core.hpp"

namespace ordo {

namespace {

struct scheduler_state {
  std::unique_ptr<scheduler_core> core;
  scheduler_handles handles;
  scheduler_observer observer;
  door io;
  std::map<uint64_t, completion_client_actor> requesters; // request id → who gets the answer
  std::map<uint64_t, completion_client_actor> evict_requesters;
  static inline const char* name = "scheduler";
};

using self_ptr = scheduler_actor::stateful_pointer<scheduler_state>;

void on_event(self_ptr self, const scheduler_event& event, uint64_t ts_ns);

template <class Reply>
auto feed(self_ptr self) {
  return [self](Reply& r, uint64_t ts_ns) { on_event(self, r, ts_ns); };
}

void refused(self_ptr self, const std::string& what);

// Sends what the core decided (in dispatch's order): commands to the pool, connector and runner,
// answers to clients.
struct emitter {
  self_ptr self;

  void ended(const completion_result& r) const {
    spdlog::info("request {} finished: prompt {} tokens, resume_at {}, from hbm {} cpu {} store {}, {} tokens "
                 "({}), {:.1f} ms",
                 r.request_id, r.prompt_tokens, r.resume_at, r.from_hbm, r.from_cpu, r.from_store,
                 r.token_ids.size(), r.finish_reason, r.duration_ms);
    if (self->state.observer)
      self->state.observer(self->state.core->stats(), &r);
  }
  void ended(const completion_failed& f) const { spdlog::info("request {} failed: {}", f.request_id, f.message); }
  void ended(const evict_result& e) const {
    spdlog::info("evicted {} {} {}", e.num_blocks, e.tier, e.tier == "cpu" ? "objects" : "blocks");
  }
  template <class T>
  void answer(const completion_client_actor& who, T&& m) const {
    self->state.io.send(self, who, std::forward<T>(m));
  }
  void stats() const {
    if (self->state.observer)
      self->state.observer(self->state.core->stats(), nullptr);
  }
  void command(connector_lookup&& l) const {
    self->state.io.request(self, self->state.handles.connector, std::move(l), feed<connector_lookup_done>(self),
                           [s = self](caf::error& err) { refused(s, "connector lookup failed: " + caf::to_string(err)); });
  }
  void command(pool_step&& p) const {
    self->state.io.request(self, self->state.handles.pool, std::move(p), feed<pool_step_done>(self),
                           [s = self](caf::error& err) { refused(s, "block pool refused a step: " + caf::to_string(err)); });
  }
  void command(connector_step&& c) const {
    self->state.io.request(self, self->state.handles.connector, std::move(c), feed<connector_step_done>(self),
                           [s = self](caf::error& err) { refused(s, "connector refused a step: " + caf::to_string(err)); });
  }
  void command(step_plan&& plan) const {
    spdlog::debug("scheduler: step ({}, {}) with {} requests, {} loads, {} saves", plan.header.epoch,
                  plan.header.seq, plan.requests.size(), plan.loads.size(), plan.saves.size());
    self->state.io.request(self, self->state.handles.runner, std::move(plan), feed<step_done>(self),
                           [s = self](caf::error& err) { refused(s, "model runner refused a step: " + caf::to_string(err)); });
  }
};

void emit(self_ptr self, scheduler_commands out) {
  if (!out.fatal.empty())
    spdlog::critical("scheduler: {}; failing every request in flight", out.fatal);
  dispatch(out, self->state.requesters, self->state.evict_requesters, emitter{self});
}

void on_event(self_ptr self, const scheduler_event& event, uint64_t ts_ns) {
  emit(self, self->state.core->apply(event, static_cast<double>(ts_ns) / 1e6));
}

void refused(self_ptr self, const std::string& what) { emit(self, self->state.core->refused(what)); }

scheduler_actor::behavior_type scheduler(self_ptr self, scheduler_options options, scheduler_handles handles,
                                         scheduler_observer observer, trace_tap tap) {
  auto& st = self->state;
  st.core = std::make_unique<scheduler_core>(options);
  st.handles = std::move(handles);
  st.observer = std::move(observer);
  st.io = door("scheduler", std::move(tap));
  return {
    [=](completion_request& request) {
      auto& st = self->state;
      auto ts = st.io.received(self->current_sender(), request);
      st.requesters[request.request_id] = caf::actor_cast<completion_client_actor>(self->current_sender());
      on_event(self, request, ts);
    },
    [=](cancel_request& cancel) {
      auto& st = self->state;
      auto ts = st.io.received(self->current_sender(), cancel);
      st.requesters.erase(cancel.request_id);
      on_event(self, cancel, ts);
    },
    [=](evict_request& request) {
      auto& st = self->state;
      auto ts = st.io.received(self->current_sender(), request);
      st.evict_requesters[request.request_id] = caf::actor_cast<completion_client_actor>(self->current_sender());
      on_event(self, request, ts);
    },
  };
}

} // namespace

scheduler_actor spawn_scheduler(caf::actor_system& sys, const scheduler_options& options, scheduler_handles handles,
                                scheduler_observer observer, trace_tap tap) {
  return sys.spawn(scheduler, options, std::move(handles), std::move(observer), std::move(tap));
}

} // namespace ordo
