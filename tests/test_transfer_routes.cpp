// The connector's core without actors or processes (runtime/transfer_routes.hpp): for each kind,
// which stores a lookup asks and what it answers, how a connector step is split by store (with
// each store's own (epoch, seq)), and how the stores' answers come back in order.
#include <catch.hpp>

#include <stdexcept>
#include <string>
#include <vector>

#include "messages/compare.hpp"
#include "runtime/transfer_routes.hpp"

using namespace ordo;

namespace {

constexpr uint64_t ns = 0xabc;
constexpr uint8_t kv = static_cast<uint8_t>(object_kind::kv_chunk);
const std::string peer = "10.0.0.2:7000";

offload_options policy_named(const std::string& name) {
  offload_options o;
  o.namespace_id = ns;
  o.block_size = 64;
  o.chunk_size = 256;
  o.name = name;
  return o;
}

store_route leaf(const std::string& name, route_kind kind, uint64_t window_offset = 0) {
  store_route r;
  r.name = name;
  r.kind = kind;
  r.policy = policy_named(name);
  r.window_offset = window_offset;
  r.takes_leases = kind == route_kind::pd;
  return r;
}

route_table table_of(const std::string& name, std::vector<store_route> leaves, bool store_stamps) {
  route_table t;
  t.name = name;
  t.leaves = std::move(leaves);
  t.store_stamps = store_stamps;
  return t;
}

route_table pd_table() { return table_of("pd", {leaf("pd", route_kind::pd)}, true); }

// multi over a P/D leaf and an offload leaf whose arena lies at window offset 1 << 30, in `order`.
route_table multi_table(bool pd_first) {
  auto pd = leaf("pd", route_kind::pd);
  auto off = leaf("offload", route_kind::offload, uint64_t{1} << 30);
  off.policy.lease_ms = 0;
  pd.policy.lease_ms = 5000;
  return table_of("multi", pd_first ? std::vector<store_route>{pd, off} : std::vector<store_route>{off, pd}, true);
}

// A prompt of `blocks` full blocks (hashes 1001...), from `from` ("" = no peer).
connector_lookup lookup_of(uint64_t request_id, int32_t blocks, const std::string& from = "",
                           const std::string& transfer_id = "") {
  connector_lookup l;
  l.request_id = request_id;
  for (int32_t j = 1; j <= blocks; ++j)
    l.hashes.push_back(1000 + static_cast<uint64_t>(j));
  l.num_prompt_tokens = blocks * 64 + 5;
  l.peer = from;
  l.transfer_id = transfer_id;
  return l;
}

// The store's answer to a probe of `blocks` blocks holding the KV chunk filed under block 4.
store_contains_done found_chunk(int32_t blocks) {
  store_contains_done f;
  f.present.assign(2 * static_cast<size_t>(blocks), 0);
  f.present[6] = 1;
  return f;
}

transfer_order order(uint64_t request_id, uint64_t hash) { return {request_id, {{ns, hash, kv}, 0, 256, 4, 2560}}; }

transfer_result finished(uint64_t request_id, uint64_t hash, bool is_save) {
  transfer_result f;
  f.request_id = request_id;
  f.key = {ns, hash, kv};
  f.is_save = is_save;
  f.ok = true;
  return f;
}

// A store that grants every pin and reserve of `s` at base + 1000·k, says `status` to reserves
// it refuses (all when !grant_saves), and leases 3 objects per lease.
store_step_done answer_of(const store_step& s, uint64_t base, bool grant_saves = true, const std::string& status = "no_space") {
  store_step_done d;
  d.header = s.header;
  for (size_t k = 0; k < s.pins.size(); ++k)
    d.pins.push_back({s.pins[k].key, true, "ok", base + 1000 * k, 2560, 77});
  for (size_t k = 0; k < s.reserves.size(); ++k)
    d.reserves.push_back({s.reserves[k].key, grant_saves, grant_saves ? "ok" : status, base + 500 + 1000 * k, 2560, 0});
  d.stats.num_objects = static_cast<int64_t>(base) + 1;
  d.num_evicted = s.evict_all ? 2 : 0;
  for (size_t k = 0; k < s.leases.size(); ++k)
    d.leased.push_back(3);
  return d;
}

std::vector<store_step_done> answers_of(const split_step& split, bool grant_saves = true) {
  std::vector<store_step_done> out;
  for (const auto& p : split.parts)
    out.push_back(answer_of(p.step, 100 * (p.store.leaf + 1) + (p.store.peer.empty() ? 0 : 50), grant_saves));
  return out;
}

connector_step step_of(uint64_t seq) {
  connector_step s;
  s.header = {1, seq};
  return s;
}

} // namespace

TEST_CASE("transfer routes none: a lookup answers 0 tokens at once, a step refuses every order without a store") {
  transfer_routes core(table_of("none", {leaf("none", route_kind::none)}, false));
  auto next = core.start_lookup(lookup_of(9, 8));
  CHECK_FALSE(next.ask);
  REQUIRE(next.done);
  CHECK(next.done->request_id == 9);
  CHECK(next.done->cpu_tokens == 0);
  CHECK(next.done->connector == "none");

  auto s = step_of(3);
  s.loads.push_back(order(5, 1004));
  s.saves.push_back(order(6, 1008));
  s.leases.push_back({7, {1001}, 64});
  auto split = core.split(s);
  CHECK(split.parts.empty());
  auto done = core.merge(split, {});
  CHECK(done.header.seq == 3);
  REQUIRE(done.loads.size() == 1);
  CHECK(done.loads[0].status == "connector none holds nothing");
  REQUIRE(done.saves.size() == 1);
  CHECK(done.saves[0].status == "connector none stores nothing");
  REQUIRE(done.leases.size() == 1);
  CHECK(done.leases[0].num_objects == 0);
}

TEST_CASE("transfer routes offload: one store, whose steps carry the connector step's (epoch, seq)") {
  transfer_routes core(table_of("offload", {leaf("offload", route_kind::offload)}, false));
  auto next = core.start_lookup(lookup_of(9, 4));
  REQUIRE(next.ask);
  CHECK(next.ask->store == store_ref{0, ""});
  CHECK(next.ask->probe.keys.size() == 8);
  CHECK_FALSE(next.ask->from_peer);
  auto answered = core.lookup_answered(lookup_of(9, 4), *next.ask, found_chunk(4));
  REQUIRE(answered.done);
  CHECK(answered.done->cpu_tokens == 256);
  CHECK(answered.done->connector == "offload");
  CHECK_FALSE(answered.hit_leaf);
  // Nothing to probe: the answer comes at once.
  auto empty = core.start_lookup(lookup_of(10, 0));
  CHECK_FALSE(empty.ask);
  REQUIRE(empty.done);
  CHECK(empty.done->cpu_tokens == 0);

  auto s = step_of(7); // the scheduler's own sequence reaches the store unchanged
  s.header.epoch = 2;
  s.loads.push_back(order(5, 1004));
  s.saves.push_back(order(6, 1008));
  s.finished.push_back(finished(4, 1012, true));
  auto split = core.split(s);
  REQUIRE(split.parts.size() == 1);
  const auto& st = split.parts[0].step;
  CHECK(st.header.epoch == 2);
  CHECK(st.header.seq == 7);
  CHECK(st.pins.size() == 1);
  CHECK(st.reserves.size() == 1);
  CHECK(st.commits.size() == 1);
  auto done = core.merge(split, answers_of(split));
  CHECK(done.header.seq == 7);
  REQUIRE(done.loads.size() == 1);
  CHECK(done.loads[0].ok);
  CHECK(done.loads[0].data_offset == 100);
  REQUIRE(done.saves.size() == 1);
  CHECK(done.saves[0].data_offset == 600);
  CHECK(done.stats.num_objects == 101);
  // An empty step still reaches the store (its answer carries the stats).
  CHECK(core.split(step_of(8)).parts.size() == 1);
  // A store that answers fewer orders than it was sent is a broken answer.
  CHECK_THROWS_AS(core.merge(split, {store_step_done{}}), std::logic_error);
  CHECK_THROWS_AS(core.merge(split, {}), std::logic_error);
}

TEST_CASE("transfer routes pd: a lookup naming a prefill node asks its store; that request's loads go there") {
  transfer_routes core(pd_table());
  auto local = core.start_lookup(lookup_of(1, 4));
  REQUIRE(local.ask);
  CHECK(local.ask->store == store_ref{0, ""});
  CHECK(local.opened.empty());

  auto remote = core.start_lookup(lookup_of(2, 4, peer, "77"));
  REQUIRE(remote.ask);
  CHECK(remote.ask->store == store_ref{0, peer});
  CHECK(remote.ask->from_peer);
  CHECK(remote.opened == std::vector<store_ref>{{0, peer}});
  CHECK(core.num_peers() == 1);
  auto done = core.lookup_answered(lookup_of(2, 4, peer, "77"), *remote.ask, found_chunk(4));
  REQUIRE(done.done);
  CHECK(done.done->from_peer);
  CHECK(done.done->connector == "pd");
  CHECK(done.done->cpu_tokens == 256);
  // The same peer again: its store is known already.
  CHECK(core.start_lookup(lookup_of(3, 4, peer, "78")).opened.empty());

  // Step 1: request 2 loads from the peer, request 1 from here; a save and a lease stay here.
  auto s = step_of(1);
  s.loads = {order(1, 1004), order(2, 1004), order(1, 1008)};
  s.saves = {order(6, 1012)};
  s.leases = {{6, {1001, 1002}, 130}};
  s.evict_all = true;
  auto split = core.split(s);
  REQUIRE(split.parts.size() == 2);
  const auto& here = split.parts[0];
  const auto& there = split.parts[1];
  CHECK(here.store == store_ref{0, ""});
  CHECK(there.store == store_ref{0, peer});
  CHECK(here.step.pins.size() == 2);
  CHECK(here.step.reserves.size() == 1);
  CHECK(here.step.leases.size() == 1);
  CHECK(here.step.evict_all);
  CHECK(there.step.pins.size() == 1);
  CHECK(there.step.reserves.empty());
  CHECK_FALSE(there.step.evict_all);
  CHECK(there.step.releases.empty());
  // Each store its own sequence, from (1, 1).
  CHECK(here.step.header.seq == 1);
  CHECK(there.step.header.seq == 1);
  auto merged = core.merge(split, answers_of(split));
  REQUIRE(merged.loads.size() == 3);
  CHECK(merged.loads[0].data_offset == 100);  // here, first pin
  CHECK(merged.loads[1].data_offset == 150);  // the peer's pin
  CHECK(merged.loads[2].data_offset == 1100); // here, second pin
  CHECK(merged.loads[1].request_id == 2);
  REQUIRE(merged.saves.size() == 1);
  CHECK(merged.saves[0].data_offset == 600);
  REQUIRE(merged.leases.size() == 1);
  CHECK(merged.leases[0].num_objects == 3);
  CHECK(merged.num_evicted == 2);
  CHECK(merged.stats.num_objects == 101); // this node's store's
  CHECK(merged.header.seq == 1);

  // Step 2: request 2's unpin goes to the peer with the release of its lease, once; a commit here.
  auto s2 = step_of(2);
  s2.finished = {finished(2, 1004, false), finished(1, 1004, false), finished(6, 1012, true)};
  auto split2 = core.split(s2);
  REQUIRE(split2.parts.size() == 2);
  CHECK(split2.parts[0].step.unpins.size() == 1);
  CHECK(split2.parts[0].step.commits.size() == 1);
  CHECK(split2.parts[0].step.header.seq == 2);
  CHECK(split2.parts[1].step.unpins.size() == 1);
  CHECK(split2.parts[1].step.releases == std::vector<std::string>{"77"});
  CHECK(split2.parts[1].step.header.seq == 2);
  auto s3 = step_of(3);
  s3.finished = {finished(2, 1008, false)};
  auto split3 = core.split(s3);
  REQUIRE(split3.parts.size() == 2);
  CHECK(split3.parts[1].step.releases.empty()); // released once
  // Only the stores a step reaches advance: this node's store gets every step.
  auto split4 = core.split(step_of(4));
  REQUIRE(split4.parts.size() == 1);
  CHECK(split4.parts[0].step.header.seq == 4);

  // The peer's client ended: its next store is a new one, whose sequence starts again.
  core.forget_peer({0, peer});
  CHECK(core.num_peers() == 0);
  auto s5 = step_of(5);
  s5.loads = {order(2, 1012)};
  auto split5 = core.split(s5);
  REQUIRE(split5.parts.size() == 2);
  CHECK(split5.parts[1].store == store_ref{0, peer});
  CHECK(split5.parts[1].step.header.seq == 1);
  CHECK(split5.parts[0].step.header.seq == 5);
}

TEST_CASE("transfer routes pd: past max_peer_clients a new peer's lookup recomputes; its loads still go to it") {
  transfer_routes core(pd_table());
  for (size_t i = 0; i < max_peer_clients; ++i)
    REQUIRE(core.start_lookup(lookup_of(i, 4, "10.0.1." + std::to_string(i) + ":1", "t")).ask);
  CHECK(core.num_peers() == max_peer_clients);
  auto refused = core.start_lookup(lookup_of(500, 4, "10.9.9.9:1", "t"));
  CHECK_FALSE(refused.ask);
  REQUIRE(refused.done);
  CHECK(refused.done->cpu_tokens == 0);
  CHECK_FALSE(refused.done->from_peer);
  REQUIRE(refused.notes.size() == 1);
  CHECK(refused.notes[0].find("names the prefill node 10.9.9.9:1, but this node already keeps 64 peers") !=
        std::string::npos);
  // A known peer is still asked.
  CHECK(core.start_lookup(lookup_of(501, 4, "10.0.1.3:1", "t")).ask);
  // A request whose peer's client has ended since its lookup: its loads go to a new one.
  core.forget_peer({0, "10.0.1.0:1"});
  CHECK(core.start_lookup(lookup_of(502, 4, "10.9.9.9:1", "t")).ask); // room for one again
  auto s = step_of(1);
  s.loads = {order(0, 1004)};
  auto split = core.split(s);
  REQUIRE(split.parts.size() == 2);
  CHECK(split.parts[1].store == store_ref{0, "10.0.1.0:1"});
  CHECK(core.num_peers() == max_peer_clients + 1);
}

TEST_CASE("transfer routes multi: the first leaf whose lookup holds KV answers and takes the request's loads") {
  transfer_routes core(multi_table(true));
  // pd leaf (this node's tier) misses, the offload leaf hits.
  auto first = core.start_lookup(lookup_of(1, 4));
  REQUIRE(first.ask);
  CHECK(first.ask->store == store_ref{0, ""});
  store_contains_done miss;
  miss.present.assign(8, 0);
  auto second = core.lookup_answered(lookup_of(1, 4), *first.ask, miss);
  REQUIRE(second.ask);
  CHECK(second.ask->store == store_ref{1, ""});
  CHECK_FALSE(second.done);
  auto hit = core.lookup_answered(lookup_of(1, 4), *second.ask, found_chunk(4));
  REQUIRE(hit.done);
  CHECK(hit.done->connector == "multi:offload");
  CHECK(hit.done->cpu_tokens == 256);
  CHECK(hit.hit_leaf == std::optional<size_t>(1));
  // A hit at the first leaf never asks the second.
  auto at_pd = core.start_lookup(lookup_of(2, 4, peer, "88"));
  REQUIRE(at_pd.ask);
  CHECK(at_pd.ask->store == store_ref{0, peer});
  auto pd_hit = core.lookup_answered(lookup_of(2, 4, peer, "88"), *at_pd.ask, found_chunk(4));
  REQUIRE(pd_hit.done);
  CHECK(pd_hit.done->connector == "multi:pd");
  CHECK(pd_hit.done->from_peer);
  CHECK(pd_hit.hit_leaf == std::optional<size_t>(0));
  // The pd leaf's own tier holds request 3's prompt.
  auto a = core.start_lookup(lookup_of(3, 4));
  auto b = core.lookup_answered(lookup_of(3, 4), *a.ask, found_chunk(4));
  REQUIRE(b.done);
  CHECK(b.done->connector == "multi:pd");
  CHECK_FALSE(b.done->from_peer);
  // Nobody holds it: the last leaf's miss answers, no hit counted.
  auto c = core.start_lookup(lookup_of(4, 4));
  auto d = core.lookup_answered(lookup_of(4, 4), *c.ask, store_contains_done{});
  REQUIRE(d.ask);
  auto e = core.lookup_answered(lookup_of(4, 4), *d.ask, store_contains_done{});
  REQUIRE(e.done);
  CHECK(e.done->connector == "multi:offload");
  CHECK(e.done->cpu_tokens == 0);
  CHECK_FALSE(e.hit_leaf);

  // Loads go to the winning leaf (request 1: offload, request 2: pd's peer, request 3: pd here),
  // with the leaf's window offset added to its grants.
  auto s = step_of(1);
  s.loads = {order(1, 1004), order(2, 1004), order(3, 1004)};
  auto split = core.split(s);
  REQUIRE(split.parts.size() == 3);
  CHECK(split.parts[0].store == store_ref{0, ""});
  CHECK(split.parts[1].store == store_ref{0, peer});
  CHECK(split.parts[2].store == store_ref{1, ""});
  CHECK(split.parts[0].step.pins.size() == 1);
  CHECK(split.parts[1].step.pins.size() == 1);
  CHECK(split.parts[2].step.pins.size() == 1);
  auto merged = core.merge(split, answers_of(split));
  REQUIRE(merged.loads.size() == 3);
  CHECK(merged.loads[0].data_offset == 200 + (uint64_t{1} << 30)); // the offload leaf's store
  CHECK(merged.loads[1].data_offset == 150);                       // the peer's
  CHECK(merged.loads[2].data_offset == 100);                       // the pd leaf's own
  CHECK(merged.stats.num_objects == 101);                          // the first leaf's
  // Their unpins follow: request 1's to the offload leaf, request 2's to the peer with its release.
  auto s2 = step_of(2);
  s2.finished = {finished(1, 1004, false), finished(2, 1004, false)};
  auto split2 = core.split(s2);
  REQUIRE(split2.parts.size() == 3);
  CHECK(split2.parts[0].step.unpins.empty());
  CHECK(split2.parts[1].step.unpins.size() == 1);
  CHECK(split2.parts[1].step.releases == std::vector<std::string>{"88"});
  CHECK(split2.parts[2].step.unpins.size() == 1);
}

TEST_CASE("transfer routes multi: saves fan out to every leaf; a save two leaves grant is one grant with a copy") {
  transfer_routes core(multi_table(true));
  auto s = step_of(1);
  s.saves = {order(5, 1004), order(6, 1008)};
  s.evict_all = true;
  auto split = core.split(s);
  REQUIRE(split.parts.size() == 2);
  CHECK(split.parts[0].step.reserves.size() == 2);
  CHECK(split.parts[1].step.reserves.size() == 2);
  CHECK(split.parts[0].step.evict_all);
  CHECK(split.parts[1].step.evict_all);
  // Each leaf's store its own sequence.
  CHECK(split.parts[0].step.header.seq == 1);
  CHECK(split.parts[1].step.header.seq == 1);
  auto answers = answers_of(split);
  answers[1].reserves[1] = {s.saves[1].object.key, false, "no_space", 0, 0, 0}; // the offload leaf is full
  auto merged = core.merge(split, answers);
  REQUIRE(merged.saves.size() == 2);
  CHECK(merged.saves[0].ok);
  CHECK(merged.saves[0].data_offset == 600);
  CHECK(merged.saves[0].copies == std::vector<uint64_t>{700 + (uint64_t{1} << 30)});
  CHECK(merged.saves[1].ok);
  CHECK(merged.saves[1].copies.empty());
  CHECK(merged.num_evicted == 4); // both leaves evicted

  // The commits go to each leaf that granted the save, and only once.
  auto s2 = step_of(2);
  s2.finished = {finished(5, 1004, true), finished(6, 1008, true), finished(7, 1016, true)};
  auto split2 = core.split(s2);
  REQUIRE(split2.parts.size() == 2);
  CHECK(split2.parts[0].step.commits.size() == 2); // 1004 and 1008 (1016: granted by no leaf)
  CHECK(split2.parts[1].step.commits.size() == 1); // 1004 only
  CHECK(split2.parts[1].step.header.seq == 2);
  auto split3 = core.split(s2);
  CHECK(split3.parts[0].step.commits.empty());
  CHECK(split3.parts[1].step.commits.empty());

  // No leaf grants: "exists" wins over a refusal (the bytes are stored), else the first leaf's.
  auto s4 = step_of(4);
  s4.saves = {order(8, 1020), order(9, 1024)};
  auto split4 = core.split(s4);
  auto refused = answers_of(split4, false);
  refused[1].reserves[0].status = "exists";
  auto merged4 = core.merge(split4, refused);
  CHECK_FALSE(merged4.saves[0].ok);
  CHECK(merged4.saves[0].status == "exists");
  CHECK(merged4.saves[1].status == "no_space");
  auto s5 = step_of(5);
  s5.finished = {finished(8, 1020, true)};
  s5.finished[0].ok = false; // its gather was dropped: nothing was reserved, so nothing is aborted
  auto split5 = core.split(s5);
  CHECK(split5.parts[0].step.aborts.empty());
  CHECK(split5.parts[1].step.aborts.empty());
}

TEST_CASE("transfer routes multi: leases go to the P/D leaf only, whatever the leaf order") {
  for (bool pd_first : {true, false}) {
    transfer_routes core(multi_table(pd_first));
    const size_t pd = pd_first ? 0 : 1;
    auto s = step_of(1);
    s.leases = {{3, {1001, 1002, 1003, 1004}, 300}};
    auto split = core.split(s);
    REQUIRE(split.parts.size() == 2);
    CHECK(split.parts[pd].step.leases.size() == 1);
    CHECK(split.parts[pd].step.leases[0].lease_ms == 5000);
    CHECK(split.parts[1 - pd].step.leases.empty());
    auto merged = core.merge(split, answers_of(split));
    REQUIRE(merged.leases.size() == 1);
    CHECK(merged.leases[0].request_id == 3);
    CHECK(merged.leases[0].num_objects == 3);
    CHECK(merged.leases[0].lease_ms == 5000);
    // The lookup order follows the table: the first leaf is asked first.
    auto next = core.start_lookup(lookup_of(9, 4));
    REQUIRE(next.ask);
    CHECK(next.ask->store.leaf == 0);
  }
}

TEST_CASE("transfer routes: a table without leaves is refused") {
  CHECK_THROWS_AS(transfer_routes(route_table{}), std::invalid_argument);
}
