#include <catch.hpp>

#include <cctype>
#include <set>
#include <string>

#include "runtime/engine_identity.hpp"

using namespace ordo;

namespace {

bool is_hex16(const std::string& s) {
  if (s.size() != 16)
    return false;
  for (char c : s)
    if (!std::isxdigit(static_cast<unsigned char>(c)) || std::isupper(static_cast<unsigned char>(c)))
      return false;
  return true;
}

} // namespace

TEST_CASE("boot_id is the host's trimmed boot id", "[identity]") {
  const std::string id = boot_id();
  REQUIRE(!id.empty()); // Linux always has it
  CHECK(id.find_first_of(" \t\r\n") == std::string::npos);
  CHECK(id.size() == 36); // a UUID: 8-4-4-4-12
  CHECK(id[8] == '-');
  CHECK(boot_id() == id); // stable
}

TEST_CASE("make_engine_id is the kind and 16 hex digits, stable for its inputs", "[identity]") {
  const std::string a = make_engine_id("store", 4000, 42, "boot");
  REQUIRE(a.rfind("store-", 0) == 0);
  CHECK(is_hex16(a.substr(6)));
  CHECK(make_engine_id("store", 4000, 42, "boot") == a);

  const std::string n = make_engine_id("node", 4000, 42, "boot");
  CHECK(n.rfind("node-", 0) == 0);
  CHECK(is_hex16(n.substr(5)));
  CHECK(n.substr(5) != a.substr(6)); // the kind is hashed too

  // Each input changes the identity.
  CHECK(make_engine_id("store", 4001, 42, "boot") != a);
  CHECK(make_engine_id("store", 4000, 43, "boot") != a);
  CHECK(make_engine_id("store", 4000, 42, "boot2") != a);
  // Fields do not run into each other.
  CHECK(make_engine_id("store", 1, 23, "") != make_engine_id("store", 12, 3, ""));
}

TEST_CASE("instance nonces differ, so restarts on the same port get new identities", "[identity]") {
  std::set<uint64_t> nonces;
  std::set<std::string> ids;
  for (int i = 0; i < 64; ++i) {
    uint64_t n = instance_nonce();
    CHECK(n != 0);
    nonces.insert(n);
    ids.insert(make_engine_id("store", 4000, n, boot_id()));
  }
  CHECK(nonces.size() == 64);
  CHECK(ids.size() == 64);
}
