#include <catch.hpp>

#include <algorithm>
#include <cstring>
#include <future>
#include <mutex>
#include <string>
#include <vector>

#include "messages/store.hpp"
#include "runtime/checksum.hpp"
#include "runtime/step_executor.hpp"

using namespace ordo;

namespace {

model_options tiny_dense() {
  model_options o;
  o.preset = model_preset::dense;
  o.block_size = 16;
  o.num_blocks = 32;
  o.max_batch_tokens = 64;
  o.max_state_slots = 4;
  return o;
}

scheduled_request prefill(uint64_t id, int32_t len, std::vector<int32_t> blocks) {
  scheduled_request r;
  r.request_id = id;
  for (int32_t i = 0; i < len; ++i)
    r.token_ids.push_back((i * 13 + static_cast<int32_t>(id)) % 256);
  r.block_table = std::move(blocks);
  r.sample = true;
  return r;
}

step_done run(step_executor& exec, const step_plan& plan) {
  std::promise<step_done> done;
  exec.execute(plan, [&](step_done d) { done.set_value(std::move(d)); });
  return done.get_future().get();
}

} // namespace

TEST_CASE("step executor: a plan runs on the device and reports tokens and logits digests") {
  auto dev = make_cpu_device({});
  model m(tiny_dense(), *dev);
  step_executor exec(*dev, m, {64, 4});
  step_plan plan;
  plan.header = {1, 1};
  plan.requests.push_back(prefill(1, 20, {3, 7}));
  auto done = run(exec, plan);
  CHECK(done.header == plan.header);
  REQUIRE(done.samples.size() == 1);
  CHECK(done.samples[0].request_id == 1);
  CHECK(done.samples[0].position == 19);
  CHECK(done.samples[0].logits_digest != 0);

  // The same request in other blocks, batched behind another one: the same token and digest.
  step_plan batched;
  batched.header = {1, 2};
  batched.requests.push_back(prefill(2, 30, {0, 1}));
  batched.requests.push_back(prefill(1, 20, {10, 11}));
  auto again = run(exec, batched);
  REQUIRE(again.samples.size() == 2);
  CHECK(again.samples[1].request_id == 1);
  CHECK(again.samples[1].token_id == done.samples[0].token_id);
  CHECK(again.samples[1].logits_digest == done.samples[0].logits_digest);
  CHECK(again.samples[0].logits_digest != done.samples[0].logits_digest);
}

TEST_CASE("step executor: a plan that does not fit is refused before anything is enqueued") {
  auto dev = make_cpu_device({});
  model m(tiny_dense(), *dev);
  step_executor exec(*dev, m, {64, 4});
  auto refuse = [&](step_plan plan, const std::string& needle) {
    plan.header = {1, 1};
    bool called = false;
    try {
      exec.execute(plan, [&](step_done) { called = true; });
      FAIL("accepted a bad plan");
    } catch (const std::invalid_argument& e) {
      CHECK(std::string(e.what()).find(needle) != std::string::npos);
    }
    dev->synchronize();
    CHECK_FALSE(called);
  };
  step_plan short_table;
  short_table.requests.push_back(prefill(1, 20, {3}));
  refuse(short_table, "does not cover position 19");
  step_plan too_many;
  too_many.requests.push_back(prefill(1, 40, {0, 1, 2}));
  too_many.requests.push_back(prefill(2, 40, {4, 5, 6}));
  refuse(too_many, "max_batch_tokens");
  step_plan bad_token;
  bad_token.requests.push_back(prefill(1, 4, {0}));
  bad_token.requests[0].token_ids[2] = 999;
  refuse(bad_token, "token 999");
  step_plan bad_block;
  bad_block.requests.push_back(prefill(1, 4, {32}));
  refuse(bad_block, "block 32");
}

namespace {

// Blocks `a` and `b` of every page field hold the same bytes.
bool same_blocks(const model& m, int32_t a, int32_t b) {
  for (const auto& f : m.kv_fields()) {
    auto* base = static_cast<const uint8_t*>(f.region);
    if (std::memcmp(base + static_cast<size_t>(a) * f.block_bytes(), base + static_cast<size_t>(b) * f.block_bytes(),
                    f.block_bytes()) != 0)
      return false;
  }
  return true;
}

// Saves the KV of blocks 0-3 (computed by a prefill) into the host arena, then, `rounds` times,
// gives blocks 4-7 back (clears) and loads the object into them in the same plan. Returns how
// many rounds ended with blocks 4-7 equal to blocks 0-3.
int save_then_clear_and_load(bool drop_clear_load_edge, uint64_t chaos_seed, int rounds) {
  auto dev = make_cpu_device({chaos_seed, 2000});
  model m(tiny_dense(), *dev);
  size_t unit_bytes = 0;
  for (const auto& f : m.kv_fields())
    unit_bytes += f.block_bytes();
  const size_t arena_bytes = 4 * unit_bytes;
  auto* arena = static_cast<uint8_t*>(dev->alloc_host_pinned(arena_bytes));
  step_executor_options o{64, 4};
  o.drop_edge = drop_clear_load_edge ? fault_edge::clear_load : fault_edge::none;
  o.host_arena = arena;
  o.host_arena_bytes = arena_bytes;
  int equal = 0;
  {
    step_executor exec(*dev, m, o);
    step_plan save;
    save.header = {1, 1};
    save.requests.push_back(prefill(1, 64, {0, 1, 2, 3}));
    save.saves.push_back({1, static_cast<uint8_t>(object_kind::kv_chunk), 0, arena_bytes, {0, 1, 2, 3}});
    run(exec, save);
    for (int i = 0; i < rounds; ++i) {
      step_plan load; // no forward: the request is parked on its load
      load.header = {1, static_cast<uint64_t>(2 + i)};
      load.clears = {4, 5, 6, 7};
      load.loads.push_back({2, static_cast<uint8_t>(object_kind::kv_chunk), 0, arena_bytes, {4, 5, 6, 7}});
      run(exec, load);
      bool all = true;
      for (int32_t b = 0; b < 4; ++b)
        all = all && same_blocks(m, b, 4 + b);
      equal += all ? 1 : 0;
    }
  }
  dev->free_host_pinned(arena);
  return equal;
}

} // namespace

TEST_CASE("step executor: a save gathers a chunk object and a load scatters it back, after the clears") {
  CHECK(save_then_clear_and_load(false, 0, 1) == 1);
  CHECK(save_then_clear_and_load(false, 17, 6) == 6);
  // The seed's bug planted: without the load stream's wait for the clears, chaos lets a clear
  // land after the load into the same unit, and the loaded bytes are lost.
  CHECK(save_then_clear_and_load(true, 17, 6) < 6);
}

namespace {

// The tiny dense model on a CPU device, with a pinned host arena of `units` page units.
struct host_tier {
  std::unique_ptr<device> dev = make_cpu_device({});
  model m{tiny_dense(), *dev};
  size_t unit_bytes = 0;
  uint8_t* arena = nullptr;
  step_executor_options o{64, 4};
  explicit host_tier(size_t units) {
    for (const auto& f : m.kv_fields())
      unit_bytes += f.block_bytes();
    arena = static_cast<uint8_t*>(dev->alloc_host_pinned(units * unit_bytes));
    o.host_arena = arena;
    o.host_arena_bytes = units * unit_bytes;
  }
  ~host_tier() { dev->free_host_pinned(arena); }
};

} // namespace

TEST_CASE("step executor: each save's object checksum comes back in step_done, summed by its gather") {
  host_tier t(5);
  const size_t unit_bytes = t.unit_bytes;
  uint8_t* const arena = t.arena;
  {
    step_executor exec(*t.dev, t.m, t.o);
    step_plan save;
    save.header = {1, 1};
    save.requests.push_back(prefill(1, 48, {0, 1, 2}));
    const auto kv = static_cast<uint8_t>(object_kind::kv_chunk);
    save.saves.push_back({1, kv, 0, 2 * unit_bytes, {0, 1}});
    save.saves.push_back({1, kv, 2 * unit_bytes, 3 * unit_bytes, {2, 1, 0}});
    const step_done done = run(exec, save);
    REQUIRE(done.save_checksums.size() == 2);
    CHECK(done.save_checksums[0] == object_checksum(arena, 2 * unit_bytes));
    CHECK(done.save_checksums[1] == object_checksum(arena + 2 * unit_bytes, 3 * unit_bytes));
    CHECK(done.save_checksums[0] != done.save_checksums[1]);
    // A step without saves reports none (the sums of the step before do not leak into it).
    step_plan next;
    next.header = {1, 2};
    next.requests.push_back(prefill(2, 16, {5}));
    CHECK(run(exec, next).save_checksums.empty());
  }
}

TEST_CASE("step executor: a load skips blocks marked -1 (shared from the HBM index)") {
  host_tier t(2);
  const size_t unit_bytes = t.unit_bytes;
  uint8_t* const arena = t.arena;
  const model& m = t.m;
  {
    step_executor exec(*t.dev, t.m, t.o);
    step_plan save;
    save.header = {1, 1};
    save.requests.push_back(prefill(1, 32, {0, 1}));
    save.saves.push_back({1, static_cast<uint8_t>(object_kind::kv_chunk), 0, 2 * unit_bytes, {0, 1}});
    run(exec, save);
    step_plan load;
    load.header = {1, 2};
    load.loads.push_back({2, static_cast<uint8_t>(object_kind::kv_chunk), 0, 2 * unit_bytes, {-1, 9}});
    // The scatter's sum covers the whole object, the skipped block's host bytes too.
    CHECK(run(exec, load).load_checksums == std::vector<uint64_t>{object_checksum(arena, 2 * unit_bytes)});
    CHECK(same_blocks(m, 1, 9));
    CHECK_FALSE(same_blocks(m, 0, 8)); // block 8 was never written
    // A transfer that does not fit the arena or names a bad unit is refused.
    step_plan bad;
    bad.header = {1, 3};
    bad.loads.push_back({2, static_cast<uint8_t>(object_kind::kv_chunk), unit_bytes, 2 * unit_bytes, {4, 5}});
    CHECK_THROWS_WITH(exec.execute(bad, [](step_done) {}), Catch::Contains("do not fit the host arena"));
    bad.loads[0] = {2, static_cast<uint8_t>(object_kind::kv_chunk), 0, unit_bytes, {-2}};
    CHECK_THROWS_WITH(exec.execute(bad, [](step_done) {}), Catch::Contains("names unit -2"));
  }
}

namespace {

// Collects what the executor reports, from any thread.
struct op_collector : device_op_sink {
  std::mutex mu;
  std::vector<device_op> ops;
  uint64_t record_device_op(const command_header&, const device_op& op) override {
    std::lock_guard<std::mutex> lock(mu);
    ops.push_back(op);
    return ops.size();
  }
};

std::vector<std::string> enqueued(op_collector& c) {
  std::vector<std::string> out;
  for (const auto& op : c.ops)
    if (op.op != device_op_kind::done)
      out.push_back(std::string(to_string(op.op)) + "@" + std::to_string(op.stream));
  return out;
}

} // namespace

TEST_CASE("step executor: every device operation is reported in enqueue order, and its completion") {
  for (auto drop : {fault_edge::none, fault_edge::upload_compute}) {
    auto dev = make_cpu_device({});
    model m(tiny_dense(), *dev);
    op_collector sink;
    step_executor_options o{64, 4};
    o.ops = &sink;
    o.drop_edge = drop;
    step_executor exec(*dev, m, o);
    step_plan plan;
    plan.header = {1, 1};
    plan.requests.push_back(prefill(1, 20, {3, 7}));
    run(exec, plan);
    dev->synchronize();
    std::vector<std::string> want = {"upload@1", "event_record@1", "event_wait@0", "forward@0", "output_copy@0",
                                     "complete@0"};
    if (drop == fault_edge::upload_compute)
      want.erase(want.begin() + 2); // the forward no longer waits for the inputs
    CHECK(enqueued(sink) == want);
    int done = 0;
    for (const auto& op : sink.ops) {
      if (op.op == device_op_kind::done) {
        ++done;
        CHECK(op.op_seq >= 1);
      }
      if (op.op == device_op_kind::forward) {
        CHECK(op.units_read == std::vector<int32_t>{3, 7});
        CHECK(op.units_written == std::vector<int32_t>{3, 7});
        CHECK(op.tokens == 20);
        CHECK(op.reads_inputs);
      }
      if (op.op == device_op_kind::upload)
        CHECK(op.writes_inputs);
    }
    CHECK(done == 3); // upload, forward, output copy
  }
}

TEST_CASE("step executor: a save waits for the forward only when the step writes one of its units") {
  // The same prefill of blocks 3 and 7, with a save of those blocks (it must wait for the forward)
  // or of blocks 9 and 10, which the step leaves alone (it waits only for the uploaded unit ids,
  // is enqueued before the forward and runs beside it). Either way the step completes after the save, and the saved
  // object holds the blocks as the step left them.
  for (bool written : {true, false}) {
    host_tier t(2);
    op_collector sink;
    t.o.ops = &sink;
    step_executor exec(*t.dev, t.m, t.o);
    step_plan first; // fills blocks 9 and 10
    first.header = {1, 1};
    first.requests.push_back(prefill(2, 32, {9, 10}));
    run(exec, first);
    step_plan plan;
    plan.header = {1, 2};
    plan.requests.push_back(prefill(1, 20, {3, 7}));
    const std::vector<int32_t> saved = written ? std::vector<int32_t>{3, 7} : std::vector<int32_t>{9, 10};
    plan.saves.push_back({1, static_cast<uint8_t>(object_kind::kv_chunk), 0, 2 * t.unit_bytes, saved});
    {
      std::lock_guard<std::mutex> lock(sink.mu);
      sink.ops.clear();
    }
    const step_done done = run(exec, plan);
    t.dev->synchronize();
    const auto kinds = enqueued(sink);
    // The save stream's wait: on an event recorded on compute after the forward, or on the upload's.
    uint64_t waited = 0;
    int recorded_on = -1;
    for (const auto& op : sink.ops)
      if (op.op == device_op_kind::event_wait && op.stream == static_cast<uint8_t>(stream_kind::save))
        waited = op.event_id;
    bool after_forward = false, forward_seen = false;
    for (const auto& op : sink.ops) {
      forward_seen = forward_seen || op.op == device_op_kind::forward;
      if (op.op == device_op_kind::event_record && op.event_id == waited) {
        recorded_on = op.stream;
        after_forward = forward_seen;
      }
    }
    REQUIRE(waited != 0);
    CHECK(recorded_on == static_cast<int>(written ? stream_kind::compute : stream_kind::load));
    CHECK(after_forward == written);
    // The completion waits for the save stream in both cases.
    const auto save_at = std::find(kinds.begin(), kinds.end(), "save@2");
    REQUIRE(save_at != kinds.end());
    // A save of units the step leaves alone is enqueued before the forward (its gather runs beside
    // the forward's kernels); one of units the step writes, after it.
    const auto forward_at = std::find(kinds.begin(), kinds.end(), "forward@0");
    REQUIRE(forward_at != kinds.end());
    CHECK((save_at < forward_at) == !written);
    CHECK(std::find(save_at, kinds.end(), "event_record@2") != kinds.end());
    CHECK(kinds.back() == "complete@0");
    // The object holds the saved blocks' bytes, field by field, as the step left them.
    REQUIRE(done.save_checksums.size() == 1);
    CHECK(done.save_checksums[0] == object_checksum(t.arena, 2 * t.unit_bytes));
    size_t at = 0;
    bool same = true;
    for (const auto& f : t.m.kv_fields())
      for (int32_t u : saved) { // segment-major: each field's blocks in turn (runtime/kv_codec.hpp)
        const auto* base = static_cast<const uint8_t*>(f.region);
        same = same && std::memcmp(base + static_cast<size_t>(u) * f.block_bytes(), t.arena + at, f.block_bytes()) == 0;
        at += f.block_bytes();
      }
    CHECK(same);
  }
}
