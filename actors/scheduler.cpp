#include "actors/scheduler.hpp"

#include <chrono>
#include <map>

#include <caf/all.hpp>
#include <spdlog/spdlog.h>

namespace ordo {

namespace {

double now_ms() {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

struct scheduler_state {
  std::unique_ptr<scheduling> core;
  scheduler_handles handles;
  scheduler_observer observer;
  std::map<uint64_t, completion_client_actor> requesters; // request id → who gets the answer
  std::map<uint64_t, completion_client_actor> evict_requesters;
  bool broken = false;
  static inline const char* name = "scheduler";
};

using self_ptr = scheduler_actor::stateful_pointer<scheduler_state>;

void pump(self_ptr self);
void run_step(self_ptr self, step_plan plan);

void fail_everything(self_ptr self, const std::string& why) {
  auto& st = self->state;
  st.broken = true;
  spdlog::critical("scheduler: {}; failing every request in flight", why);
  for (auto& [id, who] : st.requesters)
    self->send(who, completion_failed{id, "internal error: " + why, "server_error"});
  st.requesters.clear();
}

void flush(self_ptr self) {
  auto& st = self->state;
  auto out = st.core->take_outbox();
  for (auto& l : out.lookups)
    self->request(st.handles.connector, caf::infinite, l).then(
        [=](connector_lookup_done& done) {
          self->state.core->on_lookup_done(done);
          pump(self);
        },
        [=](caf::error& err) { fail_everything(self, "connector lookup failed: " + caf::to_string(err)); });
  for (auto& c : out.chunks)
    if (auto it = st.requesters.find(c.request_id); it != st.requesters.end())
      self->send(it->second, c);
  for (auto& r : out.results) {
    spdlog::info("request {} finished: prompt {} tokens, resume_at {}, from hbm {} cpu {} store {}, {} tokens "
                 "({}), {:.1f} ms",
                 r.request_id, r.prompt_tokens, r.resume_at, r.from_hbm, r.from_cpu, r.from_store,
                 r.token_ids.size(), r.finish_reason, r.duration_ms);
    if (st.observer)
      st.observer(st.core->stats(), &r);
    if (auto it = st.requesters.find(r.request_id); it != st.requesters.end()) {
      self->send(it->second, r);
      st.requesters.erase(it);
    }
  }
  if (!out.failures.empty() && st.observer)
    st.observer(st.core->stats(), nullptr); // refusals (429) are counted at once
  for (auto& f : out.failures) {
    spdlog::info("request {} failed: {}", f.request_id, f.message);
    if (auto it = st.requesters.find(f.request_id); it != st.requesters.end()) {
      self->send(it->second, f);
      st.requesters.erase(it);
    }
  }
  for (auto& e : out.evictions) {
    spdlog::info("evicted {} {} {}", e.num_blocks, e.tier, e.tier == "cpu" ? "objects" : "blocks");
    if (auto it = st.evict_requesters.find(e.request_id); it != st.evict_requesters.end()) {
      self->send(it->second, e);
      st.evict_requesters.erase(it);
    }
  }
}

void pump(self_ptr self) {
  auto& st = self->state;
  flush(self);
  if (st.broken || !st.core->idle())
    return;
  auto step = st.core->next_pool_step();
  if (!step)
    return;
  bool changes_pool = !step->releases.empty() || step->evict_hbm || !step->grows.empty() || !step->commits.empty();
  self->request(st.handles.pool, caf::infinite, *step).then(
      [=](pool_step_done& done) {
        auto& st = self->state;
        std::optional<step_plan> plan;
        try {
          plan = st.core->on_pool_step_done(done);
        } catch (const std::exception& e) {
          return fail_everything(self, e.what());
        }
        if (st.observer)
          st.observer(st.core->stats(), nullptr);
        if (plan)
          return run_step(self, std::move(*plan));
        if (auto cs = st.core->take_connector_step()) {
          // Loads and saves are granted (store memory pinned or reserved) before the plan.
          self->request(st.handles.connector, caf::infinite, std::move(*cs)).then(
              [=](connector_step_done& done) {
                std::optional<step_plan> plan;
                try {
                  plan = self->state.core->on_connector_step_done(done);
                } catch (const std::exception& e) {
                  return fail_everything(self, e.what());
                }
                if (self->state.observer)
                  self->state.observer(self->state.core->stats(), nullptr);
                if (plan)
                  return run_step(self, std::move(*plan));
                flush(self);
                pump(self);
              },
              [=](caf::error& err) { fail_everything(self, "connector refused a step: " + caf::to_string(err)); });
          return;
        }
        flush(self);
        if (changes_pool)
          pump(self); // something was freed or refused with a fresh estimate: look again
      },
      [=](caf::error& err) { fail_everything(self, "block pool refused a step: " + caf::to_string(err)); });
}

void run_step(self_ptr self, step_plan plan) {
  auto& st = self->state;
  spdlog::debug("scheduler: step ({}, {}) with {} requests, {} loads, {} saves", plan.header.epoch, plan.header.seq,
                plan.requests.size(), plan.loads.size(), plan.saves.size());
  self->request(st.handles.runner, caf::infinite, std::move(plan)).then(
      [=](step_done& done) {
        try {
          self->state.core->on_step_done(done, now_ms());
        } catch (const std::exception& e) {
          return fail_everything(self, e.what());
        }
        pump(self);
      },
      [=](caf::error& err) { fail_everything(self, "model runner refused a step: " + caf::to_string(err)); });
}

scheduler_actor::behavior_type scheduler(self_ptr self, scheduler_options options, scheduler_handles handles,
                                         scheduler_observer observer) {
  auto& st = self->state;
  st.core = std::make_unique<scheduling>(options);
  st.handles = std::move(handles);
  st.observer = std::move(observer);
  return {
    [=](completion_request& request) {
      auto& st = self->state;
      auto sender = caf::actor_cast<completion_client_actor>(self->current_sender());
      if (st.broken) {
        self->send(sender, completion_failed{request.request_id, "internal error: scheduler stopped", "server_error"});
        return;
      }
      st.requesters[request.request_id] = sender;
      st.core->add(request, now_ms());
      pump(self);
    },
    [=](cancel_request& cancel) {
      auto& st = self->state;
      st.requesters.erase(cancel.request_id);
      st.core->cancel(cancel.request_id);
      pump(self);
    },
    [=](evict_request& request) {
      auto& st = self->state;
      st.evict_requesters[request.request_id] = caf::actor_cast<completion_client_actor>(self->current_sender());
      st.core->request_evict(request);
      pump(self);
    },
  };
}

} // namespace

scheduler_actor spawn_scheduler(caf::actor_system& sys, const scheduler_options& options, scheduler_handles handles,
                                scheduler_observer observer) {
  return sys.spawn(scheduler, options, std::move(handles), std::move(observer));
}

} // namespace ordo
