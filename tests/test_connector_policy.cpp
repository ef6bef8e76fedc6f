#include <catch.hpp>

#include <stdexcept>
#include <string>
#include <vector>

#include "messages/compare.hpp"
#include "runtime/connector_policy.hpp"

using namespace ordo;

namespace {

constexpr uint64_t ns = 0xabc;
constexpr uint8_t kv = static_cast<uint8_t>(object_kind::kv_chunk);

offload_options options_64() {
  offload_options o;
  o.namespace_id = ns;
  o.block_size = 64;
  o.chunk_size = 256;
  return o;
}

connector_lookup lookup_of(int32_t num_blocks) {
  connector_lookup l;
  l.request_id = 9;
  for (int32_t j = 1; j <= num_blocks; ++j)
    l.hashes.push_back(1000 + static_cast<uint64_t>(j));
  l.num_prompt_tokens = num_blocks * 64;
  return l;
}

transfer_order order(uint64_t request_id, uint64_t hash) {
  return {request_id, {{ns, hash, kv}, 0, 256, 4, 2560}};
}

connector_step step_with_orders() {
  connector_step s;
  s.header = {1, 3};
  s.loads.push_back(order(5, 1004));
  s.saves.push_back(order(6, 1008));
  return s;
}

} // namespace

TEST_CASE("connector policy none: a lookup answers 0 tokens under its name without asking the store") {
  auto none = make_connector_policy("none", std::nullopt);
  auto l = lookup_of(8);
  CHECK_FALSE(none->lookup(l).has_value());
  auto done = none->lookup_answered(l, {});
  CHECK(done.request_id == 9);
  CHECK(done.cpu_tokens == 0);
  CHECK(done.store_tokens == 0);
  CHECK(done.connector == "none");
  CHECK(done.cpu_chunks.empty());
}

TEST_CASE("connector policy none: a step never reaches the store and refuses every load and save") {
  auto none = make_connector_policy("none", std::nullopt);
  auto s = step_with_orders();
  CHECK_FALSE(none->step(s).has_value());
  auto done = none->step_answered(s, {});
  CHECK(done.header.seq == 3);
  REQUIRE(done.loads.size() == 1);
  CHECK(done.loads[0].request_id == 5);
  CHECK_FALSE(done.loads[0].ok);
  CHECK(done.loads[0].status == "connector none holds nothing");
  REQUIRE(done.saves.size() == 1);
  CHECK(done.saves[0].request_id == 6);
  CHECK_FALSE(done.saves[0].ok);
  CHECK(done.saves[0].status == "connector none stores nothing");
  CHECK(done.num_evicted == 0);
}

TEST_CASE("connector policy offload: a lookup probes the store, an empty one answers at once") {
  auto offload = make_connector_policy("offload", options_64());
  auto probe = offload->lookup(lookup_of(4));
  REQUIRE(probe.has_value());
  CHECK(probe->keys.size() == 8);
  CHECK_FALSE(offload->lookup(lookup_of(0)).has_value());
  CHECK(offload->lookup_answered(lookup_of(0), {}).connector == "offload");

  store_contains_done found;
  found.present = {0, 0, 0, 0, 0, 0, 1, 0}; // the KV chunk filed under block 4
  auto done = offload->lookup_answered(lookup_of(4), found);
  CHECK(done.cpu_tokens == 256);
}

TEST_CASE("connector policy offload: every step, even an empty one, goes to the store; grants follow its answer") {
  auto offload = make_connector_policy("offload", options_64());
  connector_step empty;
  empty.header = {1, 2};
  CHECK(offload->step(empty).has_value()); // its answer carries the store's stats

  auto s = step_with_orders();
  auto to_store = offload->step(s);
  REQUIRE(to_store.has_value());
  CHECK(to_store->pins.size() == 1);
  CHECK(to_store->reserves.size() == 1);
  store_step_done answer;
  answer.header = s.header;
  answer.pins.push_back({s.loads[0].object.key, true, "ok", 128, 2560});
  answer.reserves.push_back({s.saves[0].object.key, false, "no_space", 0, 0});
  auto done = offload->step_answered(s, answer);
  REQUIRE(done.loads.size() == 1);
  CHECK(done.loads[0].ok);
  CHECK(done.loads[0].data_offset == 128);
  REQUIRE(done.saves.size() == 1);
  CHECK(done.saves[0].status == "no_space");
  CHECK_THROWS_AS(offload->step_answered(s, store_step_done{}), std::logic_error);
}
