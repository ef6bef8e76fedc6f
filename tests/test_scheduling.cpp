#include <catch.hpp>

#include <algorithm>
#include <deque>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <tuple>
#include <vector>

#include "messages/compare.hpp"
#include "runtime/block_accounting.hpp"
#include "runtime/offload_policy.hpp"
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
      sched.on_lookup_done({l.request_id, 0, 0, "none", {}, {}, ""});
    results.insert(results.end(), out.results.begin(), out.results.end());
    chunks.insert(chunks.end(), out.chunks.begin(), out.chunks.end());
    evictions.insert(evictions.end(), out.evictions.begin(), out.evictions.end());
    failures.insert(failures.end(), out.failures.begin(), out.failures.end());
  }

  // One loop turn; `during_step` runs while the turn's plan is on the device.
  void turn(const std::function<void()>& during_step = {}) {
    auto ps = sched.next_pool_step();
    if (!ps) { // only cancellations were left, and they emptied the queue
      REQUIRE_FALSE(sched.has_work());
      return;
    }
    auto plan = sched.on_pool_step_done(pool.apply(*ps));
    REQUIRE(pool.check_invariants().empty());
    if (plan) {
      plans.push_back(*plan);
      if (during_step)
        during_step();
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

  // Runs loop turns until nothing is left to do (bounded).
  void run(int max_turns = 10000) {
    drain_outbox();
    for (int i = 0; i < max_turns && sched.has_work(); ++i)
      turn();
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

// --- Host tier (kv_transfer.connector = "offload"): SPEC C1-C5 --------------------------------

namespace {

constexpr uint8_t kv_kind = static_cast<uint8_t>(object_kind::kv_chunk);
constexpr uint8_t state_kind = static_cast<uint8_t>(object_kind::state_image);

// One loop turn as the scheduler actor runs it: pool step, then (when the core asks for one)
// a connector step, then the plan, if any, completed by a step_done.
struct turn_record {
  pool_step pool;
  pool_step_done pool_done;
  std::optional<connector_step> connector;
  std::optional<connector_step_done> connector_done;
  std::optional<step_plan> plan;
};

// Drives the core with offload on against the real block accounting, a scripted host tier
// (lookup answers given per request by add_held, grants from a hook) and the fake device above.
struct offload_harness {
  scheduling sched;
  block_accounting pool;
  std::map<uint64_t, connector_lookup> lookups;
  // Grant for one order; default: granted, data at a fresh offset.
  std::function<transfer_grant(const transfer_order&, bool is_save)> grant;
  std::deque<turn_record> turns; // a deque: references to earlier turns stay valid
  std::vector<completion_result> results;
  uint64_t next_offset = 0;
  double now = 0;
  std::string granularity; // the store's, in every lookup and connector step answer (SPEC D2)
  bool sum_saves = false;  // step_done carries a checksum per save, as a runner whose gathers sum
  // Loads granted as summed (checksum_of their offset), and step_done's sums: right unless
  // `corrupt` picks the load.
  bool sum_loads = false;
  std::function<bool(const unit_transfer&)> corrupt = [](const unit_transfer&) { return false; };

  static uint64_t checksum_of(uint64_t data_offset) { return 0xc0de000000000000ull ^ data_offset; }

  explicit offload_harness(scheduler_options o) : sched(o), pool(o.num_blocks, o.block_size) {
    grant = [this](const transfer_order& o, bool is_save) {
      transfer_grant g{o.request_id, o.object.key, true, "ok", next_offset, o.object.data_bytes, {}};
      if (sum_loads && !is_save) {
        g.summed = true;
        g.checksum = checksum_of(g.data_offset);
      }
      next_offset += o.object.data_bytes;
      return g;
    };
  }

  void drain_outbox() {
    auto out = sched.take_outbox();
    for (auto& l : out.lookups) {
      lookups[l.request_id] = l;
      connector_lookup_done none; // the host tier holds nothing of it
      none.request_id = l.request_id;
      none.granularity = granularity;
      sched.on_lookup_done(none);
    }
    results.insert(results.end(), out.results.begin(), out.results.end());
    REQUIRE(out.failures.empty());
  }

  void complete(const step_plan& plan) {
    step_done done;
    done.header = plan.header;
    for (auto& r : plan.requests)
      if (r.sample) {
        int32_t pos = r.first_position + static_cast<int32_t>(r.token_ids.size()) - 1;
        done.samples.push_back({r.request_id, pos, (pos * 7 + 3) % 200, static_cast<uint64_t>(pos)});
      }
    if (sum_saves)
      for (auto& s : plan.saves)
        done.save_checksums.push_back(checksum_of(s.data_offset));
    if (sum_loads)
      for (auto& l : plan.loads)
        done.load_checksums.push_back(checksum_of(l.data_offset) ^ (corrupt(l) ? 1 : 0));
    sched.on_step_done(done, now += 1);
  }

  // One loop turn; false when there is nothing to do.
  bool turn() {
    drain_outbox();
    auto ps = sched.next_pool_step();
    if (!ps)
      return false;
    turn_record t;
    t.pool = *ps;
    t.pool_done = pool.apply(*ps);
    REQUIRE(pool.check_invariants().empty());
    t.plan = sched.on_pool_step_done(t.pool_done);
    if (t.plan) {
      CHECK_FALSE(sched.take_connector_step()); // a turn with a plan already has no connector step
    } else {
      t.connector = sched.take_connector_step();
      if (t.connector) {
        connector_step_done cd;
        cd.header = t.connector->header;
        cd.granularity = granularity;
        for (auto& l : t.connector->loads)
          cd.loads.push_back(grant(l, false));
        for (auto& s : t.connector->saves)
          cd.saves.push_back(grant(s, true));
        t.connector_done = cd;
        t.plan = sched.on_connector_step_done(cd);
      }
    }
    if (t.plan)
      complete(*t.plan);
    turns.push_back(std::move(t));
    drain_outbox();
    return true;
  }

  // Turns until nothing is left (bounded: a request that can never finish fails the test).
  void run(int max_turns = 200) {
    for (int i = 0; i < max_turns && turn(); ++i) {
    }
    REQUIRE_FALSE(sched.has_work());
  }

  static completion_request request_of(uint64_t id, int32_t prompt_len, int32_t max_tokens, int32_t first_token) {
    completion_request r;
    r.request_id = id;
    for (int32_t i = 0; i < prompt_len; ++i)
      r.prompt.push_back((first_token + i) % 250);
    r.max_tokens = max_tokens;
    return r;
  }

  // Adds a request the host tier holds nothing of.
  void add(uint64_t id, int32_t prompt_len, int32_t max_tokens, int32_t first_token = 1) {
    sched.add(request_of(id, prompt_len, max_tokens, first_token), now);
    drain_outbox();
  }

  // Adds a request whose lookup is answered with `answer(lookup)`.
  void add_held(uint64_t id, int32_t prompt_len, int32_t max_tokens,
                const std::function<connector_lookup_done(const connector_lookup&)>& answer, int32_t first_token = 1) {
    sched.add(request_of(id, prompt_len, max_tokens, first_token), now);
    auto out = sched.take_outbox();
    REQUIRE(out.lookups.size() == 1);
    lookups[id] = out.lookups[0];
    sched.on_lookup_done(answer(out.lookups[0]));
  }

  const completion_result& result(uint64_t id) const {
    for (auto& r : results)
      if (r.request_id == id)
        return r;
    FAIL("no result for request " << id);
    return results.front();
  }

  // Hash of the block that ends at `position` in request `id`'s prompt.
  uint64_t hash_at(uint64_t id, int32_t position, int32_t block) const {
    return lookups.at(id).hashes.at(static_cast<size_t>(position / block - 1));
  }
};

// A lookup answer: whole chunks [0, num_chunks) and state images at `states`.
std::function<connector_lookup_done(const connector_lookup&)> host_has(int32_t block, int32_t chunk,
                                                                       int32_t num_chunks, std::vector<int32_t> states,
                                                                       int32_t cpu_tokens) {
  return [=](const connector_lookup& l) {
    connector_lookup_done d{l.request_id, cpu_tokens, 0, "offload", {}, states, ""};
    int32_t per = chunk / block;
    for (int32_t c = 0; c < num_chunks; ++c)
      d.cpu_chunks.push_back({c * per, per, l.hashes.at(static_cast<size_t>((c + 1) * per - 1))});
    return d;
  };
}

// SPEC C3 geometry: gdn-style hybrid, block 64, chunk 256, rungs every 256 tokens.
scheduler_options hybrid_offload_options() {
  scheduler_options o;
  o.block_size = 64;
  o.num_blocks = 128;
  o.max_batch_tokens = 512;
  o.max_num_seqs = 4;
  o.max_state_slots = 4;
  o.has_recurrent_state = true;
  o.checkpoint_interval = 256;
  o.units_per_image = 2;
  o.offload = true;
  o.chunk_size = 256;
  o.unit_bytes = 1000;
  o.namespace_id = 5;
  return o;
}

scheduler_options dense_offload_options() {
  scheduler_options o;
  o.block_size = 16;
  o.num_blocks = 256;
  o.max_batch_tokens = 512;
  o.max_num_seqs = 4;
  o.offload = true;
  o.chunk_size = 256;
  o.unit_bytes = 100;
  o.namespace_id = 5;
  return o;
}

int32_t end_of(const scheduled_request& r) { return r.first_position + static_cast<int32_t>(r.token_ids.size()); }

const scheduled_request* find_request(const std::optional<step_plan>& plan, uint64_t id) {
  if (!plan)
    return nullptr;
  for (auto& r : plan->requests)
    if (r.request_id == id)
      return &r;
  return nullptr;
}

} // namespace

TEST_CASE("scheduling offload: SPEC C2/C3, a 768-token hybrid prompt resumes at 704 from the host tier") {
  offload_harness h(hybrid_offload_options());
  h.add_held(1, 768, 2, host_has(64, 256, 3, {256, 512, 704, 768}, 768));

  REQUIRE(h.turn());
  const auto& t = h.turns[0];
  REQUIRE(t.pool.grows.size() == 1);
  std::vector<int32_t> checkpoints;
  for (auto& c : t.pool.grows[0].checkpoints)
    checkpoints.push_back(c.position);
  CHECK(checkpoints == std::vector<int32_t>{256, 512, 704, 768}); // units for the image at 704
  REQUIRE(t.pool_done.results.size() == 1);
  const auto& grown = t.pool_done.results[0];
  CHECK(grown.num_hit_blocks == 0);

  // The loads: the three chunks through the one covering 704 (the hit is kept whole), then the
  // state image at 704, each under the hash of the block that ends it.
  REQUIRE(t.connector);
  const auto& loads = t.connector->loads;
  REQUIRE(loads.size() == 4);
  for (int32_t i = 0; i < 3; ++i) {
    const auto& o = loads[static_cast<size_t>(i)].object;
    CHECK(o.key.kind == kv_kind);
    CHECK(o.key.namespace_id == 5);
    CHECK(o.key.hash == h.hash_at(1, 256 * (i + 1), 64));
    CHECK(o.first_token == 256 * i);
    CHECK(o.tokens == 256);
    CHECK(o.num_blocks == 4);
  }
  CHECK(loads[3].object.key.kind == state_kind);
  CHECK(loads[3].object.key.hash == h.hash_at(1, 704, 64));
  CHECK(loads[3].object.tokens == 704);
  CHECK(loads[3].object.num_blocks == 2);
  CHECK(t.connector->saves.empty());

  // The plan of that turn: the loads and the restore at 704, no forward of the request.
  REQUIRE(t.plan);
  CHECK(t.plan->requests.empty());
  REQUIRE(t.plan->loads.size() == 4);
  for (size_t i = 0; i < 3; ++i) {
    std::vector<int32_t> blocks(grown.block_table.begin() + 4 * static_cast<long>(i),
                                grown.block_table.begin() + 4 * static_cast<long>(i) + 4);
    CHECK(t.plan->loads[i].kind == kv_kind);
    CHECK(t.plan->loads[i].units == blocks);
  }
  std::vector<int32_t> image_units;
  for (auto& r : grown.reserved)
    if (r.position == 704)
      image_units = r.units;
  REQUIRE(image_units.size() == 2);
  CHECK(t.plan->loads[3].kind == state_kind);
  CHECK(t.plan->loads[3].units == image_units);
  REQUIRE(t.plan->restores.size() == 1);
  CHECK(t.plan->restores[0].position == 704);
  CHECK(t.plan->restores[0].units == image_units);

  // The next turn computes from 704 without resetting the restored state.
  REQUIRE(h.turn());
  auto* next = find_request(h.turns[1].plan, 1);
  REQUIRE(next);
  CHECK(next->first_position == 704);
  CHECK(next->token_ids.size() == 64);
  CHECK_FALSE(next->reset_state);
  CHECK(next->sample);
  CHECK(h.turns[1].plan->restores.empty());

  h.run();
  const auto& res = h.result(1);
  CHECK(res.resume_at == 704);
  CHECK(res.cached_tokens == 704);
  CHECK(res.from_cpu == 768); // 768 tokens retrieved
  CHECK(res.from_hbm == 0);
  CHECK(res.reason.find("state image at 704") != std::string::npos);
  CHECK(h.sched.stats().loads_total == 4);
  CHECK(h.sched.stats().prompt_tokens_from_cpu == 768);

  offload_harness cold(hybrid_offload_options());
  cold.add(1, 768, 2);
  cold.run();
  CHECK(cold.result(1).resume_at == 0);
  CHECK(res.token_ids == cold.result(1).token_ids);
  CHECK(res.logits_digest == cold.result(1).logits_digest);
}

TEST_CASE("scheduling offload: a dense 768-token prompt resumes at floor_16(767) = 752 with no state load") {
  offload_harness h(dense_offload_options());
  h.add_held(1, 768, 2, host_has(16, 256, 3, {}, 768));
  REQUIRE(h.turn());
  const auto& t = h.turns[0];
  REQUIRE(t.connector);
  REQUIRE(t.connector->loads.size() == 3);
  for (auto& l : t.connector->loads)
    CHECK(l.object.key.kind == kv_kind);
  REQUIRE(t.plan);
  CHECK(t.plan->requests.empty());
  CHECK(t.plan->loads.size() == 3);
  CHECK(t.plan->restores.empty());
  REQUIRE(h.turn());
  auto* next = find_request(h.turns[1].plan, 1);
  REQUIRE(next);
  CHECK(next->first_position == 752);
  CHECK(next->token_ids.size() == 16);
  h.run();
  CHECK(h.result(1).resume_at == 752);
  CHECK(h.result(1).from_cpu == 768);
  CHECK(h.result(1).reason.find("host tier holds KV up to token 768") != std::string::npos);
}

TEST_CASE("scheduling offload: SPEC C2, a full-prompt host hit is reduced by one token before any decision") {
  SECTION("dense: 512 of 512 tokens resumes at floor_16(511) = 496") {
    offload_harness h(dense_offload_options());
    h.add_held(1, 512, 2, host_has(16, 256, 2, {}, 512));
    h.run();
    CHECK(h.result(1).resume_at == 496);
    auto* first = find_request(h.turns.at(1).plan, 1);
    REQUIRE(first);
    CHECK(first->first_position == 496);
    CHECK(first->sample);
  }
  SECTION("dense: a hit short of the prompt is kept: 512 of 520 tokens resumes at 512") {
    offload_harness h(dense_offload_options());
    h.add_held(1, 520, 2, host_has(16, 256, 2, {}, 512));
    h.run();
    CHECK(h.result(1).resume_at == 512);
  }
  SECTION("hybrid: a state image at 768 of a 768-token prompt is not a resume point; 512 is") {
    offload_harness h(hybrid_offload_options());
    h.add_held(1, 768, 2, host_has(64, 256, 3, {256, 512, 768}, 768));
    REQUIRE(h.turn());
    REQUIRE(h.turns[0].connector);
    const auto& loads = h.turns[0].connector->loads;
    REQUIRE(loads.size() == 3); // chunks [0, 256), [256, 512) and the image at 512
    CHECK(loads[2].object.key.kind == state_kind);
    CHECK(loads[2].object.tokens == 512);
    h.run();
    CHECK(h.result(1).resume_at == 512);
  }
}

TEST_CASE("scheduling offload: blocks shared from an HBM hit are not loaded") {
  offload_harness h(dense_offload_options());
  h.add(1, 300, 1); // leaves blocks [0, 18) = tokens [0, 288) in the HBM index
  h.run();
  h.add_held(2, 768, 2, host_has(16, 256, 3, {}, 768));
  const size_t first = h.turns.size();
  REQUIRE(h.turn());
  const auto& t = h.turns[first];
  REQUIRE(t.pool_done.results.size() == 1);
  const auto& grown = t.pool_done.results[0];
  REQUIRE(grown.num_hit_blocks == 18);
  REQUIRE(t.connector);
  REQUIRE(t.connector->loads.size() == 2); // chunk [0, 256) lies wholly below the HBM hit
  CHECK(t.connector->loads[0].object.first_token == 256);
  CHECK(t.connector->loads[1].object.first_token == 512);
  REQUIRE(t.plan);
  REQUIRE(t.plan->loads.size() == 2);
  for (size_t i = 0; i < 2; ++i) {
    const auto& units = t.plan->loads[i].units;
    REQUIRE(units.size() == 16);
    for (size_t k = 0; k < 16; ++k) {
      size_t b = 16 * (i + 1) + k;
      if (b < 18)
        CHECK(units[k] == -1);
      else
        CHECK(units[k] == grown.block_table[b]);
    }
  }
  h.run();
  CHECK(h.result(2).resume_at == 752);
  CHECK(h.result(2).from_hbm == 288);
  CHECK(h.result(2).from_cpu == 768 - 288);
}

namespace {

// All kv_chunk saves (first_token) ordered for request `id`, in turn order.
std::vector<int32_t> kv_saves_of(const offload_harness& h, uint64_t id) {
  std::vector<int32_t> out;
  for (auto& t : h.turns)
    if (t.connector)
      for (auto& s : t.connector->saves)
        if (s.request_id == id && s.object.key.kind == kv_kind)
          out.push_back(s.object.first_token);
  return out;
}

// Grants everything except the orders `refuse` picks, which get `status`.
std::function<transfer_grant(const transfer_order&, bool)> refusing(const offload_harness& h,
                                                                    std::function<bool(const transfer_order&, bool)> refuse,
                                                                    std::string status) {
  auto base = h.grant;
  return [=](const transfer_order& o, bool is_save) {
    if (refuse(o, is_save))
      return transfer_grant{o.request_id, o.object.key, false, status, 0, 0, {}};
    return base(o, is_save);
  };
}

} // namespace

TEST_CASE("scheduling offload: a load whose scatter summed a wrong checksum is undone after its step") {
  offload_harness h(hybrid_offload_options());
  h.sum_loads = true;
  int kv_loads = 0; // the second KV chunk loaded, [256, 512), sums wrong
  h.corrupt = [&](const unit_transfer& l) { return l.kind == kv_kind && ++kv_loads == 2; };
  h.add_held(1, 768, 4, host_has(64, 256, 3, {256, 512, 704, 768}, 768));

  REQUIRE(h.turn());
  const auto& t0 = h.turns[0];
  REQUIRE(t0.connector);
  REQUIRE(t0.connector->loads.size() == 4);
  REQUIRE(t0.plan);
  REQUIRE(t0.plan->loads.size() == 4); // all granted: issued, the request parked (no forward of it)
  CHECK_FALSE(find_request(t0.plan, 1));
  const object_key bad = t0.connector->loads[1].object.key; // KV chunk [256, 512): its sum comes back wrong
  REQUIRE(t0.connector->loads[1].object.first_token == 256);

  REQUIRE(h.turn());
  const auto& t1 = h.turns[1];
  REQUIRE(t1.connector);
  int corrupt = 0, unpinned = 0;
  for (auto& f : t1.connector->finished)
    if (!f.is_save) {
      CHECK(f.ok);
      (f.corrupt ? corrupt : unpinned) += 1;
      CHECK(f.corrupt == (f.key == bad));
    }
  CHECK(corrupt == 1);
  CHECK(unpinned == 3);
  // The image the loaded state would have become stays COPYING: the pool step after the load
  // step marks nothing READY (the state image loaded fine, but the resume it belongs to is undone).
  REQUIRE(t0.plan->restores.size() == 1);
  CHECK(t1.pool.images_ready.empty());
  auto* r = find_request(t1.plan, 1);
  REQUIRE(r);
  CHECK(r->first_position == 0); // back to its HBM point, not the boundary the loads reached
  CHECK(r->reset_state);
  CHECK(t1.plan->restores.empty());

  h.run();
  const auto& res = h.result(1);
  CHECK(res.resume_at == 0);
  CHECK(res.from_cpu == 0);
  CHECK(res.reason.find("host tier load failed (bad_checksum, summed by the scatter on the device)") !=
        std::string::npos);
  CHECK(h.sched.stats().load_failures_total == 1);
  CHECK(h.sched.stats().load_checksum_failures_total == 1);
  CHECK(h.sched.stats().loads_total == 4);
  CHECK(h.sched.stats().prompt_tokens_from_cpu == 0);
  // The watermark went back to 256: the recomputed chunk [256, 512) is stored again.
  auto kv_saves = kv_saves_of(h, 1);
  CHECK(std::count(kv_saves.begin(), kv_saves.end(), 256) == 1);
}

TEST_CASE("scheduling offload: an undone hybrid resume keeps its HBM image pinned and restores it") {
  offload_harness h(hybrid_offload_options());
  h.add(1, 300, 1); // HBM: KV of [0, 256) and a READY state image at 256
  h.run();
  h.sum_loads = true;
  h.corrupt = [](const unit_transfer& l) { return l.kind == kv_kind; }; // every KV chunk sums wrong
  h.add_held(2, 768, 2, host_has(64, 256, 3, {256, 512, 704, 768}, 768));
  const size_t first = h.turns.size();
  REQUIRE(h.turn()); // admission with the HBM hit at 256, and the loads up to 704
  const auto& t0 = h.turns[first];
  REQUIRE(t0.pool_done.results.size() == 1);
  const uint64_t hbm_image = t0.pool_done.results[0].restore_hash;
  REQUIRE(hbm_image != 0);
  REQUIRE(t0.plan);
  REQUIRE_FALSE(t0.plan->loads.empty());
  CHECK_FALSE(find_request(t0.plan, 2));
  REQUIRE(h.turn()); // the pool step after the load step, then the first forward of request 2
  const auto& t1 = h.turns[first + 1];
  for (const auto& u : t1.pool.unpins)
    CHECK(u.hash != hbm_image); // still pinned: the recompute restores it
  auto* r = find_request(t1.plan, 2);
  REQUIRE(r);
  CHECK(r->first_position == 256);
  CHECK_FALSE(r->reset_state);
  REQUIRE(t1.plan->restores.size() == 1);
  CHECK(t1.plan->restores[0].position == 256);
  h.run();
  CHECK(h.result(2).resume_at == 256);
  CHECK(h.result(2).from_cpu == 0);
  CHECK(h.pool.check_invariants().empty());
}

TEST_CASE("scheduling offload: loads whose sums match resume at the boundary, as without sums") {
  offload_harness h(hybrid_offload_options());
  h.sum_loads = true;
  h.add_held(1, 768, 4, host_has(64, 256, 3, {256, 512, 704, 768}, 768));
  h.run();
  CHECK(h.result(1).from_cpu > 0);
  CHECK(h.sched.stats().load_failures_total == 0);
  CHECK(h.sched.stats().loads_total == 4);
}

TEST_CASE("scheduling offload: SPEC C5, a refused load recomputes from the HBM point and saves that chunk again") {
  offload_harness h(hybrid_offload_options());
  h.grant = refusing(
      h, [](const transfer_order& o, bool save) { return !save && o.object.key.kind == kv_kind && o.object.first_token == 256; },
      "bad_checksum");
  h.add_held(1, 768, 4, host_has(64, 256, 3, {256, 512, 704, 768}, 768));

  REQUIRE(h.turn());
  const auto& t0 = h.turns[0];
  REQUIRE(t0.connector);
  REQUIRE(t0.connector->loads.size() == 4);
  // Nothing is issued: the request is not parked and there is nothing else to run.
  CHECK_FALSE(t0.plan);

  REQUIRE(h.turn());
  const auto& t1 = h.turns[1];
  // The granted loads of the request are unpinned in the next connector step, never issued.
  REQUIRE(t1.connector);
  std::vector<object_key> unpinned;
  for (auto& f : t1.connector->finished)
    if (!f.is_save) {
      CHECK(f.ok);
      CHECK(f.request_id == 1);
      unpinned.push_back(f.key);
    }
  CHECK(unpinned == std::vector<object_key>{t0.connector->loads[0].object.key, t0.connector->loads[2].object.key,
                                            t0.connector->loads[3].object.key});
  auto* r = find_request(t1.plan, 1);
  REQUIRE(r);
  CHECK(r->first_position == 0); // its HBM point
  CHECK(r->reset_state);
  CHECK(t1.plan->loads.empty());

  h.run();
  const auto& res = h.result(1);
  CHECK(res.resume_at == 0);
  CHECK(res.from_cpu == 0);
  CHECK(res.reason.find("host tier load failed (bad_checksum)") != std::string::npos);
  CHECK(h.sched.stats().load_failures_total == 1);
  CHECK(h.sched.stats().loads_total == 0);

  // The watermark went back to 256: chunk [256, 512) is stored again, by the step after the one
  // completing it, here the step finishing the prompt at 704 (the lookup said [0, 256) is stored,
  // so that one is not).
  auto kv_saves = kv_saves_of(h, 1);
  CHECK(std::count(kv_saves.begin(), kv_saves.end(), 256) == 1);
  CHECK(std::count(kv_saves.begin(), kv_saves.end(), 0) == 0);
  bool carried = false;
  for (auto& t : h.turns) {
    if (!t.connector || !t.plan)
      continue;
    for (size_t k = 0; k < t.connector->saves.size(); ++k) {
      const auto& s = t.connector->saves[k];
      if (s.object.key.kind != kv_kind || s.object.first_token != 256)
        continue;
      auto* fwd = find_request(t.plan, 1);
      REQUIRE(fwd);
      CHECK(end_of(*fwd) == 704);
      std::vector<int32_t> blocks(fwd->block_table.begin() + 4, fwd->block_table.begin() + 8);
      for (auto& u : t.plan->saves)
        carried |= u.kind == kv_kind && u.units == blocks;
    }
  }
  CHECK(carried);
  // The units reserved for the image at 704 still take it when the forward reaches 704.
  bool copied_704 = false;
  for (auto& t : h.turns)
    if (t.plan)
      for (auto& c : t.plan->checkpoint_copies)
        copied_704 |= c.request_id == 1 && c.position == 704;
  CHECK(copied_704);
}

TEST_CASE("scheduling offload: SPEC C5, a refused load of a dense request recomputes from its HBM hit") {
  offload_harness h(dense_offload_options());
  h.add(1, 300, 1); // HBM holds [0, 288)
  h.run();
  h.grant = refusing(
      h, [](const transfer_order& o, bool save) { return !save && o.object.first_token == 512; }, "missing");
  h.add_held(2, 768, 2, host_has(16, 256, 3, {}, 768));
  const size_t first = h.turns.size();
  h.run();
  auto* r = find_request(h.turns.at(first + 1).plan, 2);
  REQUIRE(r);
  CHECK(r->first_position == 288);
  CHECK(h.result(2).resume_at == 288);
  CHECK(h.result(2).reason.find("host tier load failed (missing): recomputed from token 288") != std::string::npos);
  // The watermark went back to 512: chunk [512, 768) is saved again, [256, 512) is not.
  auto kv_saves = kv_saves_of(h, 2);
  CHECK(std::count(kv_saves.begin(), kv_saves.end(), 512) == 1);
  CHECK(std::count(kv_saves.begin(), kv_saves.end(), 256) == 0);
}

namespace {

// Saves ordered for request `id` in turns where it also ran a forward: forward end → (kind,
// first_token, tokens) of each save, in order.
using save_list = std::vector<std::tuple<uint8_t, int32_t, int32_t>>;
std::map<int32_t, save_list> saves_by_end(const offload_harness& h, uint64_t id) {
  std::map<int32_t, save_list> out;
  for (auto& t : h.turns) {
    auto* r = find_request(t.plan, id);
    if (!r || !t.connector)
      continue;
    for (auto& s : t.connector->saves)
      if (s.request_id == id)
        out[end_of(*r)].emplace_back(s.object.key.kind, s.object.first_token, s.object.tokens);
  }
  return out;
}

scheduler_options hybrid_small_batches() {
  auto o = hybrid_offload_options();
  o.max_batch_tokens = 200;
  return o;
}

} // namespace

TEST_CASE("scheduling offload: SPEC C1/C4, a cold 768-token prompt saves whole chunks, then the anchor, then the rung") {
  // A KV chunk goes out in the first step that starts at or past its end (so its gather runs
  // beside that step's forward), except in the step finishing the prompt, which saves what it
  // computes; an image goes out in the step that copies it.
  offload_harness h(hybrid_small_batches());
  h.add(1, 768, 2);
  h.run();
  std::vector<int32_t> ends;
  for (auto& t : h.turns)
    if (auto* r = find_request(t.plan, 1))
      ends.push_back(end_of(*r));
  CHECK(ends == std::vector<int32_t>{200, 256, 456, 512, 704, 768, 769});
  std::map<int32_t, save_list> want = {
      {456, {{kv_kind, 0, 256}}},
      {704, {{kv_kind, 256, 256}, {state_kind, 0, 704}}},
      {768, {{kv_kind, 512, 256}, {state_kind, 0, 768}}},
  };
  CHECK(saves_by_end(h, 1) == want);

  for (size_t i = 0; i < h.turns.size(); ++i) {
    const auto& t = h.turns[i];
    if (!t.connector || t.connector->saves.empty())
      continue;
    REQUIRE(t.plan);
    CHECK(t.plan->saves.size() == t.connector->saves.size());
    // Keys: the hash of the block ending the object.
    for (auto& s : t.connector->saves)
      CHECK(s.object.key.hash == h.hash_at(1, s.object.first_token + s.object.tokens, 64));
    // Committed only in the connector step after this step's step_done.
    for (auto& f : t.connector->finished)
      for (auto& s : t.connector->saves)
        CHECK_FALSE(f.key == s.object.key);
    REQUIRE(i + 1 < h.turns.size());
    REQUIRE(h.turns[i + 1].connector);
    const auto& finished = h.turns[i + 1].connector->finished;
    for (auto& s : t.connector->saves) {
      bool committed = std::any_of(finished.begin(), finished.end(), [&](const transfer_result& f) {
        return f == transfer_result{1, s.object.key, true, true};
      });
      CHECK(committed);
    }
  }
  CHECK(h.sched.stats().saves_total == 5);
}

TEST_CASE("scheduling offload: the checksums a step's gathers summed go with their commits") {
  offload_harness h(hybrid_small_batches());
  h.sum_saves = true;
  h.add(1, 800, 2);
  h.run();
  int saves = 0;
  for (size_t i = 0; i + 1 < h.turns.size(); ++i) {
    const auto& t = h.turns[i];
    if (!t.connector || t.connector->saves.empty())
      continue;
    REQUIRE(h.turns[i + 1].connector);
    const auto& finished = h.turns[i + 1].connector->finished;
    for (size_t k = 0; k < t.connector->saves.size(); ++k) {
      const auto& key = t.connector->saves[k].object.key;
      auto f = std::find_if(finished.begin(), finished.end(), [&](const transfer_result& r) { return r.key == key; });
      REQUIRE(f != finished.end());
      CHECK(f->summed);
      CHECK(f->checksum == offload_harness::checksum_of(t.connector_done->saves[k].data_offset));
      ++saves;
    }
  }
  CHECK(saves == h.sched.stats().saves_total);
  CHECK(saves > 0);
}

TEST_CASE("scheduling offload: SPEC C1, a 1000-token prompt also saves its last partial chunk [768, 960)") {
  offload_harness h(hybrid_small_batches());
  h.add(1, 1000, 2);
  h.run();
  std::map<int32_t, save_list> want = {
      {456, {{kv_kind, 0, 256}}},
      {712, {{kv_kind, 256, 256}}},
      {960, {{kv_kind, 512, 256}, {state_kind, 0, 960}}}, // the anchor; 1000 is no rung
      {1000, {{kv_kind, 768, 192}}},                       // the step finishing the prompt
  };
  CHECK(saves_by_end(h, 1) == want);
  for (auto& t : h.turns)
    if (t.connector)
      for (auto& s : t.connector->saves)
        if (s.object.first_token == 768) {
          CHECK(s.object.num_blocks == 3);
          CHECK(s.object.key.hash == h.hash_at(1, 960, 64));
        }
}

TEST_CASE("scheduling offload: SPEC C5, a refused save is retried, at most 3 attempts") {
  offload_harness h(hybrid_small_batches());
  SECTION("refused once, granted on the next step, then committed") {
    int refusals = 0;
    h.grant = refusing(
        h,
        [&refusals](const transfer_order& o, bool save) {
          return save && o.object.key.kind == kv_kind && o.object.first_token == 0 && refusals++ == 0;
        },
        "no_space");
    h.add(1, 768, 2);
    h.run();
    std::vector<int32_t> ends_with_first_chunk;
    for (auto& t : h.turns)
      if (t.connector)
        for (auto& s : t.connector->saves)
          if (s.object.key.kind == kv_kind && s.object.first_token == 0)
            ends_with_first_chunk.push_back(end_of(*find_request(t.plan, 1)));
    CHECK(ends_with_first_chunk == std::vector<int32_t>{456, 512});
    CHECK(h.sched.stats().save_failures_total == 1);
    // Once [0, 256) is stored the watermark moves on and every later chunk is saved once.
    CHECK(kv_saves_of(h, 1) == std::vector<int32_t>{0, 0, 256, 512});
  }
  SECTION("\"exists\" is stored already: no retry, the watermark moves on") {
    h.grant = refusing(
        h, [](const transfer_order& o, bool save) { return save && o.object.key.kind == kv_kind && o.object.first_token == 0; },
        "exists");
    h.add(1, 768, 2);
    h.run();
    CHECK(kv_saves_of(h, 1) == std::vector<int32_t>{0, 256, 512});
    CHECK(h.sched.stats().save_failures_total == 0);
  }
  SECTION("always refused: three attempts, then no more") {
    h.grant = refusing(
        h, [](const transfer_order& o, bool save) { return save && o.object.key.kind == kv_kind && o.object.first_token == 0; },
        "no_space");
    h.add(1, 768, 8);
    h.run();
    auto kv_saves = kv_saves_of(h, 1);
    CHECK(std::count(kv_saves.begin(), kv_saves.end(), 0) == 3);
    CHECK(h.sched.stats().save_failures_total == 3);
    // Nothing refused is ever committed.
    for (auto& t : h.turns)
      if (t.connector)
        for (auto& f : t.connector->finished)
          CHECK_FALSE((f.is_save && f.key.kind == kv_kind && f.key.hash == h.hash_at(1, 256, 64)));
  }
}

TEST_CASE("scheduling offload: SPEC C3/B7, after an HBM eviction the plan of loads carries every clear issued") {
  offload_harness h(hybrid_offload_options());
  h.add(1, 768, 2);
  h.run();
  h.sched.request_evict({77, "hbm"}); // drops the READY images at 256, 512, 704 and 768
  h.add_held(2, 768, 2, host_has(64, 256, 3, {256, 512, 704, 768}, 768));
  const size_t first = h.turns.size();
  h.run();
  const auto& t = h.turns.at(first);
  REQUIRE_FALSE(t.pool_done.clears.empty());
  REQUIRE(t.plan);
  CHECK(t.plan->requests.empty());
  CHECK(t.plan->loads.size() == 4);
  auto clears = t.plan->clears;
  for (auto u : t.pool_done.clears)
    CHECK(std::count(clears.begin(), clears.end(), u) == 1);
  CHECK(h.result(2).resume_at == 704);
  CHECK(h.result(2).logits_digest == h.result(1).logits_digest);
}

TEST_CASE("scheduling offload: the pool's units for the host boundary: added to the grow when no rung is there") {
  // interval -1 keeps only the anchor (704); the host tier's image at 512 needs units of its own.
  auto o = hybrid_offload_options();
  o.checkpoint_interval = -1;
  offload_harness h(o);
  h.add_held(1, 768, 2, host_has(64, 256, 3, {256, 512}, 768));
  REQUIRE(h.turn());
  const auto& t = h.turns[0];
  REQUIRE(t.pool.grows.size() == 1);
  std::vector<int32_t> checkpoints;
  for (auto& c : t.pool.grows[0].checkpoints)
    checkpoints.push_back(c.position);
  CHECK(checkpoints == std::vector<int32_t>{512, 704});
  REQUIRE(t.connector);
  REQUIRE(t.connector->loads.size() == 3);
  CHECK(t.connector->loads[2].object.key.kind == state_kind);
  CHECK(t.connector->loads[2].object.tokens == 512);
  h.run();
  CHECK(h.result(1).resume_at == 512);
}

// The second request finds the image at 704 already reserved by the first (COPYING): the pool
// gives it private units for its host-tier image load (block_grow::load_image_position).
TEST_CASE("scheduling offload: two identical hybrid prompts admitted together both resume from the host tier") {
  offload_harness h(hybrid_offload_options());
  h.add_held(1, 768, 2, host_has(64, 256, 3, {256, 512, 704, 768}, 768));
  h.add_held(2, 768, 2, host_has(64, 256, 3, {256, 512, 704, 768}, 768));
  h.run();
  CHECK(h.result(1).resume_at == 704);
  CHECK(h.result(2).resume_at == 704);
  CHECK(h.result(2).from_cpu == 768);
  CHECK(h.result(2).logits_digest == h.result(1).logits_digest);
}

TEST_CASE("scheduling offload: kv_role decides whether loads and saves are ordered at all") {
  SECTION("kv_consumer (no saves): the host hit is loaded, nothing is saved") {
    auto o = hybrid_offload_options();
    o.offload_saves = false;
    offload_harness h(o);
    h.add_held(1, 768, 2, host_has(64, 256, 3, {256, 512, 704, 768}, 768));
    h.add(2, 768, 2, 100); // a cold prompt
    h.run();
    CHECK(h.result(1).resume_at == 704);
    for (auto& t : h.turns)
      if (t.connector)
        CHECK(t.connector->saves.empty());
  }
  SECTION("kv_producer (no loads): the host hit is ignored, the prompt is computed and saved") {
    auto o = hybrid_offload_options();
    o.offload_loads = false;
    offload_harness h(o);
    h.add_held(1, 768, 2, host_has(64, 256, 1, {256}, 256));
    h.run();
    CHECK(h.result(1).resume_at == 0);
    CHECK(h.result(1).from_cpu == 0);
    for (auto& t : h.turns)
      if (t.connector)
        CHECK(t.connector->loads.empty());
    // [0, 256) is stored already: only the later chunks are saved.
    CHECK(kv_saves_of(h, 1) == std::vector<int32_t>{256, 512});
  }
}

TEST_CASE("scheduling offload: images reserved below the host resume point are given back after the load") {
  offload_harness h(hybrid_offload_options());
  h.add_held(1, 768, 2, host_has(64, 256, 3, {256, 512, 704, 768}, 768));
  REQUIRE(h.turn()); // admission: units reserved at 256, 512, 704 (the load's) and 768
  REQUIRE(h.turns[0].pool_done.results.size() == 1);
  auto reserved = h.turns[0].pool_done.results[0].reserved;
  REQUIRE(reserved.size() == 4);
  REQUIRE(h.turn()); // the next pool step, after the load step completed
  const auto& aborts = h.turns[1].pool.image_aborts;
  std::vector<uint64_t> hashes;
  for (const auto& a : aborts) {
    CHECK(a.request_id == 1);
    hashes.push_back(a.hash);
  }
  std::vector<uint64_t> below;
  for (const auto& r : reserved)
    if (r.position < 704)
      below.push_back(r.hash);
  CHECK(hashes == below);
  // Their units came back to the pool in that step, to be cleared.
  for (const auto& r : reserved)
    if (r.position < 704)
      for (auto u : r.units)
        CHECK(std::count(h.turns[1].pool_done.clears.begin(), h.turns[1].pool_done.clears.end(), u) == 1);
  h.run();
  CHECK(h.result(1).resume_at == 704);
  CHECK(h.pool.check_invariants().empty());
}

// --- SPEC D2: a store of granularity "chunk" -----------------------------------------------------

namespace {

// Every object the harness's saves committed (the connector steps' finished saves).
std::vector<object_key> committed_of(const offload_harness& h) {
  std::vector<object_key> out;
  for (auto& t : h.turns)
    if (t.connector)
      for (auto& f : t.connector->finished)
        if (f.is_save && f.ok)
          out.push_back(f.key);
  return out;
}

// A lookup answered by the real offload policy from a store holding `held`, of `granularity`.
std::function<connector_lookup_done(const connector_lookup&)> store_holding(const scheduler_options& o,
                                                                            std::vector<object_key> held,
                                                                            std::string granularity) {
  offload_options po;
  po.namespace_id = o.namespace_id;
  po.block_size = o.block_size;
  po.chunk_size = o.chunk_size;
  offload_policy policy(po);
  return [=](const connector_lookup& l) {
    store_contains_done found;
    found.granularity = granularity;
    for (auto& k : policy.probe(l).keys)
      found.present.push_back(std::find(held.begin(), held.end(), k) != held.end() ? 1 : 0);
    return policy.answer(l, found);
  };
}

// A first run of `first` tokens saves everything into a store of `granularity`; a fresh node (HBM
// empty) then runs `second` tokens whose first `first` tokens are the same, from that store.
struct two_runs {
  offload_harness first_run, second_run;
  two_runs(scheduler_options o, std::string granularity, int32_t first, int32_t second)
      : first_run(o), second_run(o) {
    first_run.granularity = granularity;
    first_run.add(1, first, 2);
    first_run.run();
    second_run.granularity = granularity;
    second_run.add_held(2, second, 2, store_holding(o, committed_of(first_run), granularity));
    second_run.run();
  }
  const completion_result& result() const { return second_run.result(2); }
};

std::vector<int32_t> copies_of(const offload_harness& h, uint64_t id) {
  std::vector<int32_t> out;
  for (auto& t : h.turns)
    if (t.plan)
      for (auto& c : t.plan->checkpoint_copies)
        if (c.request_id == id)
          out.push_back(c.position);
  return out;
}

} // namespace

TEST_CASE("scheduling offload: SPEC D2, a chunk store gets whole chunks and grid images only") {
  offload_harness h(hybrid_small_batches());
  h.granularity = "chunk";
  SECTION("768 tokens: no anchor image at 704; the ladder's copies at 256, 512, 768 are all saved") {
    h.add(1, 768, 2);
    h.run();
    CHECK(copies_of(h, 1) == std::vector<int32_t>{256, 512, 704, 768}); // 704: the HBM anchor
    std::map<int32_t, save_list> want = {
        {256, {{state_kind, 0, 256}}},
        {456, {{kv_kind, 0, 256}}},
        {512, {{state_kind, 0, 512}}},
        {704, {{kv_kind, 256, 256}}},
        {768, {{kv_kind, 512, 256}, {state_kind, 0, 768}}},
    };
    CHECK(saves_by_end(h, 1) == want);
    CHECK(h.sched.stats().saves_total == 6);
  }
  SECTION("1000 tokens: no partial chunk [768, 960), no anchor image at 960") {
    h.add(1, 1000, 2);
    h.run();
    CHECK(copies_of(h, 1) == std::vector<int32_t>{256, 512, 768, 960});
    std::map<int32_t, save_list> want = {
        {256, {{state_kind, 0, 256}}},
        {456, {{kv_kind, 0, 256}}},
        {512, {{state_kind, 0, 512}}},
        {712, {{kv_kind, 256, 256}}},
        {768, {{state_kind, 0, 768}}},
        {960, {{kv_kind, 512, 256}}},
    };
    CHECK(saves_by_end(h, 1) == want);
  }
  // Every save is a whole chunk or an image on the grid.
  for (auto& t : h.turns)
    if (t.connector)
      for (auto& s : t.connector->saves) {
        if (s.object.key.kind == kv_kind) {
          CHECK(s.object.tokens == 256);
        } else {
          CHECK(s.object.tokens % 256 == 0);
        }
      }
}

TEST_CASE("scheduling offload: SPEC D2, resume points from a chunk store after a first run saved everything") {
  auto o = hybrid_offload_options(); // block 64, chunk 256, rungs every 256
  SECTION("768 → 512") {
    two_runs r(o, "chunk", 768, 768);
    CHECK(r.result().resume_at == 512);
    CHECK(r.result().from_cpu == 512);
  }
  SECTION("1000 → 768") {
    two_runs r(o, "chunk", 1000, 1000);
    CHECK(r.result().resume_at == 768);
  }
  SECTION("1300 continuing the 1000-token prompt → 768") {
    two_runs r(o, "chunk", 1000, 1300);
    CHECK(r.result().resume_at == 768);
  }
  SECTION("1050 → 1024") {
    two_runs r(o, "chunk", 1050, 1050);
    CHECK(r.result().resume_at == 1024);
    CHECK(r.result().from_cpu == 1024);
  }
  SECTION("block store (\"\" and \"block\"): 768 → 704 as before") {
    for (std::string g : {"", "block"}) {
      two_runs r(o, g, 768, 768);
      CHECK(r.result().resume_at == 704);
      CHECK(r.result().from_cpu == 768);
    }
  }
  SECTION("the resumed run computes what a cold run computes") {
    two_runs r(o, "chunk", 1000, 1300);
    offload_harness cold(o);
    cold.add(1, 1300, 2);
    cold.run();
    CHECK(r.result().token_ids == cold.result(1).token_ids);
    CHECK(r.result().logits_digest == cold.result(1).logits_digest);
  }
}

TEST_CASE("scheduling offload: SPEC D2, the granularity is learned from each answer, the latest wins") {
  // A lookup says "chunk", every connector step says block: the first save's answer switches the
  // scheduler back, so the 768-token prompt's anchor and partial-free tail are saved block-style.
  offload_harness h(hybrid_small_batches());
  h.sched.add(offload_harness::request_of(1, 768, 2, 1), 0);
  auto out = h.sched.take_outbox();
  REQUIRE(out.lookups.size() == 1);
  connector_lookup_done chunk;
  chunk.request_id = 1;
  chunk.granularity = "chunk";
  h.sched.on_lookup_done(chunk);
  h.run();
  auto saves = saves_by_end(h, 1);
  // The first step's saves were planned in chunk mode (the image at 256); after its answer, block.
  CHECK(saves[256] == save_list{{state_kind, 0, 256}});
  CHECK(saves[456] == save_list{{kv_kind, 0, 256}});
  CHECK(saves[704] == save_list{{kv_kind, 256, 256}, {state_kind, 0, 704}});
}

TEST_CASE("scheduling offload: host_tier_is_store reports the host tier's tokens as from_store") {
  auto o = hybrid_offload_options();
  o.host_tier_is_store = true;
  SECTION("a resume from the store") {
    two_runs r(o, "chunk", 768, 768);
    CHECK(r.result().resume_at == 512);
    CHECK(r.result().from_store == 512);
    CHECK(r.result().from_cpu == 0);
    CHECK(r.result().reason.find("store holds KV up to token 512") == 0);
    CHECK(r.result().reason.find("host tier") == std::string::npos);
    CHECK(r.second_run.sched.stats().prompt_tokens_from_store == 512);
    CHECK(r.second_run.sched.stats().prompt_tokens_from_cpu == 0);
  }
  SECTION("a refused load says store") {
    offload_harness h(o);
    h.grant = refusing(h, [](const transfer_order&, bool save) { return !save; }, "missing");
    h.add_held(1, 768, 2, host_has(64, 256, 3, {256, 512, 704, 768}, 768));
    h.run();
    CHECK(h.result(1).reason.find("store load failed (missing)") == 0);
    CHECK(h.result(1).from_store == 0);
  }
  SECTION("off: the same resume reports from_cpu") {
    two_runs r(hybrid_offload_options(), "chunk", 768, 768);
    CHECK(r.result().from_store == 0);
    CHECK(r.result().from_cpu == 512);
    CHECK(r.result().reason.find("host tier holds KV up to token 512") == 0);
    CHECK(r.second_run.sched.stats().prompt_tokens_from_cpu == 512);
    CHECK(r.second_run.sched.stats().prompt_tokens_from_store == 0);
  }
}

namespace {

bool in_plan(const step_plan& p, uint64_t id) {
  return std::any_of(p.requests.begin(), p.requests.end(), [&](const scheduled_request& r) { return r.request_id == id; });
}

} // namespace

TEST_CASE("scheduling: a request cancelled while its step runs is in no later plan and gives its blocks back") {
  harness h(dense_options());
  h.add(1, 150, 40);
  h.add(2, 30, 40, 50);
  h.drain_outbox();
  h.turn();
  h.turn();
  REQUIRE(in_plan(h.plans.back(), 1));
  const size_t hangup_plan = h.plans.size(); // the plan on the device when the client hangs up
  h.turn([&] { h.sched.cancel(1); });
  REQUIRE(in_plan(h.plans[hangup_plan], 1));
  h.run();
  for (size_t i = hangup_plan + 1; i < h.plans.size(); ++i)
    CHECK_FALSE(in_plan(h.plans[i], 1));
  CHECK(h.results.size() == 1); // only request 2 is answered
  CHECK(h.result(2).token_ids.size() == 40);
  CHECK(h.sched.stats().num_cancelled == 1);
  CHECK(h.sched.stats().num_running == 0);
  // Everything went back: the blocks it computed are cached (committed), none is held.
  CHECK(h.pool.num_held() == 0);
  CHECK(h.pool.num_free() + h.pool.num_cached() == 64);
  CHECK(h.pool.num_cached() > 0);
}

TEST_CASE("scheduling: a request cancelled while waiting or looking up never runs") {
  auto o = dense_options();
  o.max_num_seqs = 1;
  harness h(o);
  h.add(1, 40, 3);
  h.add(2, 40, 3, 60);
  h.drain_outbox();
  h.add(3, 40, 3, 90); // still looking up: its lookup answer arrives after the cancel
  h.sched.cancel(2);   // waiting behind request 1
  h.sched.cancel(3);
  h.run();
  for (auto& p : h.plans) {
    CHECK_FALSE(in_plan(p, 2));
    CHECK_FALSE(in_plan(p, 3));
  }
  REQUIRE(h.results.size() == 1);
  CHECK(h.results[0].request_id == 1);
  CHECK(h.sched.stats().num_cancelled == 2);
  CHECK(h.pool.num_held() == 0);
  h.sched.cancel(1); // finished already: ignored
  h.run();
  CHECK(h.sched.stats().num_cancelled == 2);
}

TEST_CASE("scheduling: beyond max_waiting queued requests a new one is refused as rate_limit_error") {
  auto o = dense_options();
  o.max_waiting = 2;
  harness h(o);
  h.add(1, 40, 3);
  h.add(2, 40, 3);
  h.add(3, 40, 3);
  auto out = h.sched.take_outbox();
  REQUIRE(out.failures.size() == 1);
  CHECK(out.failures[0].request_id == 3);
  CHECK(out.failures[0].type == "rate_limit_error");
  CHECK(out.failures[0].message == "the node has 2 requests waiting (scheduler.max_waiting = 2); retry later");
  CHECK(h.sched.stats().num_rejected == 1);
  for (auto& l : out.lookups)
    h.sched.on_lookup_done({l.request_id, 0, 0, "none", {}, {}, ""});
  h.run();
  CHECK(h.results.size() == 2);
  h.add(4, 40, 3); // running requests do not count: the queue has room again
  h.run();
  CHECK(h.results.size() == 3);
}

TEST_CASE("scheduling: a stop sequence ends the request and is left out of the output and the stream") {
  // The fake device samples (pos * 7 + 3) % 200 at position pos: a 20-token prompt samples
  // 136, 143, 150, 157, ... at positions 19, 20, 21, 22, ...
  auto o = dense_options();
  harness h(o);
  completion_request r;
  r.request_id = 1;
  for (int32_t i = 0; i < 20; ++i)
    r.prompt.push_back(i + 1);
  r.max_tokens = 10;
  r.stream = true;
  r.stop = {{{150, 999}}, {{143, 150, 157}}, {{7}}};
  h.sched.add(r, 0);
  h.run();
  REQUIRE(h.results.size() == 1);
  CHECK(h.results[0].finish_reason == "stop");
  CHECK(h.results[0].token_ids == std::vector<int32_t>{136});
  // 143 and 150 were held back (a stop could start there) and never streamed.
  REQUIRE(h.chunks.size() == 1);
  CHECK(h.chunks[0].token_id == 136);

  // A partial match that does not complete is streamed once it is ruled out or at the end.
  harness g(o);
  r.stop = {{{150, 999}}};
  r.max_tokens = 4;
  g.sched.add(r, 0);
  g.run();
  REQUIRE(g.results.size() == 1);
  CHECK(g.results[0].finish_reason == "length");
  CHECK(g.results[0].token_ids == std::vector<int32_t>{136, 143, 150, 157});
  std::vector<int32_t> streamed;
  for (auto& c : g.chunks)
    streamed.push_back(c.token_id);
  CHECK(streamed == g.results[0].token_ids);
  for (size_t i = 0; i < g.chunks.size(); ++i)
    CHECK(g.chunks[i].index == static_cast<int32_t>(i));
}

TEST_CASE("scheduling: results carry time to first token and the gaps between tokens") {
  harness h(dense_options());
  h.add(1, 20, 4);
  h.run();
  const auto& r = h.result(1);
  CHECK(r.first_token_ms == 1.0); // the fake clock advances 1 ms per step; one prefill step
  CHECK(r.inter_token_ms == std::vector<float>{1.0f, 1.0f, 1.0f});
}

TEST_CASE("scheduling P/D: a prefill's result waits for the step that commits its saves and leases them; "
          "the anchor image is kept with checkpoint_interval = 0") {
  for (bool pd : {true, false}) {
    INFO("pd = " << pd);
    auto o = hybrid_offload_options();
    o.checkpoint_interval = 0;
    o.pd = pd;
    offload_harness h(o);
    auto req = offload_harness::request_of(1, 700, 1, 1);
    req.remote_decode = true;
    h.sched.add(req, h.now);
    h.drain_outbox();
    int result_turn = -1, lease_turn = -1;
    for (int i = 0; i < 50 && h.turn(); ++i)
      if (result_turn < 0 && !h.results.empty())
        result_turn = static_cast<int>(h.turns.size()) - 1;
    REQUIRE(result_turn >= 0);
    std::vector<int32_t> image_saves;
    for (size_t t = 0; t < h.turns.size(); ++t) {
      const auto& c = h.turns[t].connector;
      if (!c)
        continue;
      for (const auto& s : c->saves)
        if (s.object.key.kind == static_cast<uint8_t>(object_kind::state_image))
          image_saves.push_back(s.object.tokens);
      if (!c->leases.empty()) {
        lease_turn = static_cast<int>(t);
        REQUIRE(c->leases.size() == 1);
        CHECK(c->leases[0].request_id == 1);
        CHECK(c->leases[0].num_prompt_tokens == 700);
        CHECK(c->leases[0].hashes.size() == 700 / 64);
        CHECK(c->leases[0].hashes == std::vector<uint64_t>(h.lookups.at(1).hashes.begin(),
                                                          h.lookups.at(1).hashes.begin() + 700 / 64));
        // The commits of the last step's saves travel in the same step, ahead of the lease.
        int32_t commits = 0;
        for (const auto& f : c->finished)
          commits += f.is_save && f.ok;
        CHECK(commits > 0);
      }
    }
    if (pd) {
      CHECK(lease_turn == result_turn); // the answer goes out with the lease's connector step answer
      CHECK(image_saves == std::vector<int32_t>{640}); // the anchor, floor_64(699)
    } else {
      CHECK(lease_turn == -1);
      CHECK(image_saves.empty()); // checkpoint_interval = 0: no image for itself
    }
  }
}
