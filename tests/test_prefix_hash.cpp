#include <catch.hpp>

#include "runtime/prefix_hash.hpp"

#include <xxhash.h>

using namespace ordo;

namespace {

std::vector<int32_t> tokens(int n, int start = 0) {
  std::vector<int32_t> t;
  for (int i = 0; i < n; ++i)
    t.push_back((start + i * 7) % 258);
  return t;
}

} // namespace

TEST_CASE("prefix hash: only full blocks are hashed, and each hash covers its whole prefix") {
  auto root = prefix_root(42, "");
  auto t = tokens(50);
  auto h = prefix_hashes(root, t, 16, t.size());
  REQUIRE(h.size() == 3); // 48 of 50 tokens
  // Changing a token in block 0 changes every later hash (the chain), not just block 0's.
  auto u = t;
  u[3] = (u[3] + 1) % 258;
  auto g = prefix_hashes(root, u, 16, u.size());
  for (size_t b = 0; b < 3; ++b)
    CHECK(g[b] != h[b]);
  // Changing a token in block 2 leaves blocks 0 and 1 alone.
  auto v = t;
  v[40] = (v[40] + 1) % 258;
  auto k = prefix_hashes(root, v, 16, v.size());
  CHECK(k[0] == h[0]);
  CHECK(k[1] == h[1]);
  CHECK(k[2] != h[2]);
}

TEST_CASE("prefix hash: the root is seeded by the namespace and the cache salt") {
  auto t = tokens(32);
  auto a = prefix_hashes(prefix_root(1, ""), t, 16, t.size());
  auto b = prefix_hashes(prefix_root(2, ""), t, 16, t.size());
  auto c = prefix_hashes(prefix_root(1, "tenant-a"), t, 16, t.size());
  auto d = prefix_hashes(prefix_root(1, "tenant-b"), t, 16, t.size());
  CHECK(a[0] != b[0]);
  CHECK(a[0] != c[0]);
  CHECK(c[0] != d[0]);
  CHECK(a == prefix_hashes(prefix_root(1, ""), t, 16, t.size()));
}

TEST_CASE("prefix hash: extending a chain equals hashing the longer prefix at once") {
  auto root = prefix_root(9, "s");
  auto t = tokens(100, 5);
  std::vector<uint64_t> h;
  extend_prefix_hashes(root, t, 16, 20, h);
  CHECK(h.size() == 1);
  extend_prefix_hashes(root, t, 16, 70, h);
  CHECK(h.size() == 4);
  extend_prefix_hashes(root, t, 16, 1000, h); // capped at the tokens there are
  CHECK(h == prefix_hashes(root, t, 16, t.size()));
  CHECK(h.size() == 6);
}

TEST_CASE("prefix hash: the byte layout is pinned (parent LE ‖ token ids as int32 LE)") {
  // Golden values: a change of the hash layout would silently orphan every stored object.
  auto root = prefix_root(0x0123456789abcdefULL, "");
  std::vector<int32_t> t(4);
  for (int i = 0; i < 4; ++i)
    t[i] = i + 1;
  auto h = prefix_hashes(root, t, 4, 4);
  REQUIRE(h.size() == 1);
  // The same bytes built by hand, independently of prefix_hash.cpp.
  uint8_t root_bytes[8] = {0xef, 0xcd, 0xab, 0x89, 0x67, 0x45, 0x23, 0x01};
  uint64_t expect_root = XXH64(root_bytes, sizeof root_bytes, 0);
  uint8_t block_bytes[8 + 16] = {};
  for (int i = 0; i < 8; ++i)
    block_bytes[i] = static_cast<uint8_t>(expect_root >> (8 * i));
  for (int i = 0; i < 4; ++i)
    block_bytes[8 + 4 * i] = static_cast<uint8_t>(i + 1);
  CHECK(root == expect_root);
  CHECK(h[0] == XXH64(block_bytes, sizeof block_bytes, 0));
  CHECK(root == 0xea3c52081e9843ecULL);
  CHECK(h[0] == 0xcd5d3acdefefe1f2ULL);
  CHECK(chain_digest(0, h[0]) != chain_digest(h[0], 0));
}
