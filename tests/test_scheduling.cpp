#include <catch.hpp>

#include <map>

#include "runtime/block_accounting.hpp"
#include "runtime/scheduling.hpp"

using namespace ordo;

namespace {

// Drives the scheduler core against the real block accounting core and a fake device that
// "samples" a token derived from the position, recording every plan it saw.
struct harness {
  scheduling sched;
  block_accounting pool;
  std::vector<step_plan> plans;
  std::vector<completion_result> results;
  std::vector<completion_chunk> chunks;
  std::vector<evict_result> evictions;
  std::vector<completion_failed> failures;
  double now = 0;

  explicit harness(scheduler_options o) : sched(o), pool(o.num_blocks, o.block_size) {}

  void drain_outbox() {
    auto out = sched.take_outbox();
    for (auto& l : out.lookups)
      sched.on_lookup_done({l.request_id, 0, 0, "none"});
    results.insert(results.end(), out.results.begin(), out.results.end());
    chunks.insert(chunks.end(), out.chunks.begin(), out.chunks.end());
    evictions.insert(evictions.end(), out.evictions.begin(), out.evictions.end());
    failures.insert(failures.end(), out.failures.begin(), out.failures.end());
  }

  // Runs loop turns until nothing is left to do (bounded).
  void run(int max_turns = 10000) {
    drain_outbox();
    for (int i = 0; i < max_turns && sched.has_work(); ++i) {
      auto ps = sched.next_pool_step();
      REQUIRE(ps);
      auto plan = sched.on_pool_step_done(pool.apply(*ps));
      REQUIRE(pool.check_invariants().empty());
      if (plan) {
        plans.push_back(*plan);
        step_done done;
        done.header = plan->header;
        for (auto& r : plan->requests)
          if (r.sample) {
            int32_t pos = r.first_position + static_cast<int32_t>(r.token_ids.size()) - 1;
            done.samples.push_back({r.request_id, pos, (pos * 7 + 3) % 200, static_cast<uint64_t>(pos)});
          }
        sched.on_step_done(done, now += 1);
      }
      drain_outbox();
    }
    REQUIRE_FALSE(sched.has_work());
  }

  void add(uint64_t id, int32_t prompt_len, int32_t max_tokens, int32_t first_token = 1) {
    completion_request r;
    r.request_id = id;
    for (int32_t i = 0; i < prompt_len; ++i)
      r.prompt.push_back((first_token + i) % 250);
    r.max_tokens = max_tokens;
    sched.add(r, now);
  }

  const completion_result& result(uint64_t id) const {
    for (auto& r : results)
      if (r.request_id == id)
        return r;
    FAIL("no result for request " << id);
    return results.front();
  }
};

scheduler_options dense_options() {
  scheduler_options o;
  o.block_size = 16;
  o.num_blocks = 64;
  o.max_batch_tokens = 64;
  o.max_num_seqs = 4;
  return o;
}

} // namespace

TEST_CASE("scheduling: chunked prefill respects the token budget, then decodes to max_tokens") {
  harness h(dense_options());
  h.add(1, 150, 5);
  h.run();
  REQUIRE(h.results.size() == 1);
  CHECK(h.results[0].token_ids.size() == 5);
  CHECK(h.results[0].finish_reason == "length");
  // 150 prompt tokens in chunks of at most 64, then one token per step.
  REQUIRE(h.plans.size() >= 3 + 4);
  CHECK(h.plans[0].requests[0].token_ids.size() == 64);
  CHECK(h.plans[1].requests[0].first_position == 64);
  CHECK(h.plans[2].requests[0].token_ids.size() == 22);
  CHECK(h.plans[2].requests[0].sample);
  for (auto& p : h.plans) {
    int32_t n = 0;
    for (auto& r : p.requests)
      n += static_cast<int32_t>(r.token_ids.size());
    CHECK(n <= 64);
  }
}

TEST_CASE("scheduling: commands carry contiguous (epoch, seq)") {
  harness h(dense_options());
  h.add(1, 40, 3);
  h.add(2, 70, 2);
  h.run();
  for (size_t i = 0; i < h.plans.size(); ++i) {
    CHECK(h.plans[i].header.epoch == 1);
    CHECK(h.plans[i].header.seq == i + 1);
  }
  step_done stale;
  stale.header = {1, 1};
  CHECK_THROWS_AS(h.sched.on_step_done(stale, 0), std::logic_error);
}

TEST_CASE("scheduling: continuous batching runs requests together and each gets its own tokens") {
  harness h(dense_options());
  h.add(1, 20, 4, 1);
  h.add(2, 30, 4, 50);
  h.add(3, 10, 4, 100);
  h.run();
  REQUIRE(h.results.size() == 3);
  bool batched = false;
  for (auto& p : h.plans)
    batched |= p.requests.size() == 3;
  CHECK(batched);
  for (auto& r : h.results)
    CHECK(r.token_ids.size() == 4);
}

TEST_CASE("scheduling: a dense resend reuses HBM blocks, never covering the last prompt token") {
  harness h(dense_options());
  h.add(1, 50, 2);
  h.run();
  CHECK(h.result(1).resume_at == 0);
  h.add(2, 50, 2);
  h.run();
  CHECK(h.result(2).resume_at == 48); // floor_16(50 - 1)
  CHECK(h.result(2).cached_tokens == 48);
  CHECK(h.result(2).logits_digest == h.result(1).logits_digest);
  h.add(3, 48, 2); // a prompt of whole blocks: the hit stops one block short
  h.run();
  CHECK(h.result(3).resume_at == 32);
  CHECK(h.result(3).reason.find("capped") != std::string::npos);
}

TEST_CASE("scheduling: an HBM eviction makes the resend recompute") {
  harness h(dense_options());
  h.add(1, 50, 2);
  h.run();
  h.sched.request_evict({77, "hbm"});
  h.run();
  REQUIRE(h.evictions.size() == 1);
  CHECK(h.evictions[0].request_id == 77);
  CHECK(h.evictions[0].num_blocks >= 3);
  h.add(2, 50, 2);
  h.run();
  CHECK(h.result(2).resume_at == 0);
  CHECK(h.result(2).logits_digest == h.result(1).logits_digest);
}

TEST_CASE("scheduling: a hybrid model resumes at 0 and gets a fresh state slot") {
  auto o = dense_options();
  o.has_recurrent_state = true;
  o.max_state_slots = 2;
  harness h(o);
  h.add(1, 50, 2);
  h.add(2, 50, 2);
  h.add(3, 50, 2);
  h.run();
  REQUIRE(h.results.size() == 3);
  for (auto& r : h.results) {
    CHECK(r.resume_at == 0);
    CHECK(r.reason.find("resumes at 0") != std::string::npos);
  }
  for (auto& p : h.plans)
    for (auto& r : p.requests) {
      CHECK(r.state_slot >= 0);
      CHECK(r.state_slot < 2);
      CHECK(r.reset_state == (r.first_position == 0));
    }
}

TEST_CASE("scheduling: when blocks run out, requests are preempted and finish with the same tokens") {
  auto o = dense_options();
  o.num_blocks = 12; // 192 tokens for four requests that grow to 100 tokens each
  o.max_batch_tokens = 128;
  harness tight(o);
  harness roomy(dense_options());
  for (uint64_t id = 1; id <= 4; ++id) {
    tight.add(id, 60, 40, static_cast<int32_t>(id * 10));
    roomy.add(id, 60, 40, static_cast<int32_t>(id * 10));
  }
  tight.run();
  roomy.run();
  REQUIRE(tight.results.size() == 4);
  int preemptions = 0;
  for (uint64_t id = 1; id <= 4; ++id) {
    CHECK(tight.result(id).token_ids == roomy.result(id).token_ids);
    CHECK(tight.result(id).logits_digest == roomy.result(id).logits_digest);
    preemptions += tight.result(id).num_preemptions;
  }
  CHECK(preemptions > 0);
}

TEST_CASE("scheduling: a request larger than the pool is refused with a message") {
  auto o = dense_options();
  o.num_blocks = 4;
  harness h(o);
  h.add(1, 100, 10);
  h.drain_outbox();
  REQUIRE(h.failures.size() == 1);
  CHECK(h.failures[0].message.find("blocks") != std::string::npos);
}

TEST_CASE("scheduling: checkpoint positions follow SPEC B3") {
  using v = std::vector<int32_t>;
  CHECK(checkpoint_positions(768, 64, 256) == v{256, 512, 704, 768});
  CHECK(checkpoint_positions(1000, 64, 256) == v{256, 512, 768, 960});
  CHECK(checkpoint_positions(1050, 64, 256) == v{256, 512, 768, 1024});
  CHECK(checkpoint_positions(1000, 64, -1) == v{960});
  CHECK(checkpoint_positions(1000, 64, 0).empty());
  CHECK(checkpoint_positions(64, 64, -1).empty()); // floor_64(63) = 0: no anchor
  CHECK(snap_checkpoint_interval(300, 64) == 256);
  CHECK(snap_checkpoint_interval(10, 64) == 64);
  CHECK(snap_checkpoint_interval(-1, 64) == -1);
  CHECK(snap_checkpoint_interval(0, 64) == 0);
}

TEST_CASE("scheduling: a hybrid prefill is cut at every checkpoint, copied after the forward, restored on resend") {
  auto o = dense_options();
  o.has_recurrent_state = true;
  o.block_size = 16;
  o.num_blocks = 128;
  o.max_batch_tokens = 512;
  o.checkpoint_interval = 64;
  o.units_per_image = 2;
  harness h(o);
  h.add(1, 150, 2);
  h.run();
  // Chunks end at 64, 128, 144 (anchor floor_16(149)), then the prompt's end.
  REQUIRE(h.plans.size() >= 4);
  std::vector<int32_t> ends, copies;
  for (size_t i = 0; i < 4; ++i) {
    auto& r = h.plans[i].requests.at(0);
    ends.push_back(r.first_position + static_cast<int32_t>(r.token_ids.size()));
    for (auto& c : h.plans[i].checkpoint_copies) {
      copies.push_back(c.position);
      CHECK(c.units.size() == 2);
    }
  }
  CHECK(ends == std::vector<int32_t>{64, 128, 144, 150});
  CHECK(copies == std::vector<int32_t>{64, 128, 144});
  h.plans.clear();
  h.add(2, 150, 2);
  h.run();
  CHECK(h.result(2).resume_at == 144);
  CHECK(h.result(2).logits_digest == h.result(1).logits_digest);
  REQUIRE_FALSE(h.plans.empty());
  REQUIRE(h.plans[0].restores.size() == 1);
  CHECK(h.plans[0].restores[0].position == 144);
  CHECK_FALSE(h.plans[0].requests[0].reset_state);
  CHECK(h.sched.stats().checkpoints_restored == 1);
}
