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
  auto h = prefix_hashes(root, t, {}, 16, t.size());
  REQUIRE(h.size() == 3); // 48 of 50 tokens
  // Changing a token in block 0 changes every later hash (the chain), not just block 0's.
  auto u = t;
  u[3] = (u[3] + 1) % 258;
  auto g = prefix_hashes(root, u, {}, 16, u.size());
  for (size_t b = 0; b < 3; ++b)
    CHECK(g[b] != h[b]);
  // Changing a token in block 2 leaves blocks 0 and 1 alone.
  auto v = t;
  v[40] = (v[40] + 1) % 258;
  auto k = prefix_hashes(root, v, {}, 16, v.size());
  CHECK(k[0] == h[0]);
  CHECK(k[1] == h[1]);
  CHECK(k[2] != h[2]);
}

TEST_CASE("prefix hash: the root is seeded by the namespace and the cache salt") {
  auto t = tokens(32);
  auto a = prefix_hashes(prefix_root(1, ""), t, {}, 16, t.size());
  auto b = prefix_hashes(prefix_root(2, ""), t, {}, 16, t.size());
  auto c = prefix_hashes(prefix_root(1, "tenant-a"), t, {}, 16, t.size());
  auto d = prefix_hashes(prefix_root(1, "tenant-b"), t, {}, 16, t.size());
  CHECK(a[0] != b[0]);
  CHECK(a[0] != c[0]);
  CHECK(c[0] != d[0]);
  CHECK(a == prefix_hashes(prefix_root(1, ""), t, {}, 16, t.size()));
}

TEST_CASE("prefix hash: extending a chain equals hashing the longer prefix at once") {
  auto root = prefix_root(9, "s");
  auto t = tokens(100, 5);
  std::vector<uint64_t> h;
  extend_prefix_hashes(root, t, {}, 16, 20, h);
  CHECK(h.size() == 1);
  extend_prefix_hashes(root, t, {}, 16, 70, h);
  CHECK(h.size() == 4);
  extend_prefix_hashes(root, t, {}, 16, 1000, h); // capped at the tokens there are
  CHECK(h == prefix_hashes(root, t, {}, 16, t.size()));
  CHECK(h.size() == 6);
}

TEST_CASE("prefix hash: the byte layout is pinned (parent LE ‖ token ids as int32 LE)") {
  // Golden values: a change of the hash layout would silently orphan every stored object.
  auto root = prefix_root(0x0123456789abcdefULL, "");
  std::vector<int32_t> t(4);
  for (int i = 0; i < 4; ++i)
    t[i] = i + 1;
  auto h = prefix_hashes(root, t, {}, 4, 4);
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

TEST_CASE("prefix hash: media spans fold into the blocks they overlap and every later block (SPEC B1)") {
  auto root = prefix_root(7, "");
  auto t = tokens(100); // 6 full blocks of 16; the span covers positions 40..59 (blocks 2 and 3)
  auto text = prefix_hashes(root, t, {}, 16, t.size());
  auto a = prefix_hashes(root, t, {{40, 20, 0xaaaa}}, 16, t.size());
  auto b = prefix_hashes(root, t, {{40, 20, 0xbbbb}}, 16, t.size());
  REQUIRE(a.size() == 6);
  REQUIRE(b.size() == 6);
  for (size_t i = 0; i < 2; ++i) { // before the span: today's hashes, shared by all three
    CHECK(a[i] == text[i]);
    CHECK(b[i] == text[i]);
  }
  for (size_t i = 2; i < 6; ++i) { // from the first overlapped block on: all differ
    CHECK(a[i] != b[i]);
    CHECK(a[i] != text[i]);
    CHECK(b[i] != text[i]);
  }
  CHECK(a == prefix_hashes(root, t, {{40, 20, 0xaaaa}}, 16, t.size())); // deterministic

  // The same media at another offset: different from its first overlapped block on, even when
  // both spans overlap exactly the same blocks.
  auto shifted = prefix_hashes(root, t, {{44, 20, 0xaaaa}}, 16, t.size());
  CHECK(shifted[1] == a[1]);
  for (size_t i = 2; i < 6; ++i)
    CHECK(shifted[i] != a[i]);
  // Moved to 52 (blocks 3 and 4): block 2 is text again, block 3 on differs from both.
  auto later = prefix_hashes(root, t, {{52, 20, 0xaaaa}}, 16, t.size());
  CHECK(later[2] == text[2]);
  for (size_t i = 3; i < 6; ++i) {
    CHECK(later[i] != a[i]);
    CHECK(later[i] != text[i]);
  }
  // A span starting exactly at a block boundary leaves the block before it alone.
  auto at_boundary = prefix_hashes(root, t, {{48, 20, 0xaaaa}}, 16, t.size());
  CHECK(at_boundary[2] == text[2]);
  CHECK(at_boundary[3] != text[3]);
  // The span's length is folded in too.
  CHECK(prefix_hashes(root, t, {{40, 21, 0xaaaa}}, 16, t.size())[2] != a[2]);
}

TEST_CASE("prefix hash: media spans beyond the full blocks change nothing; order does not matter") {
  auto root = prefix_root(7, "salt");
  auto t = tokens(100);
  auto text = prefix_hashes(root, t, {}, 16, t.size());
  CHECK(prefix_hashes(root, t, {{96, 4, 0x1234}}, 16, t.size()) == text); // the partial block
  std::vector<media_span> sorted = {{4, 8, 1}, {20, 30, 2}, {70, 5, 3}};
  std::vector<media_span> shuffled = {sorted[2], sorted[0], sorted[1]};
  CHECK(prefix_hashes(root, t, shuffled, 16, t.size()) == prefix_hashes(root, t, sorted, 16, t.size()));
  // Extending a chain with media equals hashing at once.
  std::vector<uint64_t> h;
  extend_prefix_hashes(root, t, sorted, 16, 33, h);
  CHECK(h.size() == 2);
  extend_prefix_hashes(root, t, sorted, 16, t.size(), h);
  CHECK(h == prefix_hashes(root, t, sorted, 16, t.size()));
}

TEST_CASE("prefix hash: the media byte layout is pinned (‖ hash LE64 ‖ offset LE32 ‖ length LE32)") {
  auto root = prefix_root(0x0123456789abcdefULL, "");
  std::vector<int32_t> t = {1, 2, 3, 4, 5, 6, 7, 8};
  // Two spans overlap block 0 ([0, 4)), listed out of order; the second also overlaps block 1.
  std::vector<media_span> media = {{2, 3, 0x1122334455667788ULL}, {0, 1, 0x99ULL}};
  auto h = prefix_hashes(root, t, media, 4, 8);
  REQUIRE(h.size() == 2);
  auto le = [](std::vector<uint8_t>& out, uint64_t v, int n) {
    for (int i = 0; i < n; ++i)
      out.push_back(static_cast<uint8_t>(v >> (8 * i)));
  };
  std::vector<uint8_t> b0;
  le(b0, root, 8);
  for (int i = 1; i <= 4; ++i)
    le(b0, i, 4);
  le(b0, 0x99, 8), le(b0, 0, 4), le(b0, 1, 4); // offset order: the span at 0 first
  le(b0, 0x1122334455667788ULL, 8), le(b0, 2, 4), le(b0, 3, 4);
  CHECK(h[0] == XXH64(b0.data(), b0.size(), 0));
  std::vector<uint8_t> b1;
  le(b1, h[0], 8);
  for (int i = 5; i <= 8; ++i)
    le(b1, i, 4);
  le(b1, 0x1122334455667788ULL, 8), le(b1, 2, 4), le(b1, 3, 4);
  CHECK(h[1] == XXH64(b1.data(), b1.size(), 0));
}
