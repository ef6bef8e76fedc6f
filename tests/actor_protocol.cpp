// Actor protocol tests under CAF's deterministic test_coordinator: every message is delivered
// by sched.run() on this thread, in a reproducible order.
#include <catch.hpp>

#include <caf/all.hpp>
#include <caf/scheduler/test_coordinator.hpp>

#include "actors/block_pool.hpp"
#include "actors/connector.hpp"
#include "actors/scheduler.hpp"
#include "actors/store.hpp"

using namespace ordo;

namespace {

struct fixture {
  caf::actor_system_config cfg;
  std::unique_ptr<caf::actor_system> sys;
  caf::scheduler::test_coordinator* sched = nullptr;

  fixture() {
    cfg.add_message_types<caf::id_block::ordo>();
    cfg.set("scheduler.policy", caf::atom("testing"));
    cfg.set("logger.file-verbosity", caf::atom("quiet"));
    cfg.set("logger.console-verbosity", caf::atom("quiet"));
    sys = std::make_unique<caf::actor_system>(cfg);
    sched = &dynamic_cast<caf::scheduler::test_coordinator&>(sys->scheduler());
  }
  ~fixture() {
    sched->run();
  }
};

// What a client saw, in arrival order.
struct client_log {
  std::vector<completion_chunk> chunks;
  std::vector<completion_result> results;
  std::vector<completion_failed> failures;
  std::vector<evict_result> evictions;
};

// Sends its requests when it starts, then records every answer.
completion_client_actor::behavior_type client(completion_client_actor::pointer self, scheduler_actor sched,
                                              std::vector<completion_request> requests,
                                              std::vector<evict_request> evicts, std::shared_ptr<client_log> log) {
  for (auto& r : requests)
    self->send(sched, r);
  for (auto& e : evicts)
    self->send(sched, e);
  return {
    [=](const completion_chunk& c) { log->chunks.push_back(c); },
    [=](const completion_result& r) { log->results.push_back(r); },
    [=](const completion_failed& f) { log->failures.push_back(f); },
    [=](const evict_result& e) { log->evictions.push_back(e); },
  };
}

// A model runner stand-in that checks (epoch, seq) contiguity and samples position-derived
// tokens: the protocol, not the model, is under test here.
struct fake_runner_state {
  uint64_t last_seq = 0;
  std::vector<step_plan> plans;
};

model_runner_actor::behavior_type fake_runner(model_runner_actor::stateful_pointer<fake_runner_state> self,
                                              std::shared_ptr<std::vector<step_plan>> seen) {
  return {
    [=](const step_plan& plan) -> step_done {
      CHECK(plan.header.seq == self->state.last_seq + 1);
      self->state.last_seq = plan.header.seq;
      seen->push_back(plan);
      step_done done;
      done.header = plan.header;
      for (auto& r : plan.requests)
        if (r.sample) {
          int32_t pos = r.first_position + static_cast<int32_t>(r.token_ids.size()) - 1;
          done.samples.push_back({r.request_id, pos, (pos * 5 + 1) % 250, static_cast<uint64_t>(pos) * 31});
        }
      return done;
    },
    [=](step_done&) { FAIL("the fake runner gets no device callbacks"); },
  };
}

completion_request make_request(uint64_t id, int32_t len, int32_t max_tokens, bool stream = false) {
  completion_request r;
  r.request_id = id;
  for (int32_t i = 0; i < len; ++i)
    r.prompt.push_back(i % 200);
  r.max_tokens = max_tokens;
  r.stream = stream;
  return r;
}

} // namespace

TEST_CASE("actor protocol: block_pool answers in-order pool steps and refuses a gap") {
  fixture f;
  auto pool = spawn_block_pool(*f.sys, 8, 16);
  std::vector<std::string> outcomes;
  auto probe = f.sys->spawn([&](caf::event_based_actor* self) {
    pool_step s1;
    s1.header = {1, 1};
    block_grow g;
    g.request_id = 1;
    g.total_blocks = 2;
    s1.grows.push_back(g);
    self->request(pool, caf::infinite, s1).then([&](const pool_step_done& d) {
      outcomes.push_back(d.results.at(0).ok ? "ok" : "refused");
    });
    pool_step gap;
    gap.header = {1, 3};
    self->request(pool, caf::infinite, gap)
        .then([&](const pool_step_done&) { outcomes.push_back("accepted a gap"); },
              [&](const caf::error&) { outcomes.push_back("gap refused"); });
  });
  f.sched->run();
  REQUIRE(outcomes.size() == 2);
  CHECK(outcomes[0] == "ok");
  CHECK(outcomes[1] == "gap refused");
}

TEST_CASE("actor protocol: scheduler, pool, connector and runner serve, reuse and evict in order") {
  fixture f;
  auto seen = std::make_shared<std::vector<step_plan>>();
  auto store = spawn_store(*f.sys, nullptr, 0);
  route_table none;
  none.leaves.push_back({"none", route_kind::none, {}, 0, false});
  auto connector = spawn_connector(*f.sys, none, {{store}, {}, {}});
  auto pool = spawn_block_pool(*f.sys, 64, 16);
  auto runner = f.sys->spawn(fake_runner, seen);
  scheduler_options opt;
  opt.block_size = 16;
  opt.num_blocks = 64;
  opt.max_batch_tokens = 48;
  auto sched = spawn_scheduler(*f.sys, opt, {pool, runner, connector});
  auto log = std::make_shared<client_log>();

  f.sys->spawn(client, sched, std::vector<completion_request>{make_request(1, 70, 3, true)},
               std::vector<evict_request>{}, log);
  f.sched->run();
  f.sys->spawn(client, sched, std::vector<completion_request>{make_request(2, 70, 3)}, std::vector<evict_request>{},
               log);
  f.sched->run();
  f.sys->spawn(client, sched, std::vector<completion_request>{}, std::vector<evict_request>{{9, "hbm"}}, log);
  f.sched->run();
  f.sys->spawn(client, sched, std::vector<completion_request>{make_request(3, 70, 3)}, std::vector<evict_request>{},
               log);
  f.sched->run();

  REQUIRE(log->failures.empty());
  REQUIRE(log->results.size() == 3);
  // Streaming: one chunk per token, in order, before the result.
  REQUIRE(log->chunks.size() == 3);
  for (int i = 0; i < 3; ++i) {
    CHECK(log->chunks[i].request_id == 1);
    CHECK(log->chunks[i].index == i);
    CHECK(log->chunks[i].token_id == log->results[0].token_ids[i]);
  }
  CHECK(log->results[0].resume_at == 0);
  CHECK(log->results[1].resume_at == 64); // floor_16(70 - 1)
  CHECK(log->results[1].logits_digest == log->results[0].logits_digest);
  REQUIRE(log->evictions.size() == 1);
  CHECK(log->evictions[0].request_id == 9);
  CHECK(log->evictions[0].num_blocks > 0);
  CHECK(log->results[2].resume_at == 0);
  CHECK(log->results[2].logits_digest == log->results[0].logits_digest);
  // Every plan fits the token budget (the fake runner checked seq contiguity).
  REQUIRE_FALSE(seen->empty());
  for (auto& p : *seen) {
    int n = 0;
    for (auto& r : p.requests)
      n += static_cast<int>(r.token_ids.size());
    CHECK(n <= 48);
  }
}

namespace {

// The answer `conn` gives to `m`, every message delivered first.
template <class Reply, class T>
Reply answer_of(fixture& f, const connector_actor& conn, T m) {
  auto out = std::make_shared<Reply>();
  f.sys->spawn([=](caf::event_based_actor* self) {
    self->request(conn, caf::infinite, m).then([=](Reply& r) { *out = std::move(r); });
  });
  f.sched->run();
  return *out;
}

} // namespace

TEST_CASE("actor protocol: one connector over multi's stores and a peer's: fan-out, copies, first hit, window offsets") {
  std::vector<uint8_t> pd_arena(1 << 20), offload_arena(1 << 20), peer_arena(1 << 20);
  fixture f;
  auto pd_store = spawn_store(*f.sys, pd_arena.data(), pd_arena.size());
  auto offload_store = spawn_store(*f.sys, offload_arena.data(), offload_arena.size());
  auto peer = spawn_store(*f.sys, peer_arena.data(), peer_arena.size());
  offload_options o;
  o.namespace_id = 7;
  o.block_size = 16;
  o.chunk_size = 32;
  const uint64_t base = uint64_t{1} << 30; // the offload leaf's arena in the window
  route_table t{"multi", {{"pd", route_kind::pd, o, 0, true}, {"offload", route_kind::offload, o, base, false}}, true};
  auto peers_asked = std::make_shared<std::vector<std::string>>();
  connector_stores stores;
  stores.leaves = {pd_store, offload_store};
  stores.peer_store = [peers_asked, peer](const std::string& endpoint) {
    peers_asked->push_back(endpoint);
    return peer;
  };
  stores.hits = {std::make_shared<std::atomic<uint64_t>>(0), std::make_shared<std::atomic<uint64_t>>(0)};
  auto conn = spawn_connector(*f.sys, t, stores);

  const object_key key{7, 1002, static_cast<uint8_t>(object_kind::kv_chunk)}; // filed under block 2
  connector_step save;
  save.header = {1, 1};
  save.saves.push_back({1, {key, 0, 32, 2, 1000}});
  auto saved = answer_of<connector_step_done>(f, conn, save);
  REQUIRE(saved.saves.size() == 1);
  REQUIRE(saved.saves[0].ok);
  REQUIRE(saved.saves[0].copies.size() == 1); // reserved at both leaves
  CHECK(saved.saves[0].copies[0] >= base);
  connector_step commit;
  commit.header = {1, 2};
  commit.finished.push_back({1, key, true, true, false, 0, false});
  CHECK(answer_of<connector_step_done>(f, conn, commit).stats.num_objects == 1); // the first leaf's store

  connector_lookup here{2, {1001, 1002}, 40, "", ""};
  auto found = answer_of<connector_lookup_done>(f, conn, here);
  CHECK(found.connector == "multi:pd");
  CHECK(found.cpu_tokens == 32);
  // A lookup naming a prefill node asks its store (spawned once) first; it misses, the offload leaf holds it.
  connector_lookup remote{3, {1001, 1002}, 40, "10.0.0.9:1", "5"};
  auto from_offload = answer_of<connector_lookup_done>(f, conn, remote);
  CHECK(from_offload.connector == "multi:offload");
  CHECK(from_offload.cpu_tokens == 32);
  CHECK_FALSE(from_offload.from_peer);
  CHECK(*peers_asked == std::vector<std::string>{"10.0.0.9:1"});
  CHECK(stores.hits[0]->load() == 1);
  CHECK(stores.hits[1]->load() == 1);

  // Request 3 loads from the leaf that answered its lookup, at that leaf's window offset.
  connector_step load;
  load.header = {1, 3};
  load.loads.push_back({3, {key, 0, 32, 2, 1000}});
  auto loaded = answer_of<connector_step_done>(f, conn, load);
  REQUIRE(loaded.loads.size() == 1);
  CHECK(loaded.loads[0].ok);
  CHECK(loaded.loads[0].data_offset == saved.saves[0].copies[0]);
}
