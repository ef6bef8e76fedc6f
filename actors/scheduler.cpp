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

// Sends what the core decided: commands to the pool, connector and runner, answers to clients.
void emit(self_ptr self, scheduler_commands out) {
  auto& st = self->state;
  auto& io = st.io;
  if (!out.fatal.empty()) {
    spdlog::critical("scheduler: {}; failing every request in flight", out.fatal);
    for (auto& [id, who] : st.requesters)
      io.send(self, who, completion_failed{id, "internal error: " + out.fatal, "server_error"});
    st.requesters.clear();
    return;
  }
  for (auto& l : out.lookups)
    io.request(self, st.handles.connector, std::move(l), feed<connector_lookup_done>(self),
               [self](caf::error& err) { refused(self, "connector lookup failed: " + caf::to_string(err)); });
  for (auto& c : out.chunks)
    if (auto it = st.requesters.find(c.request_id); it != st.requesters.end())
      io.send(self, it->second, std::move(c));
  for (auto& r : out.results) {
    spdlog::info("request {} finished: prompt {} tokens, resume_at {}, from hbm {} cpu {} store {}, {} tokens "
                 "({}), {:.1f} ms",
                 r.request_id, r.prompt_tokens, r.resume_at, r.from_hbm, r.from_cpu, r.from_store,
                 r.token_ids.size(), r.finish_reason, r.duration_ms);
    if (st.observer)
      st.observer(st.core->stats(), &r);
    if (auto it = st.requesters.find(r.request_id); it != st.requesters.end()) {
      io.send(self, it->second, std::move(r));
      st.requesters.erase(it);
    }
  }
  if (out.stats_changed && st.observer)
    st.observer(st.core->stats(), nullptr);
  for (auto& f : out.failures) {
    spdlog::info("request {} failed: {}", f.request_id, f.message);
    if (auto it = st.requesters.find(f.request_id); it != st.requesters.end()) {
      io.send(self, it->second, std::move(f));
      st.requesters.erase(it);
    }
  }
  for (auto& e : out.evictions) {
    spdlog::info("evicted {} {} {}", e.num_blocks, e.tier, e.tier == "cpu" ? "objects" : "blocks");
    if (auto it = st.evict_requesters.find(e.request_id); it != st.evict_requesters.end()) {
      io.send(self, it->second, std::move(e));
      st.evict_requesters.erase(it);
    }
  }
  if (out.pool)
    io.request(self, st.handles.pool, std::move(*out.pool), feed<pool_step_done>(self),
               [self](caf::error& err) { refused(self, "block pool refused a step: " + caf::to_string(err)); });
  if (out.connector)
    io.request(self, st.handles.connector, std::move(*out.connector), feed<connector_step_done>(self),
               [self](caf::error& err) { refused(self, "connector refused a step: " + caf::to_string(err)); });
  if (out.plan) {
    spdlog::debug("scheduler: step ({}, {}) with {} requests, {} loads, {} saves", out.plan->header.epoch,
                  out.plan->header.seq, out.plan->requests.size(), out.plan->loads.size(), out.plan->saves.size());
    io.request(self, st.handles.runner, std::move(*out.plan), feed<step_done>(self),
               [self](caf::error& err) { refused(self, "model runner refused a step: " + caf::to_string(err)); });
  }
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
