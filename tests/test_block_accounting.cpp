#include <catch.hpp>

#include <algorithm>

#include "runtime/block_accounting.hpp"

using namespace ordo;

namespace {

uint64_t seq = 0;

pool_step step_with(std::vector<block_grow> grows, std::vector<uint64_t> releases = {},
                    std::vector<block_commit> commits = {}, bool evict = false) {
  pool_step s;
  s.header = {1, ++seq};
  s.grows = std::move(grows);
  s.releases = std::move(releases);
  s.commits = std::move(commits);
  s.evict_hbm = evict;
  return s;
}

} // namespace

TEST_CASE("block accounting: a new request gets fresh blocks, all or nothing") {
  block_accounting pool(8, 16);
  auto done = pool.apply(step_with({{1, {}, 0, 5}}));
  REQUIRE(done.results.size() == 1);
  CHECK(done.results[0].ok);
  CHECK(done.results[0].block_table.size() == 5);
  CHECK(done.num_free == 3);
  auto refused = pool.apply(step_with({{2, {}, 0, 4}}));
  CHECK_FALSE(refused.results[0].ok);
  CHECK(refused.results[0].block_table.empty());
  CHECK(pool.num_free() == 3);
  CHECK(pool.check_invariants().empty());
}

TEST_CASE("block accounting: committed blocks are shared by a later request with the same hashes") {
  block_accounting pool(8, 16);
  pool.apply(step_with({{1, {}, 0, 3}}));
  auto t1 = *pool.table(1);
  pool.apply(step_with({}, {}, {{1, 0, 0xa}, {1, 1, 0xb}}));
  auto hit = pool.apply(step_with({{2, {0xa, 0xb, 0xc}, 2, 3}}));
  REQUIRE(hit.results[0].ok);
  CHECK(hit.results[0].num_hit_blocks == 2);
  CHECK(hit.results[0].block_table[0] == t1[0]);
  CHECK(hit.results[0].block_table[1] == t1[1]);
  CHECK(hit.results[0].block_table[2] != t1[2]);
  CHECK(pool.refcount(t1[0]) == 2);
  // max_hit_blocks caps the hit (SPEC B2: never the last prompt token).
  auto capped = pool.apply(step_with({{3, {0xa, 0xb}, 1, 2}}));
  CHECK(capped.results[0].num_hit_blocks == 1);
  CHECK(pool.check_invariants().empty());
}

TEST_CASE("block accounting: released indexed blocks are cached, evicted LRU first and by evict_hbm") {
  block_accounting pool(4, 16);
  pool.apply(step_with({{1, {}, 0, 2}}));
  pool.apply(step_with({}, {}, {{1, 0, 0x1}, {1, 1, 0x2}}));
  pool.apply(step_with({{2, {}, 0, 2}}));
  pool.apply(step_with({}, {}, {{2, 0, 0x3}}));
  auto done = pool.apply(step_with({}, {1, 2}));
  CHECK(done.num_cached == 3);
  CHECK(done.num_free == 1);
  // Two fresh blocks: the free one, then the least recently released cached block (hash 0x1).
  pool.apply(step_with({{3, {}, 0, 2}}));
  CHECK(pool.match_length({0x1}) == 0);
  CHECK(pool.match_length({0x1, 0x2}) == 0); // the chain is broken at its root
  CHECK(pool.match_length({0x2}) == 1);        // its tail stays cached until LRU reaches it
  CHECK(pool.num_cached() == 2);
  auto evicted = pool.apply(step_with({}, {}, {}, true));
  CHECK(evicted.num_evicted == 2);
  CHECK(pool.num_cached() == 0);
  CHECK(pool.check_invariants().empty());
}

TEST_CASE("block accounting: a refused grow of a new request gives its hits back") {
  block_accounting pool(3, 16);
  pool.apply(step_with({{1, {}, 0, 1}}));
  pool.apply(step_with({}, {}, {{1, 0, 0x9}}));
  pool.apply(step_with({}, {1}));
  CHECK(pool.num_cached() == 1);
  auto refused = pool.apply(step_with({{2, {0x9}, 1, 5}}));
  CHECK_FALSE(refused.results[0].ok);
  CHECK(pool.num_cached() == 1);
  CHECK(pool.match_length({0x9}) == 1);
  CHECK(pool.check_invariants().empty());
}

TEST_CASE("block accounting: random operations keep every invariant") {
  block_accounting pool(32, 16);
  uint64_t rng = 12345;
  auto next = [&] { rng = rng * 6364136223846793005ULL + 1442695040888963407ULL; return rng >> 33; };
  std::vector<uint64_t> live;
  for (int i = 0; i < 2000; ++i) {
    auto op = next() % 4;
    if (op == 0 || live.empty()) {
      uint64_t id = 1000 + i;
      std::vector<uint64_t> hashes;
      for (int k = 0; k < 4; ++k)
        hashes.push_back(next() % 3 + k * 10);
      auto d = pool.apply(step_with({{id, hashes, static_cast<int32_t>(next() % 4), static_cast<int32_t>(1 + next() % 6)}}));
      if (d.results[0].ok)
        live.push_back(id);
    } else if (op == 1) {
      auto id = live[next() % live.size()];
      pool.apply(step_with({}, {}, {{id, 0, next() % 3}}));
    } else if (op == 2) {
      auto idx = next() % live.size();
      pool.apply(step_with({}, {live[idx]}));
      live.erase(live.begin() + static_cast<long>(idx));
    } else {
      auto id = live[next() % live.size()];
      auto cur = static_cast<int32_t>(pool.table(id)->size());
      pool.apply(step_with({{id, {}, 0, cur + 1}}));
    }
    auto why = pool.check_invariants();
    INFO("step " << i);
    REQUIRE(why.empty());
  }
}

namespace {

block_grow hybrid_grow(uint64_t id, std::vector<uint64_t> hashes, int32_t total, std::vector<checkpoint_position> cps) {
  block_grow g;
  g.request_id = id;
  g.hashes = hashes;
  g.max_hit_blocks = static_cast<int32_t>(hashes.size());
  g.total_blocks = total;
  g.needs_state = true;
  g.checkpoints = std::move(cps);
  g.units_per_image = 2;
  return g;
}

} // namespace

TEST_CASE("block accounting: state images are reserved, made READY, restored with a pin, and follow eviction") {
  block_accounting pool(16, 16);
  // A 3-block prompt with checkpoints at 16 and 32 tokens.
  auto d = pool.apply(step_with({hybrid_grow(1, {0xa, 0xb}, 3, {{16, 0xa}, {32, 0xb}})}));
  REQUIRE(d.results[0].ok);
  REQUIRE(d.results[0].reserved.size() == 2);
  CHECK(d.results[0].reserved[0].units.size() == 2);
  CHECK(pool.num_free() == 16 - 3 - 4);
  CHECK_FALSE(pool.image_ready(0xa));
  pool_step ready = step_with({}, {}, {{1, 0, 0xa}, {1, 1, 0xb}});
  ready.images_ready = {0xa, 0xb};
  pool.apply(ready);
  CHECK(pool.image_ready(0xb));
  pool.apply(step_with({}, {1}));
  CHECK(pool.check_invariants().empty());

  // A resend restores from the image at 32 and pins it; evict_hbm leaves the pinned image and
  // its block, and drops the idle one.
  auto hit = pool.apply(step_with({hybrid_grow(2, {0xa, 0xb}, 3, {{16, 0xa}, {32, 0xb}})}));
  REQUIRE(hit.results[0].ok);
  CHECK(hit.results[0].num_hit_blocks == 2);
  CHECK(hit.results[0].restore_hash == 0xb);
  CHECK(hit.results[0].restore_units.size() == 2);
  CHECK(hit.results[0].reserved.empty()); // both positions already have images
  CHECK(pool.image_pins(0xb) == 1);
  pool.apply(step_with({}, {2}));
  CHECK(pool.image_pins(0xb) == 0);
  auto hold = pool.apply(step_with({hybrid_grow(3, {0xa, 0xb}, 3, {})}));
  REQUIRE(hold.results[0].restore_hash == 0xb);
  auto evicted = pool.apply(step_with({}, {}, {}, true));
  CHECK(pool.image_ready(0xb));
  CHECK(evicted.clears.size() == 2); // ...but evict_hbm drops every idle READY image: 0xa's units
  CHECK(pool.num_images() == 1);
  pool.apply(step_with({}, {3}));
  auto all = pool.apply(step_with({}, {}, {}, true));
  CHECK(pool.num_images() == 0);
  CHECK(all.clears.size() == 2); // the last image's units come back, to be cleared before reuse
  CHECK(all.num_images_evicted == 1);
  CHECK(pool.check_invariants().empty());
}

TEST_CASE("block accounting: a released request's unfinished images are dropped and their units cleared") {
  block_accounting pool(16, 16);
  auto d = pool.apply(step_with({hybrid_grow(1, {0xa, 0xb}, 3, {{16, 0xa}, {32, 0xb}})}));
  REQUIRE(d.results[0].ok);
  auto released = pool.apply(step_with({}, {1}));
  CHECK(pool.num_images() == 0);
  CHECK(released.clears.size() == 4);
  CHECK(released.num_images_evicted == 2);
  CHECK(pool.num_free() == 16);
  CHECK(pool.check_invariants().empty());
}

TEST_CASE("block accounting: a host-tier image load gets private units when the image is another's") {
  block_accounting pool(24, 16);
  // Request 1 reserves the image at 32 (COPYING); request 2, the same prompt, loads it from the
  // host tier: it cannot use request 1's units, so it gets two private ones.
  auto g1 = hybrid_grow(1, {0xa, 0xb}, 3, {{32, 0xb}});
  g1.load_image_position = 32;
  auto g2 = hybrid_grow(2, {0xa, 0xb}, 3, {{32, 0xb}});
  g2.load_image_position = 32;
  auto done = pool.apply(step_with({g1, g2}));
  REQUIRE(done.results.size() == 2);
  REQUIRE(done.results[0].ok);
  REQUIRE(done.results[1].ok);
  CHECK(done.results[0].reserved.size() == 1);
  CHECK(done.results[0].load_units.empty());
  CHECK(done.results[1].reserved.empty());
  REQUIRE(done.results[1].load_units.size() == 2);
  CHECK(pool.num_free() == 24 - 3 - 2 - 3 - 2);
  CHECK(pool.check_invariants().empty());
  // Given back with the request, and cleared before anything writes them again.
  auto released = pool.apply(step_with({}, {2}));
  for (auto u : done.results[1].load_units)
    CHECK(std::count(released.clears.begin(), released.clears.end(), u) == 1);
  CHECK(pool.num_free() == 24 - 3 - 2); // request 2's blocks and private units are free again
  CHECK(pool.check_invariants().empty());
  // No private units when the load position is at or below the hit, or when this grow reserves
  // the image itself.
  auto g3 = hybrid_grow(3, {0xc, 0xd}, 3, {{32, 0xd}});
  g3.load_image_position = 32;
  auto own = pool.apply(step_with({g3}));
  CHECK(own.results[0].load_units.empty());
  CHECK(own.results[0].reserved.size() == 1);
  CHECK(pool.check_invariants().empty());
}
