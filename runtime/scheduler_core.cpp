#include "runtime/scheduler_core.hpp"

#include <stdexcept>

namespace ordo {

scheduler_core::scheduler_core(const scheduler_options& options) : core_(options) {}

scheduler_commands scheduler_core::apply(const scheduler_event& event, double now_ms) {
  scheduler_commands out;
  if (broken_) {
    if (auto* r = std::get_if<completion_request>(&event))
      out.failures.push_back({r->request_id, "internal error: scheduler stopped", "server_error"});
    return out;
  }
  try {
    std::visit([&](const auto& e) { on(e, now_ms, out); }, event);
  } catch (const std::exception& e) {
    return refused(e.what());
  }
  return out;
}

scheduler_commands scheduler_core::refused(const std::string& what) {
  scheduler_commands out;
  broken_ = true;
  out.fatal = what;
  return out;
}

void scheduler_core::on(const completion_request& e, double now_ms, scheduler_commands& out) {
  core_.add(e, now_ms);
  pump(out);
}

void scheduler_core::on(const cancel_request& e, double, scheduler_commands& out) {
  core_.cancel(e.request_id);
  pump(out);
}

void scheduler_core::on(const evict_request& e, double, scheduler_commands& out) {
  core_.request_evict(e);
  pump(out);
}

void scheduler_core::on(const connector_lookup_done& e, double, scheduler_commands& out) {
  core_.on_lookup_done(e);
  pump(out);
}

void scheduler_core::on(const pool_step_done& e, double, scheduler_commands& out) {
  out.plan = core_.on_pool_step_done(e);
  out.stats_changed = true;
  if (out.plan) {
    drain(out);
    return;
  }
  out.connector = core_.take_connector_step(); // loads and saves are granted before the plan
  drain(out);
  if (!out.connector && pool_step_changes_pool_)
    pump(out); // something was freed or refused with a fresh estimate: look again
}

void scheduler_core::on(const connector_step_done& e, double, scheduler_commands& out) {
  out.plan = core_.on_connector_step_done(e);
  out.stats_changed = true;
  if (out.plan)
    drain(out);
  else
    pump(out);
}

void scheduler_core::on(const step_done& e, double now_ms, scheduler_commands& out) {
  core_.on_step_done(e, now_ms);
  pump(out);
}

void scheduler_core::drain(scheduler_commands& out) {
  auto box = core_.take_outbox();
  auto append = [](auto& to, auto& from) {
    for (auto& x : from)
      to.push_back(std::move(x));
  };
  append(out.lookups, box.lookups);
  append(out.chunks, box.chunks);
  append(out.results, box.results);
  append(out.failures, box.failures);
  append(out.evictions, box.evictions);
  if (!box.results.empty() || !box.failures.empty())
    out.stats_changed = true;
}

void scheduler_core::pump(scheduler_commands& out) {
  drain(out);
  if (!core_.idle() || out.pool)
    return;
  out.pool = core_.next_pool_step();
  if (out.pool)
    pool_step_changes_pool_ = !out.pool->releases.empty() || out.pool->evict_hbm || !out.pool->grows.empty() ||
                              !out.pool->commits.empty();
}

} // namespace ordo
