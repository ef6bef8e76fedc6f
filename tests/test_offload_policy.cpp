#include <catch.hpp>

#include <stdexcept>
#include <string>
#include <vector>

#include "messages/compare.hpp"
#include "runtime/offload_policy.hpp"

using namespace ordo;

namespace {

constexpr uint64_t ns = 0xabc;
constexpr uint8_t kv = static_cast<uint8_t>(object_kind::kv_chunk);
constexpr uint8_t state = static_cast<uint8_t>(object_kind::state_image);

// Block 64, chunk 256: four blocks per chunk, as in the SPEC C3 seed case.
offload_options options_64() {
  offload_options o;
  o.namespace_id = ns;
  o.block_size = 64;
  o.chunk_size = 256;
  o.name = "offload";
  return o;
}

// A lookup of `num_blocks` full blocks with recognisable hashes (block j, 1-based, → 1000 + j).
connector_lookup lookup_of(int32_t num_blocks, uint64_t request_id = 9) {
  connector_lookup l;
  l.request_id = request_id;
  for (int32_t j = 1; j <= num_blocks; ++j)
    l.hashes.push_back(1000 + static_cast<uint64_t>(j));
  l.num_prompt_tokens = num_blocks * 64;
  return l;
}

// The store's answer to probe(lookup): KV present at the 1-based blocks in `kv_at`, state images at
// those in `state_at`.
store_contains_done found(int32_t num_blocks, std::vector<int32_t> kv_at, std::vector<int32_t> state_at) {
  store_contains_done d;
  d.present.assign(2 * static_cast<size_t>(num_blocks), 0);
  for (auto j : kv_at)
    d.present[2 * static_cast<size_t>(j - 1)] = 1;
  for (auto j : state_at)
    d.present[2 * static_cast<size_t>(j - 1) + 1] = 1;
  return d;
}

object_ref ref(uint64_t hash, uint8_t kind, int32_t first, int32_t tokens) {
  return {{ns, hash, kind}, first, tokens, tokens / 64, static_cast<uint64_t>(tokens) * 10};
}

} // namespace

TEST_CASE("offload_policy: a probe asks for the KV object then the state image of every full block") {
  offload_policy p(options_64());
  auto keys = p.probe(lookup_of(3)).keys;
  std::vector<object_key> want = {{ns, 1001, kv}, {ns, 1001, state}, {ns, 1002, kv},
                                  {ns, 1002, state}, {ns, 1003, kv}, {ns, 1003, state}};
  CHECK(keys == want);
  CHECK(p.kv_key(5) == object_key{ns, 5, kv});
  CHECK(p.state_key(5) == object_key{ns, 5, state});
}

TEST_CASE("offload_policy: whole chunks from token 0, each filed under the hash of its last block") {
  offload_policy p(options_64());
  auto l = lookup_of(12); // a 768-token prompt
  auto a = p.answer(l, found(12, {4, 8, 12}, {4, 8, 11, 12}));
  CHECK(a.request_id == 9);
  CHECK(a.connector == "offload");
  CHECK(a.cpu_tokens == 768);
  std::vector<kv_object> chunks = {{0, 4, 1004}, {4, 4, 1008}, {8, 4, 1012}};
  CHECK(a.cpu_chunks == chunks);
  CHECK(a.cpu_state_positions == std::vector<int32_t>{256, 512, 704, 768});
}

TEST_CASE("offload_policy: after the whole chunks, at most one partial chunk on the chunk grid") {
  offload_policy p(options_64());
  SECTION("the last partial chunk of a 1000-token prompt: blocks [12, 15)") {
    auto a = p.answer(lookup_of(15), found(15, {4, 8, 12, 15}, {15}));
    CHECK(a.cpu_tokens == 960);
    std::vector<kv_object> chunks = {{0, 4, 1004}, {4, 4, 1008}, {8, 4, 1012}, {12, 3, 1015}};
    CHECK(a.cpu_chunks == chunks);
    CHECK(a.cpu_state_positions == std::vector<int32_t>{960});
  }
  SECTION("the longest partial object wins, and nothing follows a partial chunk") {
    // Chunk [4, 8) is missing; [4, 6) and [4, 7) are partial objects; [8, 12) must not count.
    auto a = p.answer(lookup_of(12), found(12, {4, 6, 7, 12}, {}));
    CHECK(a.cpu_tokens == 7 * 64);
    std::vector<kv_object> chunks = {{0, 4, 1004}, {4, 3, 1007}};
    CHECK(a.cpu_chunks == chunks);
  }
  SECTION("a prompt shorter than one chunk") {
    auto a = p.answer(lookup_of(3), found(3, {3}, {}));
    CHECK(a.cpu_tokens == 192);
    CHECK(a.cpu_chunks == std::vector<kv_object>{{0, 3, 1003}});
  }
}

TEST_CASE("offload_policy: a gap stops the KV coverage, state positions are listed regardless") {
  offload_policy p(options_64());
  SECTION("chunk [256, 512) missing") {
    auto a = p.answer(lookup_of(12), found(12, {4, 12}, {4, 8, 12}));
    CHECK(a.cpu_tokens == 256);
    CHECK(a.cpu_chunks == std::vector<kv_object>{{0, 4, 1004}});
    CHECK(a.cpu_state_positions == std::vector<int32_t>{256, 512, 768});
  }
  SECTION("nothing at token 0") {
    auto a = p.answer(lookup_of(12), found(12, {8, 12}, {}));
    CHECK(a.cpu_tokens == 0);
    CHECK(a.cpu_chunks.empty());
  }
  SECTION("an answer of the wrong length is a miss") {
    auto f = found(12, {4, 8, 12}, {4});
    f.present.pop_back();
    auto a = p.answer(lookup_of(12), f);
    CHECK(a.cpu_tokens == 0);
    CHECK(a.cpu_chunks.empty());
    CHECK(a.cpu_state_positions.empty());
  }
}

TEST_CASE("offload_policy: chunk_size must be a positive multiple of block_size") {
  auto o = options_64();
  o.chunk_size = 200;
  CHECK_THROWS_AS(offload_policy(o), std::invalid_argument);
}

TEST_CASE("offload_policy: kv_role kv_producer neither probes nor finds anything") {
  auto o = options_64();
  o.loads = false;
  offload_policy p(o);
  CHECK(p.probe(lookup_of(12)).keys.empty());
  auto a = p.answer(lookup_of(12), found(12, {4, 8, 12}, {4, 8, 12}));
  CHECK(a.cpu_tokens == 0);
  CHECK(a.cpu_chunks.empty());
  CHECK(a.cpu_state_positions.empty());
  CHECK(p.answer(lookup_of(12), {}).cpu_tokens == 0); // what the actor passes for an empty probe

  connector_step step;
  step.header = {1, 4};
  step.loads.push_back({9, ref(1004, kv, 0, 256)});
  step.saves.push_back({9, ref(1008, kv, 256, 256)});
  auto ss = p.to_store(step);
  CHECK(ss.pins.empty());
  REQUIRE(ss.reserves.size() == 1);
  store_step_done done;
  done.header = ss.header;
  done.reserves.push_back({ss.reserves[0].key, true, "ok", 4096, 2560});
  auto cd = p.from_store(step, done);
  REQUIRE(cd.loads.size() == 1);
  CHECK_FALSE(cd.loads[0].ok);
  CHECK(cd.loads[0].request_id == 9);
  CHECK(cd.loads[0].key == step.loads[0].object.key);
  CHECK(cd.loads[0].status.find("kv_producer") != std::string::npos);
  REQUIRE(cd.saves.size() == 1);
  CHECK(cd.saves[0].ok);
}

TEST_CASE("offload_policy: kv_role kv_consumer loads but refuses every reserve, naming the role") {
  auto o = options_64();
  o.saves = false;
  offload_policy p(o);
  CHECK(p.probe(lookup_of(2)).keys.size() == 4);
  connector_step step;
  step.header = {1, 2};
  step.loads.push_back({9, ref(1004, kv, 0, 256)});
  step.saves.push_back({9, ref(1008, kv, 256, 256)});
  step.saves.push_back({9, ref(1011, state, 0, 704)});
  auto ss = p.to_store(step);
  CHECK(ss.reserves.empty());
  REQUIRE(ss.pins.size() == 1);
  store_step_done done;
  done.header = ss.header;
  done.pins.push_back({ss.pins[0].key, true, "ok", 0, 2560});
  auto cd = p.from_store(step, done); // no reserve answers: none was asked for
  REQUIRE(cd.saves.size() == 2);
  for (size_t i = 0; i < 2; ++i) {
    CHECK_FALSE(cd.saves[i].ok);
    CHECK(cd.saves[i].key == step.saves[i].object.key);
    CHECK(cd.saves[i].status.find("kv_consumer") != std::string::npos);
  }
  REQUIRE(cd.loads.size() == 1);
  CHECK(cd.loads[0].ok);
}

TEST_CASE("offload_policy: a connector step becomes a store step: commits, aborts, unpins, pins, reserves") {
  offload_policy p(options_64());
  connector_step step;
  step.header = {3, 17};
  object_key saved{ns, 1004, kv}, failed{ns, 1008, kv}, loaded{ns, 1011, state}, saved_state{ns, 1012, state};
  step.finished = {{1, saved, true, true}, {2, failed, true, false}, {1, loaded, false, true},
                   {2, saved_state, true, true}};
  step.loads = {{5, ref(1004, kv, 0, 256)}, {5, ref(1011, state, 0, 704)}};
  step.saves = {{6, ref(1008, kv, 256, 256)}};
  auto ss = p.to_store(step);
  CHECK(ss.header == command_header{3, 17});
  CHECK(ss.commits == std::vector<object_key>{saved, saved_state});
  CHECK(ss.aborts == std::vector<object_key>{failed});
  CHECK(ss.unpins == std::vector<object_key>{loaded});
  CHECK(ss.pins == std::vector<object_ref>{step.loads[0].object, step.loads[1].object});
  CHECK(ss.reserves == std::vector<object_ref>{step.saves[0].object});
  CHECK(ss.commit_checksums.empty()); // nothing summed: the store hashes each commit
}

TEST_CASE("offload_policy: a node whose scatters sum pins without hashing; a corrupt load is dropped") {
  auto o = options_64();
  o.loads_summed = true;
  offload_policy p(o);
  connector_step step;
  object_key a{ns, 1004, kv}, b{ns, 1011, state};
  step.finished = {{1, a, false, true}, {1, b, false, true, false, 0, /*corrupt=*/true}};
  step.loads = {{5, ref(1004, kv, 0, 256)}};
  auto ss = p.to_store(step);
  CHECK(ss.pins_summed);
  CHECK(ss.unpins == std::vector<object_key>{a});
  CHECK(ss.unpins_corrupt == std::vector<object_key>{b});
  store_step_done done;
  store_grant g;
  g.key = step.loads[0].object.key;
  g.ok = true, g.status = "ok", g.data_offset = 64, g.data_bytes = 100, g.checksum = 0x1234;
  done.pins = {g};
  auto cd = p.from_store(step, done);
  REQUIRE(cd.loads.size() == 1);
  CHECK(cd.loads[0].summed);
  CHECK(cd.loads[0].checksum == 0x1234);
  // Without sums the store hashes and the grant asks nothing of the step.
  offload_policy plain(options_64());
  CHECK_FALSE(plain.to_store(step).pins_summed);
  CHECK_FALSE(plain.from_store(step, done).loads[0].summed);
}

TEST_CASE("offload_policy: commits carry the gathers' checksums only when every commit has one") {
  offload_policy p(options_64());
  connector_step step;
  object_key a{ns, 1004, kv}, b{ns, 1012, state}, failed{ns, 1008, kv};
  step.finished = {{1, a, true, true, true, 0xaa}, {2, failed, true, false}, {1, b, true, true, true, 0xbb}};
  auto ss = p.to_store(step);
  CHECK(ss.commits == std::vector<object_key>{a, b});
  CHECK(ss.commit_checksums == std::vector<uint64_t>{0xaa, 0xbb});
  step.finished[2].summed = false; // one the store must hash: it hashes them all
  CHECK(p.to_store(step).commit_checksums.empty());
}

TEST_CASE("offload_policy: the store's answers become grants in order; a short answer throws") {
  offload_policy p(options_64());
  connector_step step;
  step.header = {1, 7};
  step.loads = {{5, ref(1004, kv, 0, 256)}, {6, ref(1011, state, 0, 704)}};
  step.saves = {{7, ref(1008, kv, 256, 256)}};
  store_step_done done;
  done.header = step.header;
  done.pins = {{step.loads[0].object.key, true, "ok", 128, 2560}, {step.loads[1].object.key, false, "bad_checksum", 0, 0}};
  done.reserves = {{step.saves[0].object.key, false, "no_space", 0, 0}};
  done.stats.num_objects = 42;
  auto cd = p.from_store(step, done);
  CHECK(cd.header == step.header);
  CHECK(cd.stats.num_objects == 42);
  REQUIRE(cd.loads.size() == 2);
  CHECK(cd.loads[0] == transfer_grant{5, step.loads[0].object.key, true, "ok", 128, 2560, {}});
  CHECK(cd.loads[1] == transfer_grant{6, step.loads[1].object.key, false, "bad_checksum", 0, 0, {}});
  REQUIRE(cd.saves.size() == 1);
  CHECK(cd.saves[0] == transfer_grant{7, step.saves[0].object.key, false, "no_space", 0, 0, {}});

  auto short_pins = done;
  short_pins.pins.pop_back();
  CHECK_THROWS_AS(p.from_store(step, short_pins), std::logic_error);
  auto short_reserves = done;
  short_reserves.reserves.clear();
  CHECK_THROWS_WITH(p.from_store(step, short_reserves), Catch::Contains("0 of 1"));
}

// --- SPEC D2: a store of granularity "chunk" ------------------------------------------------------

namespace {

// A lookup of the full blocks of a `prompt`-token prompt (hashes 1000 + j, as lookup_of: a longer
// prompt continues a shorter one).
connector_lookup prompt_of(int32_t prompt) {
  auto l = lookup_of(prompt / 64);
  l.num_prompt_tokens = prompt;
  return l;
}

store_contains_done chunk_store(store_contains_done d) {
  d.granularity = "chunk";
  return d;
}

std::vector<kv_object> whole_chunks(int32_t n) {
  std::vector<kv_object> out;
  for (int32_t c = 0; c < n; ++c)
    out.push_back({4 * c, 4, 1000 + 4 * static_cast<uint64_t>(c + 1)});
  return out;
}

} // namespace

TEST_CASE("offload_policy: chunk granularity, whole chunks and grid images up to floor_chunk(P - 1)") {
  offload_policy p(options_64());
  CHECK(chunk_granularity("chunk"));
  CHECK_FALSE(chunk_granularity(""));
  CHECK_FALSE(chunk_granularity("block"));
  SECTION("768 tokens: the chunk [512, 768) reaches the last token; images at 704 and 768 do not count") {
    // What a run of the prompt stored, plus a block store's anchor image at 704.
    auto a = p.answer(prompt_of(768), chunk_store(found(12, {4, 8, 12}, {4, 8, 11, 12})));
    CHECK(a.granularity == "chunk");
    CHECK(a.cpu_tokens == 512);
    CHECK(a.cpu_chunks == whole_chunks(2));
    CHECK(a.cpu_state_positions == std::vector<int32_t>{256, 512});
  }
  SECTION("1000 tokens: three whole chunks, no partial chunk [768, 960), images on the grid") {
    auto a = p.answer(prompt_of(1000), chunk_store(found(15, {4, 8, 12, 15}, {4, 8, 12, 15})));
    CHECK(a.cpu_tokens == 768);
    CHECK(a.cpu_chunks == whole_chunks(3));
    CHECK(a.cpu_state_positions == std::vector<int32_t>{256, 512, 768});
  }
  SECTION("1300 tokens continuing a 1000-token prompt: what the 1000 run saved, 768") {
    // A chunk-store run of the 1000 tokens saved chunks and images at 256, 512, 768.
    auto a = p.answer(prompt_of(1300), chunk_store(found(20, {4, 8, 12}, {4, 8, 12})));
    CHECK(a.cpu_tokens == 768);
    CHECK(a.cpu_chunks == whole_chunks(3));
    CHECK(a.cpu_state_positions == std::vector<int32_t>{256, 512, 768});
  }
  SECTION("1050 tokens: four whole chunks, 1024 = floor_chunk(1049)") {
    auto a = p.answer(prompt_of(1050), chunk_store(found(16, {4, 8, 12, 16}, {4, 8, 12, 16})));
    CHECK(a.cpu_tokens == 1024);
    CHECK(a.cpu_chunks == whole_chunks(4));
    CHECK(a.cpu_state_positions == std::vector<int32_t>{256, 512, 768, 1024});
  }
  SECTION("1024 tokens: the fourth chunk ends at the prompt's end, so it is not covered") {
    auto a = p.answer(prompt_of(1024), chunk_store(found(16, {4, 8, 12, 16}, {4, 8, 12, 16})));
    CHECK(a.cpu_tokens == 768);
    CHECK(a.cpu_state_positions == std::vector<int32_t>{256, 512, 768});
  }
  SECTION("a gap stops the coverage; a prompt below one chunk plus one token finds nothing") {
    auto a = p.answer(prompt_of(768), chunk_store(found(12, {4, 12}, {4, 8})));
    CHECK(a.cpu_tokens == 256);
    CHECK(a.cpu_chunks == whole_chunks(1));
    CHECK(a.cpu_state_positions == std::vector<int32_t>{256, 512});
    auto b = p.answer(prompt_of(256), chunk_store(found(4, {3, 4}, {4})));
    CHECK(b.cpu_tokens == 0);
    CHECK(b.cpu_chunks.empty());
    CHECK(b.cpu_state_positions.empty());
  }
}

TEST_CASE("offload_policy: block granularity (\"\" or \"block\") answers as before and says so") {
  offload_policy p(options_64());
  for (std::string g : {"", "block"}) {
    auto f = found(15, {4, 8, 12, 15}, {4, 8, 11, 12, 15});
    f.granularity = g;
    auto a = p.answer(prompt_of(1000), f);
    CHECK(a.granularity == g);
    CHECK(a.cpu_tokens == 960);
    std::vector<kv_object> chunks = {{0, 4, 1004}, {4, 4, 1008}, {8, 4, 1012}, {12, 3, 1015}};
    CHECK(a.cpu_chunks == chunks);
    CHECK(a.cpu_state_positions == std::vector<int32_t>{256, 512, 704, 768, 960});
  }
}

TEST_CASE("offload_policy: a step's answer carries the store's granularity to the scheduler") {
  offload_policy p(options_64());
  connector_step step;
  step.header = {1, 3};
  step.saves = {{7, ref(1004, kv, 0, 256)}};
  auto ss = p.to_store(step);
  store_step_done done;
  done.header = ss.header;
  done.reserves = {{ss.reserves[0].key, true, "ok", 0, 2560}};
  CHECK(p.from_store(step, done).granularity.empty());
  done.granularity = "chunk";
  CHECK(p.from_store(step, done).granularity == "chunk");
}

TEST_CASE("offload_policy: a lease order becomes a store lease of its prompt's keys, whatever the role") {
  auto o = options_64();
  o.loads = false; // a prefill node (kv_producer) loads nothing but leases what it saved
  o.lease_ms = 1500;
  offload_policy p(o);
  connector_step step;
  step.header = {1, 4};
  auto l = lookup_of(3, 42);
  step.leases.push_back({42, l.hashes, 200});
  auto s = p.to_store(step);
  REQUIRE(s.leases.size() == 1);
  CHECK(s.leases[0].transfer_id == "42");
  CHECK(s.leases[0].lease_ms == 1500);
  REQUIRE(s.leases[0].keys.size() == 6);
  CHECK(s.leases[0].keys[0] == p.kv_key(1001));
  CHECK(s.leases[0].keys[5] == p.state_key(1003));
  CHECK(p.probe(l).keys.empty()); // the role still keeps lookups from probing

  store_step_done done;
  done.header = s.header;
  done.leased = {2};
  auto answered = p.from_store(step, done);
  REQUIRE(answered.leases.size() == 1);
  CHECK(answered.leases[0].request_id == 42);
  CHECK(answered.leases[0].num_objects == 2);
  CHECK(answered.leases[0].lease_ms == 1500);
  done.leased.clear(); // a store that takes no leases (the in-process one) answers none
  CHECK(p.from_store(step, done).leases[0].num_objects == 0);
}
