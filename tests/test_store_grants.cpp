// runtime/store_grants: the store client's ledger of outstanding grants across store sessions
// (issue 38 item 2), without actors: finished transfers go to the session that granted them, an
// ended session's keys are refused until their transfers finish, staging ranges come back.
#include <catch.hpp>

#include "runtime/store_grants.hpp"

using namespace ordo;

namespace {

object_key key_of(uint64_t hash) { return object_key{7, hash, 0}; }

} // namespace

TEST_CASE("store grants: finished transfers go to the session that granted them", "[store_grants]") {
  store_grant_ledger ledger;
  ledger.granted(1, key_of(1), 100, true, 4096);  // session 1 reserved key 1, staged at 4096
  ledger.granted(1, key_of(2), 200, false, 8192); // and pinned key 2
  ledger.granted(2, key_of(3), 300, false);       // session 2 pinned key 3 (shm: not staged)
  CHECK(ledger.outstanding(1) == 2);
  CHECK(ledger.outstanding(2) == 1);
  CHECK(ledger.held_elsewhere(key_of(1), 2));
  CHECK_FALSE(ledger.held_elsewhere(key_of(1), 1));
  CHECK_FALSE(ledger.held_elsewhere(key_of(9), 2));

  // Session 2 is live; session 1 ended with its transfers in flight.
  store_step step;
  step.commits = {key_of(1)};
  step.commit_checksums = {0xabc};
  step.unpins = {key_of(2), key_of(3), key_of(9)};
  auto routes = ledger.finish_step(step, 2);
  CHECK(routes.forward.commits.empty()); // session 1's commit does not go to session 2
  CHECK(routes.forward.commit_checksums.empty());
  CHECK(routes.forward.unpins == std::vector<object_key>{key_of(3)});
  CHECK(routes.writes.empty());
  CHECK(routes.give_back_after == std::vector<uint64_t>{4096});
  CHECK(routes.give_back_now == std::vector<uint64_t>{8192});
  CHECK(routes.ended_sessions == std::vector<uint64_t>{1, 1});
  CHECK(ledger.outstanding(1) == 0);
  CHECK(ledger.outstanding(2) == 0);
  CHECK(ledger.empty());
}

TEST_CASE("store grants: a live session's commit writes its staged bytes first, with its checksum",
          "[store_grants]") {
  store_grant_ledger ledger;
  ledger.granted(5, key_of(1), 100, true, 0);
  ledger.granted(5, key_of(2), 100, true, 128);
  store_step step;
  step.commits = {key_of(1)};
  step.commit_checksums = {0x11};
  step.aborts = {key_of(2)};
  auto routes = ledger.finish_step(step, 5);
  REQUIRE(routes.writes.size() == 1);
  CHECK((routes.writes[0].key == key_of(1) && routes.writes[0].staged == 0 && routes.writes[0].bytes == 100));
  CHECK(routes.forward.commits == std::vector<object_key>{key_of(1)});
  CHECK(routes.forward.commit_checksums == std::vector<uint64_t>{0x11});
  CHECK(routes.forward.aborts == std::vector<object_key>{key_of(2)});
  CHECK(routes.give_back_after == std::vector<uint64_t>{0});
  CHECK(routes.give_back_now == std::vector<uint64_t>{128});
  CHECK(routes.ended_sessions.empty());
  // Nothing granted is nothing finished: a second commit of the same key routes nowhere.
  CHECK(ledger.finish_step(step, 5).forward.commits.empty());
}

TEST_CASE("store grants: pins nest, each finish gives back one staging range", "[store_grants]") {
  store_grant_ledger ledger;
  ledger.granted(1, key_of(1), 64, false, 0);
  ledger.granted(1, key_of(1), 64, false, 64);
  auto first = ledger.finish(key_of(1), false);
  CHECK((first.gen == std::optional<uint64_t>(1) && first.staged == std::optional<uint64_t>(64)));
  CHECK(ledger.outstanding(1) == 1);
  auto reservation = ledger.finish(key_of(1), true); // none held: nothing
  CHECK_FALSE(reservation.gen);
  auto second = ledger.finish(key_of(1), false);
  CHECK(second.staged == std::optional<uint64_t>(0));
  CHECK(ledger.empty());
}

TEST_CASE("store grants: grants the node could not stage are released with that session's next step",
          "[store_grants]") {
  store_grant_ledger ledger;
  ledger.defer_release(3, key_of(1), false);
  ledger.defer_release(3, key_of(2), true);
  CHECK(ledger.take_deferred(4).unpins.empty()); // another session's step: dropped, not sent there
  CHECK(ledger.take_deferred(3).unpins.empty());
  ledger.defer_release(3, key_of(1), false);
  ledger.defer_release(3, key_of(2), true);
  auto deferred = ledger.take_deferred(3);
  CHECK(deferred.unpins == std::vector<object_key>{key_of(1)});
  CHECK(deferred.aborts == std::vector<object_key>{key_of(2)});
  CHECK(ledger.take_deferred(3).aborts.empty());
}
