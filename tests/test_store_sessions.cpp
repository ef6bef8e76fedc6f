// runtime/store_sessions: the store's core without actors or processes (issue 38 item 2) — hello
// checks, ownership, namespace filters, rights, leases and their expiry, piece bounds, a session's
// end.
#include <catch.hpp>

#include <vector>

#include "runtime/store_sessions.hpp"
#include "tests/scratch_dir.hpp"

using namespace ordo;
using Catch::Matchers::Contains;

namespace {

constexpr uint64_t ns = 7;
constexpr uint64_t digest = 0x1234;

struct fixture {
  std::vector<uint8_t> arena = std::vector<uint8_t>(1u << 20);
  store_sessions core;

  explicit fixture(std::optional<secret_key> secret = std::nullopt, std::shared_ptr<const tls_context> tls = nullptr,
                   std::optional<uint64_t> local = std::nullopt)
      : core([&] {
          store_sessions_options o;
          o.wire = "ordo-wire-1";
          o.wire_digest = digest;
          o.arena = arena.data();
          o.arena_bytes = arena.size();
          o.local_namespace = local;
          o.secret = secret;
          o.tls = std::move(tls);
          return o;
        }()) {}
};

store_hello hello_as(const std::string& engine, const std::string& role = "") {
  store_hello h;
  h.wire = "ordo-wire-1";
  h.wire_digest = digest;
  h.engine_id = engine;
  h.namespace_id = ns;
  h.boot_id = "boot";
  h.challenge = "00ff";
  h.role = role;
  return h;
}

object_key key_of(uint64_t hash, uint64_t namespace_id = ns) { return object_key{namespace_id, hash, 0}; }
object_ref ref_of(uint64_t hash, uint64_t namespace_id = ns) { return object_ref{key_of(hash, namespace_id), 0, 64, 4, 4096}; }

store_step step_of(uint64_t seq) {
  store_step s;
  s.header = command_header{1, seq};
  return s;
}

// Opens a session for `peer` and commits objects `hashes` in it (steps 1 and 2).
void commit(store_sessions& core, store_peer peer, std::vector<uint64_t> hashes) {
  store_step s = step_of(1);
  for (auto h : hashes)
    s.reserves.push_back(ref_of(h));
  auto out = core.step(peer, s);
  REQUIRE(out.refused.empty());
  for (const auto& g : out.done.reserves)
    REQUIRE(g.ok);
  s = step_of(2);
  for (auto h : hashes)
    s.commits.push_back(key_of(h));
  REQUIRE(core.step(peer, s).refused.empty());
}

} // namespace

TEST_CASE("store core: a hello opens one session per engine id; wrong wires and ids are refused", "[store_core]") {
  fixture f;
  auto out = f.core.hello(1, hello_as("node-a"), "store-x");
  CHECK(out.welcome.ok);
  CHECK(out.opened);
  CHECK(out.welcome.store_id == "store-x");
  CHECK(out.welcome.arena_bytes == f.arena.size());
  CHECK(f.core.num_sessions() == 1);
  auto again = f.core.hello(1, hello_as("node-a"), "store-x");
  CHECK((again.welcome.ok && !again.opened)); // the same session
  CHECK_THAT(f.core.hello(2, hello_as("node-a"), "s").welcome.why, Contains("already connected"));
  CHECK_THAT(f.core.hello(1, hello_as("node-b"), "s").welcome.why, Contains("already has a session as engine id node-a"));
  store_hello h = hello_as("node-c");
  h.wire = "other";
  CHECK_THAT(f.core.hello(3, h, "s").welcome.why, Contains("wire \"other\" differs"));
  h = hello_as("node-c");
  h.wire_digest = 1;
  CHECK_THAT(f.core.hello(3, h, "s").welcome.why, Contains("built from another messages/ordo.capnp"));
  CHECK_THAT(f.core.hello(3, hello_as(""), "s").welcome.why, Contains("engine id is empty"));
  CHECK_THAT(f.core.hello(3, hello_as("node-c", "kv_admin"), "s").welcome.why, Contains("role \"kv_admin\""));
  CHECK(f.core.counters().hellos_refused_total == 6);
  CHECK(f.core.num_sessions() == 1);
}

TEST_CASE("store core: with the secret a hello carries a MAC and the welcome proves the store", "[store_core]") {
  secret_key key{};
  key[3] = 9;
  fixture f(key);
  store_hello h = hello_as("node-a");
  CHECK_THAT(f.core.hello(1, h, "s").welcome.why, Contains("no valid credential"));
  h.mac = hmac_hex(key, store_hello_message(h));
  auto out = f.core.hello(1, h, "s");
  REQUIRE(out.welcome.ok);
  CHECK(hmac_matches(key, store_welcome_message("s", h), out.welcome.proof));
  store_hello promoted = hello_as("node-b", "kv_consumer");
  promoted.mac = hmac_hex(key, store_hello_message(promoted));
  promoted.role = "kv_both";
  CHECK_FALSE(f.core.hello(2, promoted, "s").welcome.ok);
  CHECK(f.core.counters().hellos_refused_credential_total == 2);
}

TEST_CASE("store core: a session releases only what it holds and orders only its namespace", "[store_core]") {
  fixture f;
  REQUIRE(f.core.hello(1, hello_as("node-a"), "s").welcome.ok);
  REQUIRE(f.core.hello(2, hello_as("node-b"), "s").welcome.ok);
  commit(f.core, 1, {10, 11});
  store_step pin = step_of(1);
  pin.pins = {ref_of(10)};
  auto pinned = f.core.step(2, pin);
  REQUIRE(pinned.done.pins.at(0).ok);
  // A unpins what B pinned, twice: skipped, noted; B's pin holds.
  store_step steal = step_of(3);
  steal.unpins = {key_of(10), key_of(10)};
  auto out = f.core.step(1, steal);
  CHECK(out.notes.size() == 2);
  CHECK_THAT(out.notes[0], Contains("unpin of an object it has not pinned"));
  store_step evict = step_of(4);
  evict.evict_all = true;
  CHECK(f.core.step(1, evict).done.num_evicted == 1); // 11 only: 10 is pinned by B
  // Another namespace: absent to it, pins and reserves refused with a status naming both.
  store_contains q;
  q.keys = {key_of(10), key_of(10, 8)};
  auto found = f.core.contains(2, q);
  REQUIRE(found);
  CHECK(found->present == std::vector<uint8_t>{1, 0});
  store_step foreign = step_of(2);
  foreign.pins = {ref_of(10, 8)};
  foreign.reserves = {ref_of(12), ref_of(13, 8)};
  out = f.core.step(2, foreign);
  REQUIRE(out.done.pins.size() == 1);
  CHECK_THAT(out.done.pins[0].status, Contains("namespace 0x0000000000000008 is not this session's"));
  REQUIRE(out.done.reserves.size() == 2);
  CHECK(out.done.reserves[0].ok);
  CHECK_FALSE(out.done.reserves[1].ok);
  // Out of order, and no session at all: refused whole and counted.
  CHECK_THAT(f.core.step(2, step_of(2)).refused, Contains("out of order"));
  CHECK_THAT(f.core.step(9, step_of(1)).refused, Contains("no session"));
  CHECK_FALSE(f.core.contains(9, q));
  CHECK(f.core.counters().requests_refused_total == 3);
}

TEST_CASE("store core: a kv_consumer session reads only; certificates decide evict_all", "[store_core]") {
  const std::string pki = ordo::test::scratch_dir("store_core");
  ensure_certificate_authority(pki);
  issue_certificate(pki, "store", "node", 30);
  issue_certificate(pki, "node", "node", 30);
  issue_certificate(pki, "ops", "admin", 30);
  auto load = [&](const std::string& name) {
    return tls_context::load({pki + "/" + name + ".crt", pki + "/" + name + ".key", pki + "/ca.crt"});
  };
  fixture f(std::nullopt, load("store"));
  auto node = load("node"), ops = load("ops");
  auto signed_hello = [](const std::string& engine, const tls_context& by, const std::string& role = "") {
    store_hello h = hello_as(engine, role);
    h.certificate = by.certificate_pem();
    h.signature = by.sign_hex(store_hello_message(h));
    return h;
  };
  CHECK_THAT(f.core.hello(1, hello_as("bare"), "s").welcome.why, Contains("no certificate"));
  REQUIRE(f.core.hello(1, signed_hello("node-n", *node), "s").welcome.ok);
  REQUIRE(f.core.hello(2, signed_hello("ops", *ops), "s").welcome.ok);
  REQUIRE(f.core.hello(3, signed_hello("reader", *node, "kv_consumer"), "s").welcome.ok);
  commit(f.core, 1, {20});
  store_step s = step_of(1);
  s.reserves = {ref_of(21)};
  s.evict_all = true;
  auto out = f.core.step(3, s);
  CHECK_FALSE(out.done.reserves.at(0).ok);
  CHECK_THAT(out.done.reserves[0].status, Contains("read only (role kv_consumer)"));
  CHECK(out.done.num_evicted == 0);
  s = step_of(3);
  s.evict_all = true;
  out = f.core.step(1, s);
  CHECK(out.done.num_evicted == 0);
  CHECK_THAT(out.notes.at(0), Contains("its certificate's role is \"node\", not admin"));
  CHECK(f.core.counters().orders_refused_role_total == 3);
  s = step_of(1);
  s.evict_all = true;
  CHECK(f.core.step(2, s).done.num_evicted == 1);
}

TEST_CASE("store core: leases hold objects until released, replaced or expired", "[store_core]") {
  fixture f;
  REQUIRE(f.core.hello(1, hello_as("prefill"), "s").welcome.ok);
  commit(f.core, 1, {30, 31});
  store_step s = step_of(3);
  s.leases = {store_lease{"t1", {key_of(30), key_of(31), key_of(99)}, 30000}};
  auto out = f.core.step(1, s);
  REQUIRE(out.done.leased == std::vector<int32_t>{2});
  REQUIRE(out.timers.size() == 1);
  const lease_timer first = out.timers[0];
  CHECK((first.transfer_id == "t1" && first.after_ms == 30000 && first.namespace_id == ns));
  CHECK(f.core.leased_objects() == 2);
  store_step evict = step_of(4);
  evict.evict_all = true;
  CHECK(f.core.step(1, evict).done.num_evicted == 0); // held
  // Replaced by a new lease of the same transfer id: the old timer no longer ends it.
  s = step_of(5);
  s.leases = {store_lease{"t1", {key_of(30)}, 30000}};
  out = f.core.step(1, s);
  CHECK_FALSE(f.core.lease_expired(ns, "t1", first.generation));
  CHECK(f.core.leased_objects() == 1);
  auto held = f.core.lease_expired(ns, "t1", out.timers.at(0).generation);
  REQUIRE(held);
  CHECK(*held == 1);
  CHECK(f.core.leases_active() == 0);
  // Released by name.
  s = step_of(6);
  s.leases = {store_lease{"t2", {key_of(31)}, 30000}};
  f.core.step(1, s);
  s = step_of(7);
  s.releases = {"t2"};
  f.core.step(1, s);
  CHECK(f.core.leases_active() == 0);
  const auto& c = f.core.counters();
  CHECK((c.leases_total == 3 && c.leases_expired_total == 1 && c.leases_released_total == 1));
}

TEST_CASE("store core: pieces lie inside what the session holds; its end releases it", "[store_core]") {
  fixture f;
  REQUIRE(f.core.hello(1, hello_as("node-a"), "s").welcome.ok);
  store_step s = step_of(1);
  s.reserves = {ref_of(40)};
  auto out = f.core.step(1, s);
  REQUIRE(out.done.reserves.at(0).ok);
  const uint64_t bytes = out.done.reserves[0].data_bytes;
  auto at = f.core.piece(1, key_of(40), 0, bytes, true);
  REQUIRE(std::holds_alternative<uint64_t>(at));
  CHECK(std::get<uint64_t>(at) == out.done.reserves[0].data_offset);
  CHECK_THAT(std::get<std::string>(f.core.piece(1, key_of(40), 1, bytes, true)), Contains("lies outside"));
  CHECK_THAT(std::get<std::string>(f.core.piece(1, key_of(40), 0, 8, false)), Contains("has not pinned"));
  CHECK_THAT(std::get<std::string>(f.core.piece(2, key_of(40), 0, 8, true)), Contains("no session"));
  auto ended = f.core.end_session(1);
  REQUIRE(ended);
  CHECK((ended->engine_id == "node-a" && ended->reservations == 1));
  CHECK(f.core.stats().aborts_total == 1);
  CHECK_FALSE(f.core.end_session(1));
  CHECK(f.core.counters().sessions_ended_total == 1);
}

TEST_CASE("store core: a local peer gets a session of the local namespace without a hello", "[store_core]") {
  fixture plain;
  CHECK_FALSE(plain.core.open_local(1, "local:1"));
  fixture pd(std::nullopt, nullptr, ns);
  CHECK(pd.core.open_local(1, "local:1"));
  CHECK(pd.core.has_session(1));
  commit(pd.core, 1, {50});
  store_contains q;
  q.keys = {key_of(50)};
  CHECK(pd.core.contains(1, q)->num_leading_committed == 1);
}
