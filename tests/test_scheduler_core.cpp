// The scheduler's one door: scheduler_core::apply(event) → commands. Driven here as the actor
// shell drives it, against the real block accounting and connector (transfer_routes, kind none)
// cores and a fake device, counting what is in flight after every event.
#include <catch.hpp>

#include <deque>
#include <string>
#include <vector>
#include <map>
#include <variant>

#include "runtime/block_accounting.hpp"
#include "runtime/scheduler_core.hpp"
#include "runtime/transfer_routes.hpp"

using namespace ordo;

namespace {

scheduler_options small_options() {
  scheduler_options o;
  o.block_size = 16;
  o.num_blocks = 64;
  o.max_batch_tokens = 64;
  o.max_num_seqs = 4;
  o.max_waiting = 4;
  return o;
}

completion_request request(uint64_t id, int32_t prompt_tokens, int32_t max_tokens) {
  completion_request r;
  r.request_id = id;
  for (int32_t i = 0; i < prompt_tokens; ++i)
    r.prompt.push_back(1 + (i * 7 + static_cast<int32_t>(id)) % 200);
  r.max_tokens = max_tokens;
  return r;
}

// Plays block pool, connector and model runner: every command the core sends is answered as the
// actors would, one event at a time, in the order they were sent.
struct loop {
  scheduler_core core;
  block_accounting pool;
  transfer_routes connector{route_table{"none", {{"none", route_kind::none, {}, 0, false}}, false}};
  std::deque<scheduler_event> inbox;
  std::map<uint64_t, completion_result> results;
  std::vector<completion_failed> failures;
  int in_flight = 0, max_in_flight = 0, plans = 0;
  double now = 0;

  explicit loop(const scheduler_options& o) : core(o), pool(o.num_blocks, o.block_size) {}

  void take(scheduler_commands c) {
    REQUIRE(c.fatal.empty());
    for (auto& l : c.lookups)
      inbox.push_back(*connector.start_lookup(l).done);
    in_flight += (c.pool ? 1 : 0) + (c.connector ? 1 : 0) + (c.plan ? 1 : 0);
    max_in_flight = std::max(max_in_flight, in_flight);
    if (c.pool)
      inbox.push_back(pool.apply(*c.pool));
    if (c.connector)
      inbox.push_back(connector.merge(connector.split(*c.connector), {}));
    if (c.plan) {
      ++plans;
      step_done done;
      done.header = c.plan->header;
      for (auto& r : c.plan->requests)
        if (r.sample)
          done.samples.push_back({r.request_id, r.first_position + static_cast<int32_t>(r.token_ids.size()) - 1,
                                  65 + static_cast<int32_t>(r.request_id), r.request_id * 31});
      inbox.push_back(done);
    }
    for (auto& r : c.results)
      results[r.request_id] = r;
    for (auto& f : c.failures)
      failures.push_back(f);
  }

  void send(const scheduler_event& e) { take(core.apply(e, now += 1)); }

  void run() {
    while (!inbox.empty()) {
      auto e = std::move(inbox.front());
      inbox.pop_front();
      if (!std::holds_alternative<connector_lookup_done>(e))
        --in_flight;
      take(core.apply(e, now += 1));
    }
  }
};

} // namespace

TEST_CASE("scheduler core: requests run to their answer with one command in flight at a time") {
  loop l(small_options());
  l.send(request(1, 40, 5));
  l.send(request(2, 100, 3));
  l.run();
  REQUIRE(l.results.size() == 2);
  CHECK(l.results[1].token_ids.size() == 5);
  CHECK(l.results[2].token_ids.size() == 3);
  CHECK(l.results[1].finish_reason == "length");
  CHECK(l.max_in_flight == 1);
  CHECK(l.plans >= 5);
  CHECK(l.core.stats().num_finished == 2);
  CHECK(l.pool.check_invariants().empty());
}

TEST_CASE("scheduler core: the same events give the same commands (replay)") {
  auto record = [](loop& l) {
    std::vector<std::string> out;
    for (int i = 1; i <= 3; ++i)
      l.send(request(static_cast<uint64_t>(i), 30 * i, 4));
    l.run();
    for (auto& [id, r] : l.results)
      out.push_back(std::to_string(id) + ":" + std::to_string(r.logits_digest) + ":" + std::to_string(r.duration_ms));
    return out;
  };
  loop a(small_options()), b(small_options());
  CHECK(record(a) == record(b));
}

TEST_CASE("scheduler core: a reply that answers nothing in flight stops the loop for good") {
  loop l(small_options());
  l.send(request(1, 20, 2));
  pool_step_done stray;
  stray.header = {9, 9};
  auto c = l.core.apply(stray, 1);
  CHECK_FALSE(c.fatal.empty());
  CHECK(l.core.broken());
  auto after = l.core.apply(request(2, 20, 2), 2);
  REQUIRE(after.failures.size() == 1);
  CHECK(after.failures[0].request_id == 2);
  CHECK(after.failures[0].message == "internal error: scheduler stopped");
  CHECK_FALSE(after.pool);
}

TEST_CASE("scheduler core: a refused command stops the loop and names what was refused") {
  loop l(small_options());
  auto c = l.core.refused("block pool refused a step: invalid_argument");
  CHECK(c.fatal == "block pool refused a step: invalid_argument");
  CHECK(l.core.apply(request(1, 20, 2), 1).failures.size() == 1);
}

TEST_CASE("scheduler core: beyond max_waiting a request is refused at once with a rate-limit error") {
  loop l(small_options());
  for (uint64_t id = 1; id <= 5; ++id)
    l.take(l.core.apply(request(id, 20, 2), 1)); // lookups queued, none answered yet
  REQUIRE(l.failures.size() == 1);
  CHECK(l.failures[0].request_id == 5);
  CHECK(l.failures[0].type == "rate_limit_error");
}

namespace {

// Records what dispatch hands a shell, as "kind:request:client".
struct recording_sink {
  std::vector<std::string>& out;
  template <class T>
  void ended(const T& m) const { out.push_back("ended:" + std::to_string(m.request_id)); }
  void answer(int who, const completion_chunk& m) const { out.push_back("chunk:" + std::to_string(m.request_id) + ":" + std::to_string(who)); }
  void answer(int who, const completion_result& m) const { out.push_back("result:" + std::to_string(m.request_id) + ":" + std::to_string(who)); }
  void answer(int who, const completion_failed& m) const { out.push_back("failed:" + std::to_string(m.request_id) + ":" + std::to_string(who)); }
  void answer(int who, const evict_result& m) const { out.push_back("evicted:" + std::to_string(m.request_id) + ":" + std::to_string(who)); }
  void stats() const { out.push_back("stats"); }
  template <class T>
  void command(const T&) const { out.push_back("command"); }
};

} // namespace

TEST_CASE("dispatch: answers go to known clients only, an ended request forgets its client") {
  std::map<uint64_t, int> clients = {{1, 10}, {2, 20}}, evicters = {{7, 70}};
  std::vector<std::string> sent;
  scheduler_commands c;
  c.chunks.push_back({1, 0, 65});
  c.chunks.push_back({3, 0, 66}); // request 3's client went away (cancelled): not sent
  completion_result r;
  r.request_id = 1;
  c.results.push_back(r);
  c.stats_changed = true;
  c.evictions.push_back({7, "hbm", 3});
  c.pool = pool_step{};
  dispatch(c, clients, evicters, recording_sink{sent});
  CHECK(sent == std::vector<std::string>{"chunk:1:10", "ended:1", "result:1:10", "stats", "ended:7", "evicted:7:70",
                                         "command"});
  CHECK(clients == std::map<uint64_t, int>{{2, 20}});
  CHECK(evicters.empty());

  // A fatal turn fails only the clients still waiting, once.
  scheduler_commands fatal;
  fatal.fatal = "block pool refused a step";
  sent.clear();
  dispatch(fatal, clients, evicters, recording_sink{sent});
  CHECK(sent == std::vector<std::string>{"failed:2:20"});
  CHECK(clients.empty());
}
