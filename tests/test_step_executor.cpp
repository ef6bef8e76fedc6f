#include <catch.hpp>

#include <future>

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
  step_executor exec(*dev, m, {64, 4, false});
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
  step_executor exec(*dev, m, {64, 4, false});
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
