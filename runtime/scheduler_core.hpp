// The scheduler actor's one door (DESIGN §5): every message the scheduler receives is an event
// for apply(), and what it returns is every message to send. It drives the engine loop that
// runtime/scheduling.hpp describes (pool step → connector step → step plan → step done), so
// the actor holds no loop state of its own: it routes replies to requesters and sends.
//   event                       what apply() may return
//   completion_request          a connector_lookup; a completion_failed (429, or stopped)
//   connector_lookup_done       the next pool_step
//   pool_step_done              the step_plan, or the connector_step, or another pool_step
//   connector_step_done         the step_plan, or the next pool_step
//   step_done                   completion chunks and results, the next pool_step
//   cancel_request, evict_request   the next pool_step (answered in a later turn)
// NOTE(one-in-flight): at most one of pool_step / connector_step / step_plan is outstanding.
// NOTE(time): `now_ms` is an input, so a replay with the recorded times decides identically.
// NOTE(broken): a reply that does not answer the command in flight stops the loop for good:
// apply() returns `fatal` once, and every later request is refused with "scheduler stopped".
// Pure: no CAF.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <variant>
#include <vector>

#include "runtime/scheduling.hpp"

namespace ordo {

using scheduler_event = std::variant<completion_request, cancel_request, evict_request, connector_lookup_done,
                                     pool_step_done, connector_step_done, step_done>;

struct scheduler_commands {
  std::vector<connector_lookup> lookups;   // to the connector
  std::optional<pool_step> pool;           // to the block pool
  std::optional<connector_step> connector; // to the connector
  std::optional<step_plan> plan;           // to the model runner
  std::vector<completion_chunk> chunks;    // to each request's client
  std::vector<completion_result> results;
  std::vector<completion_failed> failures;
  std::vector<evict_result> evictions;
  bool stats_changed = false; // the counters moved (metrics)
  std::string fatal;          // non-empty: the loop stopped; fail every request in flight
};

// How the scheduler sends one turn's commands, in this order, shared by its actor and by
// `ordo replay` (which must see the same messages in the same order):
//   sink.ended(message)          every result, failure and evict result, answered or not (logs,
//                                metrics), just before its answer
//   sink.answer(client, message) chunks, results, failures, evict results, to a client still
//                                known; an answer that ends a request forgets its client
//   sink.stats()                 once, between results and failures, when the counters moved
//   sink.command(message)        lookups, then the pool step, connector step and plan
// A `fatal` turn fails every known client instead and forgets them all. `clients` and
// `evict_clients` map request ids to whoever asked (a cancel erases its entry beforehand).
template <class Client, class Sink>
void dispatch(scheduler_commands& c, std::map<uint64_t, Client>& clients, std::map<uint64_t, Client>& evict_clients,
              Sink&& sink) {
  if (!c.fatal.empty()) {
    for (auto& [id, who] : clients)
      sink.answer(who, completion_failed{id, "internal error: " + c.fatal, "server_error"});
    clients.clear();
    return;
  }
  auto answer = [&](auto& to, auto&& m, bool ends) {
    auto it = to.find(m.request_id);
    if (it == to.end())
      return;
    sink.answer(it->second, std::move(m));
    if (ends)
      to.erase(it);
  };
  for (auto& l : c.lookups)
    sink.command(std::move(l));
  for (auto& x : c.chunks)
    answer(clients, std::move(x), false);
  for (auto& x : c.results) {
    sink.ended(x);
    answer(clients, std::move(x), true);
  }
  if (c.stats_changed)
    sink.stats();
  for (auto& x : c.failures) {
    sink.ended(x);
    answer(clients, std::move(x), true);
  }
  for (auto& x : c.evictions) {
    sink.ended(x);
    answer(evict_clients, std::move(x), true);
  }
  if (c.pool)
    sink.command(std::move(*c.pool));
  if (c.connector)
    sink.command(std::move(*c.connector));
  if (c.plan)
    sink.command(std::move(*c.plan));
}

class scheduler_core {
public:
  explicit scheduler_core(const scheduler_options& options);

  scheduler_commands apply(const scheduler_event& event, double now_ms);
  // A command sent by apply() was refused by its receiver (`what` names it): stops the loop.
  scheduler_commands refused(const std::string& what);

  const scheduler_stats& stats() const { return core_.stats(); }
  bool broken() const { return broken_; }

private:
  void on(const completion_request& e, double now_ms, scheduler_commands& out);
  void on(const cancel_request& e, double now_ms, scheduler_commands& out);
  void on(const evict_request& e, double now_ms, scheduler_commands& out);
  void on(const connector_lookup_done& e, double now_ms, scheduler_commands& out);
  void on(const pool_step_done& e, double now_ms, scheduler_commands& out);
  void on(const connector_step_done& e, double now_ms, scheduler_commands& out);
  void on(const step_done& e, double now_ms, scheduler_commands& out);
  void drain(scheduler_commands& out);
  void pump(scheduler_commands& out);

  scheduling core_;
  bool broken_ = false;
  bool pool_step_changes_pool_ = false; // the pool step in flight frees, grows or evicts
};

} // namespace ordo
