#include <catch.hpp>

#include "runtime/sequence_check.hpp"

using namespace ordo;

TEST_CASE("sequence check: commands must be contiguous within an epoch") {
  sequence_check check;
  sequence_stamp stamp(1);
  CHECK(check.accept(1, stamp.next()).empty());
  CHECK(check.accept(1, stamp.next()).empty());
  auto gap = check.accept(1, 4);
  CHECK(gap.find("out of order") != std::string::npos);
  CHECK(gap.find("expected (1, 3)") != std::string::npos);
  CHECK(check.last_seq() == 2); // a refused command changes nothing
  CHECK_FALSE(check.accept(1, 2).empty()); // a replay
  CHECK(check.accept(1, 3).empty());
}

TEST_CASE("sequence check: a new epoch restarts at 1, an old epoch is refused") {
  sequence_check check;
  CHECK(check.accept(1, 1).empty());
  CHECK(check.accept(1, 2).empty());
  CHECK_FALSE(check.accept(2, 5).empty());
  CHECK(check.accept(2, 1).empty());
  CHECK_FALSE(check.accept(1, 3).empty());
  CHECK(check.epoch() == 2);
}
