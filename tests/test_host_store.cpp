#include <catch.hpp>

#include "kernels/object_checksum.hpp"
#include "runtime/checksum.hpp"
#include "runtime/host_store.hpp"

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <iterator>
#include <list>
#include <map>
#include <random>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>


using namespace ordo;

namespace {

// sizeof(object_header) rounded up to 64; slot_data bytes of data then make a span of exactly 512.
constexpr size_t header_bytes = (sizeof(object_header) + 63) / 64 * 64;
constexpr size_t slot = 512;
constexpr size_t slot_data = slot - header_bytes;
size_t span_of(size_t data_bytes) { return (header_bytes + data_bytes + 63) / 64 * 64; }
constexpr uint64_t fingerprint = 0xf00d;

object_key key(uint64_t hash, object_kind kind = object_kind::kv_chunk) {
  return object_key{7, hash, static_cast<uint8_t>(kind)};
}

uint64_t boundary_of(uint64_t hash) { return hash * 1000 + 1; }

object_header header_for(uint64_t hash, int32_t first_token = 64) {
  object_header h;
  h.layout_fingerprint = fingerprint;
  h.boundary_hash = boundary_of(hash);
  h.first_token = first_token;
  h.tokens = 256;
  h.num_blocks = 4;
  return h;
}

uint8_t pattern(uint64_t seed, size_t i) { return static_cast<uint8_t>((seed * 131 + i * 7 + (i >> 8)) & 0xff); }

// A test arena plus helpers that do what the store actor does around the core.
struct fixture {
  explicit fixture(size_t capacity) : arena(capacity, 0), store(arena.data(), capacity) {}

  reserve_status reserve(uint64_t hash, size_t bytes, size_t* offset_out = nullptr) {
    size_t offset = 0;
    auto s = store.reserve(key(hash), header_for(hash), bytes, offset);
    if (s == reserve_status::ok) {
      for (size_t i = 0; i < bytes; ++i)
        arena[offset + i] = pattern(hash, i);
      if (offset_out)
        *offset_out = offset;
    }
    return s;
  }
  // reserve + write + commit; returns the data offset.
  size_t put(uint64_t hash, size_t bytes = slot_data) {
    size_t offset = 0;
    REQUIRE(reserve(hash, bytes, &offset) == reserve_status::ok);
    REQUIRE(store.commit(key(hash)));
    return offset;
  }
  pin_status pin(uint64_t hash, uint64_t fp = fingerprint) {
    object_header h;
    size_t offset = 0;
    return store.pin(key(hash), fp, boundary_of(hash), h, offset);
  }
  bool data_intact(uint64_t hash, size_t offset, size_t bytes) const {
    for (size_t i = 0; i < bytes; ++i)
      if (arena[offset + i] != pattern(hash, i))
        return false;
    return true;
  }

  std::vector<uint8_t> arena;
  host_store store;
};

} // namespace

TEST_CASE("host store: reserve, write, commit, then pin returns the verified header and data") {
  fixture f(4 * slot);
  size_t offset = 0;
  REQUIRE(f.reserve(1, 1000, &offset) == reserve_status::ok);
  CHECK(offset % object_alignment == 0);
  REQUIRE(f.store.commit(key(1)));
  CHECK(f.store.contains(key(1)));

  object_header h;
  size_t pinned_at = 0;
  REQUIRE(f.store.pin(key(1), fingerprint, boundary_of(1), h, pinned_at) == pin_status::ok);
  CHECK(pinned_at == offset);
  CHECK(h.magic == object_magic);
  CHECK(h.kind == static_cast<uint8_t>(object_kind::kv_chunk));
  CHECK(h.layout_fingerprint == fingerprint);
  CHECK(h.boundary_hash == boundary_of(1));
  CHECK(h.first_token == 64);
  CHECK(h.tokens == 256);
  CHECK(h.num_blocks == 4);
  CHECK(h.data_bytes == 1000);
  CHECK(h.checksum == object_checksum(f.arena.data() + offset, 1000));
  CHECK(f.data_intact(1, pinned_at, 1000));
  // The header sits in the arena right before the data.
  object_header in_arena;
  std::memcpy(&in_arena, f.arena.data() + offset - header_bytes, sizeof in_arena);
  CHECK(in_arena.checksum == h.checksum);
  CHECK(in_arena.magic == object_magic);
  CHECK(f.store.unpin(key(1)));
  CHECK_FALSE(f.store.unpin(key(1)));

  const auto& s = f.store.stats();
  CHECK(s.num_objects == 1);
  CHECK(s.bytes_used == static_cast<int64_t>(span_of(1000)));
  CHECK(span_of(1000) % 64 == 0);
  CHECK(s.bytes_capacity == static_cast<int64_t>(4 * slot));
  CHECK(s.reserves_total == 1);
  CHECK(s.commits_total == 1);
  CHECK(s.pins_total == 1);
  CHECK(f.store.check_invariants() == "");
}

TEST_CASE("host store: an object records who committed it, only once committed") {
  fixture f(4 * slot);
  size_t offset = 0;
  REQUIRE(f.reserve(1, 1000, &offset) == reserve_status::ok);
  CHECK_FALSE(f.store.set_committer(key(1), "node-a")); // a reservation is not committed yet
  REQUIRE(f.store.commit(key(1)));
  REQUIRE(f.store.committer_of(key(1)) != nullptr);
  CHECK(*f.store.committer_of(key(1)) == "");
  CHECK(f.store.set_committer(key(1), "node-a"));
  CHECK(*f.store.committer_of(key(1)) == "node-a");
  CHECK(f.store.committer_of(key(2)) == nullptr);
  f.store.evict_all();
  CHECK(f.store.committer_of(key(1)) == nullptr);
}

TEST_CASE("host store: a reservation is invisible until committed") {
  fixture f(4 * slot);
  REQUIRE(f.reserve(1, slot_data) == reserve_status::ok);
  CHECK_FALSE(f.store.contains(key(1)));
  CHECK(f.pin(1) == pin_status::missing);
  CHECK(f.store.stats().misses_total == 1);
  CHECK(f.store.stats().num_objects == 0);
  CHECK(f.store.stats().bytes_used == static_cast<int64_t>(slot)); // its room is taken already
  CHECK_FALSE(f.store.unpin(key(1)));
  CHECK_FALSE(f.store.test_corrupt(key(1), 0));
  CHECK(f.store.check_invariants() == "");

  REQUIRE(f.store.commit(key(1)));
  CHECK_FALSE(f.store.commit(key(1)));  // committed once
  CHECK_FALSE(f.store.abort(key(1)));   // too late to abort
  CHECK_FALSE(f.store.commit(key(2)));  // never reserved
  CHECK(f.store.contains(key(1)));
  CHECK(f.pin(1) == pin_status::ok);
  CHECK(f.pin(2) == pin_status::missing);
  CHECK(f.store.stats().misses_total == 2);
  CHECK(f.store.check_invariants() == "");
}

TEST_CASE("host store: a key being written or committed answers exists; the kind is part of the key") {
  fixture f(4 * slot);
  REQUIRE(f.reserve(1, slot_data) == reserve_status::ok);
  CHECK(f.reserve(1, slot_data) == reserve_status::exists);
  REQUIRE(f.store.commit(key(1)));
  CHECK(f.reserve(1, 100) == reserve_status::exists);
  size_t offset = 0;
  CHECK(f.store.reserve(key(1, object_kind::state_image), header_for(1), 100, offset) == reserve_status::ok);
  CHECK(f.store.stats().reserves_total == 2);
  CHECK(f.store.stats().rejected_total == 0);
  CHECK(f.store.check_invariants() == "");
}

TEST_CASE("host store: a full store evicts the least recently used unpinned object first") {
  fixture f(4 * slot);
  for (uint64_t h = 1; h <= 4; ++h)
    f.put(h); // LRU: 1 2 3 4
  REQUIRE(f.pin(1) == pin_status::ok);
  REQUIRE(f.store.unpin(key(1))); // a read refreshes 1: LRU 2 3 4 1
  REQUIRE(f.pin(2) == pin_status::ok); // 2 is being read: never a victim

  REQUIRE(f.reserve(5, slot_data) == reserve_status::ok);
  CHECK_FALSE(f.store.contains(key(3))); // 2 is pinned, so 3 is the oldest evictable
  CHECK(f.store.contains(key(1)));
  CHECK(f.store.contains(key(2)));
  CHECK(f.store.contains(key(4)));
  REQUIRE(f.reserve(6, slot_data) == reserve_status::ok);
  CHECK_FALSE(f.store.contains(key(4)));
  CHECK(f.store.contains(key(1)));
  // 5 and 6 are still being written (not victims), 2 is pinned: 1 is all that is left to evict.
  REQUIRE(f.reserve(7, slot_data) == reserve_status::ok);
  CHECK_FALSE(f.store.contains(key(1)));
  CHECK(f.reserve(8, slot_data) == reserve_status::no_space);
  CHECK(f.store.contains(key(2)));
  CHECK(f.store.stats().evictions_total == 3);
  CHECK(f.store.stats().rejected_total == 1);
  CHECK(f.store.check_invariants() == "");

  // Once unpinned, 2 goes behind the objects committed before the unpin.
  REQUIRE(f.store.commit(key(5)));
  REQUIRE(f.store.unpin(key(2)));
  REQUIRE(f.store.commit(key(6)));
  REQUIRE(f.reserve(8, slot_data) == reserve_status::ok);
  CHECK_FALSE(f.store.contains(key(5)));
  CHECK(f.store.contains(key(2)));
  CHECK(f.store.contains(key(6)));
  CHECK(f.store.check_invariants() == "");
}

TEST_CASE("host store: too_large and no_space leave every object in place") {
  fixture f(4 * slot);
  CHECK(f.reserve(1, 4 * slot) == reserve_status::too_large);          // header makes it larger than the arena
  CHECK(f.reserve(1, SIZE_MAX - 8) == reserve_status::too_large);      // no overflow on absurd sizes
  CHECK(std::string(to_string(reserve_status::too_large)) == "too_large");
  CHECK(f.reserve(1, 4 * slot - header_bytes) == reserve_status::ok);  // exactly the arena
  REQUIRE(f.store.abort(key(1)));

  for (uint64_t h = 1; h <= 4; ++h)
    f.put(h);
  REQUIRE(f.pin(2) == pin_status::ok); // slot 1 is held: the largest run evictions could make is 2 slots
  CHECK(f.reserve(9, 3 * slot - header_bytes) == reserve_status::no_space);
  for (uint64_t h = 1; h <= 4; ++h)
    CHECK(f.store.contains(key(h))); // nothing was evicted for a reserve that could not succeed
  CHECK(f.store.stats().evictions_total == 0);
  CHECK(f.store.stats().rejected_total == 3);

  // Two slots do fit once 3 and 4 go; LRU order evicts 1 on the way, whose slot alone is too small.
  REQUIRE(f.reserve(9, 2 * slot - header_bytes) == reserve_status::ok);
  CHECK_FALSE(f.store.contains(key(1)));
  CHECK_FALSE(f.store.contains(key(3)));
  CHECK_FALSE(f.store.contains(key(4)));
  CHECK(f.store.contains(key(2)));
  CHECK(f.store.stats().evictions_total == 3);
  CHECK(f.store.check_invariants() == "");
}

TEST_CASE("host store: freed neighbours coalesce into one range that a larger object can use") {
  for (bool left_first : {true, false}) {
    CAPTURE(left_first);
    fixture f(4 * slot);
    std::vector<size_t> offsets;
    for (uint64_t h = 1; h <= 4; ++h) {
      size_t offset = 0;
      REQUIRE(f.reserve(h, slot_data, &offset) == reserve_status::ok);
      offsets.push_back(offset);
    }
    CHECK(offsets == std::vector<size_t>{header_bytes, slot + header_bytes, 2 * slot + header_bytes,
                                         3 * slot + header_bytes});
    REQUIRE(f.store.commit(key(1)));
    REQUIRE(f.store.commit(key(4)));
    // Free the middle two, in either order: the second release must merge with the first.
    REQUIRE(f.store.abort(key(left_first ? 2 : 3)));
    REQUIRE(f.store.abort(key(left_first ? 3 : 2)));
    CHECK(f.store.check_invariants() == "");
    size_t offset = 0;
    REQUIRE(f.reserve(5, 2 * slot - header_bytes, &offset) == reserve_status::ok);
    CHECK(offset == slot + header_bytes);
    CHECK(f.store.stats().evictions_total == 0);
    CHECK(f.store.contains(key(1)));
    CHECK(f.store.contains(key(4)));
    CHECK(f.store.check_invariants() == "");
  }
}

TEST_CASE("host store: first fit takes the lowest free range that is large enough") {
  fixture f(6 * slot);
  for (uint64_t h = 1; h <= 6; ++h)
    f.put(h);
  for (uint64_t h : {1, 2, 4, 5})
    REQUIRE(f.pin(h) == pin_status::ok); // pinned: the LRU never chooses for us below
  // Drop 3 and 6 by failed pins: free slots 2 and 5, one slot each.
  REQUIRE(f.store.test_corrupt(key(3), 0));
  REQUIRE(f.store.test_corrupt(key(6), 0));
  REQUIRE(f.pin(3) == pin_status::bad_checksum);
  REQUIRE(f.pin(6) == pin_status::bad_checksum);
  // Two half-slot objects share slot 2; a full-slot one goes on to slot 5.
  size_t offset = 0;
  REQUIRE(f.reserve(7, slot / 2 - header_bytes, &offset) == reserve_status::ok);
  CHECK(offset == 2 * slot + header_bytes);
  REQUIRE(f.reserve(8, slot / 2 - header_bytes, &offset) == reserve_status::ok);
  CHECK(offset == 2 * slot + slot / 2 + header_bytes);
  REQUIRE(f.reserve(9, slot_data, &offset) == reserve_status::ok);
  CHECK(offset == 5 * slot + header_bytes);
  CHECK(f.store.stats().evictions_total == 0);
  CHECK(f.store.check_invariants() == "");
}

TEST_CASE("host store: corrupted data fails its checksum on pin and the object is gone") {
  fixture f(4 * slot);
  f.put(1);
  f.put(2);
  const auto used = f.store.stats().bytes_used;
  REQUIRE(f.store.test_corrupt(key(1), 1000)); // 1000 % data_bytes: any byte of the data
  CHECK(f.store.contains(key(1)));              // contains() does not verify
  CHECK(f.pin(1) == pin_status::bad_checksum);
  CHECK(std::string(to_string(pin_status::bad_checksum)) == "bad_checksum");
  CHECK(f.store.stats().checksum_failures_total == 1);
  CHECK_FALSE(f.store.contains(key(1)));
  CHECK(f.store.stats().bytes_used == used - static_cast<int64_t>(slot));
  CHECK(f.pin(1) == pin_status::missing);
  CHECK(f.store.stats().misses_total == 1);
  CHECK(f.store.stats().pins_total == 0);
  CHECK(f.pin(2) == pin_status::ok); // the neighbour is untouched
  CHECK(f.store.check_invariants() == "");
  // The key can be stored again.
  f.put(1);
  CHECK(f.pin(1) == pin_status::ok);
  CHECK(f.store.check_invariants() == "");
}

TEST_CASE("host store: a reader expecting another fingerprint or boundary gets bad_header, and the object is dropped") {
  fixture f(4 * slot);
  f.put(1);
  f.put(2);
  CHECK(f.pin(1, fingerprint + 1) == pin_status::bad_header);
  CHECK_FALSE(f.store.contains(key(1)));
  CHECK(f.pin(1) == pin_status::missing);

  object_header h;
  size_t offset = 0;
  CHECK(f.store.pin(key(2), fingerprint, boundary_of(2) + 1, h, offset) == pin_status::bad_header);
  CHECK_FALSE(f.store.contains(key(2)));
  CHECK(f.store.stats().header_failures_total == 2);
  CHECK(f.store.stats().checksum_failures_total == 0);
  CHECK(f.store.stats().num_objects == 0);
  CHECK(f.store.check_invariants() == "");
}

TEST_CASE("host store: corrupted header bytes in the arena are caught by pin") {
  // One flipped bit in each field the reader's expectation or the commit-time copy covers.
  for (size_t byte : {offsetof(object_header, magic), offsetof(object_header, kind),
                      offsetof(object_header, layout_fingerprint), offsetof(object_header, boundary_hash),
                      offsetof(object_header, first_token), offsetof(object_header, tokens),
                      offsetof(object_header, num_blocks), offsetof(object_header, data_bytes),
                      offsetof(object_header, checksum)}) {
    CAPTURE(byte);
    fixture f(4 * slot);
    const size_t data_offset = f.put(1);
    f.arena[data_offset - header_bytes + byte] ^= 0x01;
    CHECK(f.pin(1) == pin_status::bad_header);
    CHECK_FALSE(f.store.contains(key(1)));
    CHECK(f.store.stats().header_failures_total == 1);
    CHECK(f.store.check_invariants() == "");
  }
}

TEST_CASE("host store: a pinned object is never dropped under its readers") {
  fixture f(2 * slot);
  f.put(1);
  REQUIRE(f.pin(1) == pin_status::ok);
  REQUIRE(f.pin(1) == pin_status::ok); // pins nest
  // Another reader's wrong expectation fails that reader only.
  CHECK(f.pin(1, fingerprint + 1) == pin_status::bad_header);
  CHECK(f.store.contains(key(1)));
  REQUIRE(f.store.unpin(key(1)));
  f.put(2);
  // The whole arena would need 1 gone, and 1 is still pinned once: 2 stays too.
  CHECK(f.reserve(3, 2 * slot - header_bytes) == reserve_status::no_space);
  CHECK(f.store.contains(key(1)));
  CHECK(f.store.contains(key(2)));
  REQUIRE(f.store.unpin(key(1)));
  CHECK_FALSE(f.store.unpin(key(1)));
  CHECK(f.store.check_invariants() == "");
}

TEST_CASE("host store: abort frees the reservation's room") {
  fixture f(4 * slot);
  std::vector<size_t> offsets(5);
  for (uint64_t h = 1; h <= 4; ++h)
    REQUIRE(f.reserve(h, slot_data, &offsets[h]) == reserve_status::ok);
  CHECK(f.reserve(5, slot_data) == reserve_status::no_space); // nothing committed, nothing to evict
  REQUIRE(f.store.abort(key(3)));
  CHECK_FALSE(f.store.abort(key(3)));
  size_t offset = 0;
  REQUIRE(f.reserve(5, slot_data, &offset) == reserve_status::ok);
  CHECK(offset == offsets[3]);
  CHECK(f.store.stats().aborts_total == 1);
  CHECK(f.store.stats().bytes_used == static_cast<int64_t>(4 * slot));
  CHECK(f.store.check_invariants() == "");
}

TEST_CASE("host store: a seeded random workload keeps every invariant and matches a model") {
  // The model: what is committed, pinned, corrupted, and the LRU order of committed unpinned keys.
  struct model_object {
    bool committed = false;
    int pins = 0;
    bool corrupted = false;
    size_t bytes = 0;
    size_t offset = 0;
  };
  const size_t capacity = 24 * 1024 + 40; // not a multiple of 64: the tail is never usable
  fixture f(capacity);
  std::map<uint64_t, model_object> model;
  std::list<uint64_t> lru;
  std::mt19937_64 rng(20261202);
  auto pick = [&](uint64_t n) { return std::uniform_int_distribution<uint64_t>(0, n - 1)(rng); };
  auto lru_remove = [&](uint64_t h) { lru.remove(h); };
  int64_t evictions = 0;
  int counts[8] = {};

  for (int op = 0; op < 8000; ++op) {
    const uint64_t what = pick(100);
    // Mostly keys in the state the operation acts on (so commits, pins and unpins find
    // something), some at random.
    uint64_t h = pick(64);
    std::vector<uint64_t> fitting;
    for (const auto& [k, m] : model) {
      const bool fits = what < 30    ? false
                        : what < 50  ? !m.committed
                        : what < 72  ? m.committed
                        : what < 95  ? m.pins > 0
                                     : m.committed;
      if (fits)
        fitting.push_back(k);
    }
    if (!fitting.empty() && pick(4) != 0)
      h = fitting[pick(fitting.size())];
    auto it = model.find(h);
    INFO("op " << op << " key " << h << " what " << what);
    if (what < 30) { // reserve (and write)
      const size_t bytes = pick(10) == 0 ? 20000 + pick(8000) : pick(2500);
      const size_t span = span_of(bytes);
      // Room there would be with every evictable object gone: the largest gap between the
      // objects that must stay (being written or pinned), from the model's own offsets.
      std::vector<std::pair<size_t, size_t>> staying;
      for (const auto& [k, m] : model)
        if (!m.committed || m.pins > 0)
          staying.emplace_back(m.offset - header_bytes, span_of(m.bytes));
      std::sort(staying.begin(), staying.end());
      size_t largest_gap = 0, end = 0;
      for (const auto& [offset, length] : staying) {
        largest_gap = std::max(largest_gap, offset - end);
        end = offset + length;
      }
      largest_gap = std::max(largest_gap, capacity - end);

      size_t offset = 0;
      auto s = f.reserve(h, bytes, &offset);
      if (it != model.end()) {
        CHECK(s == reserve_status::exists);
      } else if (span > capacity) {
        CHECK(s == reserve_status::too_large);
      } else if (largest_gap < span) {
        CHECK(s == reserve_status::no_space);
        for (const auto& [k, m] : model)
          CHECK(f.store.contains(key(k)) == m.committed); // nothing evicted
        ++counts[1];
      } else {
        REQUIRE(s == reserve_status::ok);
        // The keys that went are exactly the oldest of the model's LRU.
        size_t gone = 0;
        while (!lru.empty() && !f.store.contains(key(lru.front()))) {
          model.erase(lru.front());
          lru.pop_front();
          ++gone;
        }
        for (const auto& [k, m] : model)
          CHECK(f.store.contains(key(k)) == m.committed);
        evictions += static_cast<int64_t>(gone);
        CHECK(f.store.stats().evictions_total == evictions);
        model[h] = model_object{false, 0, false, bytes, offset};
        ++counts[0];
      }
    } else if (what < 50) { // commit or abort a reservation
      const bool do_commit = what < 46;
      const bool writing = it != model.end() && !it->second.committed;
      if (do_commit) {
        CHECK(f.store.commit(key(h)) == writing);
        if (writing) {
          it->second.committed = true;
          lru.push_back(h);
        }
      } else {
        CHECK(f.store.abort(key(h)) == writing);
        if (writing)
          model.erase(it);
      }
    } else if (what < 72) { // pin, sometimes with a wrong expectation
      const bool wrong = pick(20) == 0;
      object_header hdr;
      size_t offset = 0;
      auto s = f.store.pin(key(h), wrong ? fingerprint ^ 1 : fingerprint, boundary_of(h), hdr, offset);
      if (it == model.end() || !it->second.committed) {
        CHECK(s == pin_status::missing);
      } else if (wrong) {
        CHECK(s == pin_status::bad_header);
        if (it->second.pins == 0) {
          lru_remove(h);
          model.erase(it);
        }
        ++counts[2];
      } else if (it->second.corrupted && it->second.pins == 0) {
        CHECK(s == pin_status::bad_checksum);
        lru_remove(h);
        model.erase(it);
        ++counts[3];
      } else {
        REQUIRE(s == pin_status::ok);
        CHECK(offset == it->second.offset);
        CHECK(hdr.data_bytes == it->second.bytes);
        if (!it->second.corrupted)
          CHECK(f.data_intact(h, offset, it->second.bytes));
        if (it->second.pins++ == 0)
          lru_remove(h);
        ++counts[4];
      }
    } else if (what < 95) { // unpin: back to the most recently used end
      const bool pinned = it != model.end() && it->second.pins > 0;
      CHECK(f.store.unpin(key(h)) == pinned);
      if (pinned && --it->second.pins == 0)
        lru.push_back(h);
    } else { // corrupt one data byte, once per object (a second flip of the same byte would undo it)
      const bool can = it != model.end() && it->second.committed && it->second.bytes > 0;
      if (!can || !it->second.corrupted)
        CHECK(f.store.test_corrupt(key(h), pick(1u << 20)) == can);
      if (can) {
        it->second.corrupted = true;
        ++counts[5];
      }
    }
    REQUIRE(f.store.check_invariants() == "");
    int64_t committed = 0;
    for (const auto& [k, m] : model)
      committed += m.committed;
    REQUIRE(f.store.stats().num_objects == committed);
  }
  INFO("reserved " << counts[0] << ", no_space " << counts[1] << ", bad_header " << counts[2] << ", bad_checksum "
                    << counts[3] << ", pinned " << counts[4] << ", evicted " << evictions);
  // The workload reached every branch worth reaching.
  CHECK(counts[0] > 500);  // reserves ok
  CHECK(counts[1] > 5);    // no_space
  CHECK(counts[2] > 5);    // bad_header
  CHECK(counts[3] > 5);    // bad_checksum
  CHECK(counts[4] > 300);  // pins ok
  CHECK(evictions > 100);
}

TEST_CASE("host store: a commit with the writer's summed checksum records it; a pin verifies against it") {
  fixture f(16 * slot);
  size_t offset = 0;
  REQUIRE(f.reserve(1, 1000, &offset) == reserve_status::ok);
  const uint64_t right = object_checksum(f.arena.data() + offset, 1000);
  REQUIRE(f.store.commit(key(1), right));
  CHECK(f.pin(1) == pin_status::ok);
  // A summed value that does not match the bytes (a gather that summed other bytes) fails the pin.
  REQUIRE(f.reserve(2, 1000, &offset) == reserve_status::ok);
  REQUIRE(f.store.commit(key(2), object_checksum(f.arena.data() + offset, 1000) ^ 1));
  CHECK(f.pin(2) == pin_status::bad_checksum);
  // apply() takes one checksum per commit, or none; any other count is refused.
  REQUIRE(f.reserve(3, 1000, &offset) == reserve_status::ok);
  store_step bad;
  bad.commits = {key(3)};
  bad.commit_checksums = {1, 2};
  CHECK_THROWS_AS(apply(&f.store, bad), std::invalid_argument);
  store_step good;
  good.commits = {key(3)};
  good.commit_checksums = {object_checksum(f.arena.data() + offset, 1000)};
  CHECK(apply(&f.store, good).commits_unreserved.empty());
  CHECK(f.pin(3) == pin_status::ok);
}

TEST_CASE("host store: a summing reader's pin checks the header only; its corrupt unpin drops the object") {
  fixture f(16 * slot);
  const size_t offset = f.put(1, 1000);
  CHECK(f.store.test_corrupt(key(1), 10));
  object_header h;
  size_t at = 0;
  // Hashing, the pin would fail; the summing reader gets it, with the recorded checksum.
  REQUIRE(f.store.pin(key(1), fingerprint, boundary_of(1), h, at, /*hash_data=*/false) == pin_status::ok);
  CHECK(at == offset);
  // A second reader that hashes while it is pinned finds it wrong: refused, and marked.
  CHECK(f.pin(1) == pin_status::bad_checksum);
  CHECK(f.store.stats().checksum_failures_total == 1);
  CHECK(f.store.contains(key(1))); // its first reader still holds it
  CHECK(f.store.pin(key(1), fingerprint, boundary_of(1), h, at, false) == pin_status::bad_checksum);
  // The summing reader found it wrong too: with its unpin the object goes (counted once).
  CHECK(f.store.unpin_corrupt(key(1)));
  CHECK_FALSE(f.store.contains(key(1)));
  CHECK(f.store.stats().checksum_failures_total == 1);
  CHECK_FALSE(f.store.unpin_corrupt(key(1)));
  CHECK(f.store.check_invariants().empty());

  // A good object: summed pins nest, a corrupt verdict waits for the last reader.
  f.put(2, 1000);
  REQUIRE(f.store.pin(key(2), fingerprint, boundary_of(2), h, at, false) == pin_status::ok);
  REQUIRE(f.store.pin(key(2), fingerprint, boundary_of(2), h, at, false) == pin_status::ok);
  store_step s;
  s.unpins_corrupt = {key(2)};
  CHECK(apply(&f.store, s).unpins_unpinned.empty());
  CHECK(f.store.contains(key(2)));
  CHECK(f.store.stats().checksum_failures_total == 2);
  s.unpins_corrupt.clear();
  s.unpins = {key(2)};
  apply(&f.store, s);
  CHECK_FALSE(f.store.contains(key(2)));
  CHECK(f.store.check_invariants().empty());

}

TEST_CASE("host store: a held object is hashed again by the first hashing pin after its pins went to 0") {
  fixture f(16 * slot);
  f.put(1, 1000);
  REQUIRE(f.store.hold(key(1))); // a P/D lease keeps it off the LRU throughout
  CHECK(f.pin(1) == pin_status::ok);
  CHECK(f.store.unpin(key(1)));
  CHECK(f.store.test_corrupt(key(1), 3));
  CHECK(f.pin(1) == pin_status::bad_checksum);
  CHECK(f.store.release_hold(key(1)));
  CHECK_FALSE(f.store.contains(key(1))); // dropped with its last hold
  CHECK(f.store.check_invariants().empty());
}

TEST_CASE("object checksum: a sum of word terms whose value does not depend on the thread count") {
  std::vector<uint8_t> data(5 * checksum_piece_bytes + 12345);
  std::mt19937_64 rng(7);
  for (auto& b : data)
    b = static_cast<uint8_t>(rng());
  const uint64_t one = object_checksum(data.data(), data.size(), 1);
  CHECK(object_checksum(data.data(), data.size(), 3) == one);
  CHECK(object_checksum(data.data(), data.size(), 0) == one);
  // The definition, word by word: little-endian words, the last one zero-padded.
  uint64_t sum = 0;
  for (size_t at = 0; at < data.size(); at += 8) {
    uint64_t w = 0;
    for (size_t b = 0; b < 8 && at + b < data.size(); ++b)
      w |= uint64_t{data[at + b]} << (8 * b);
    sum += checksum_term(w, at / 8);
  }
  CHECK(one == checksum_finish(sum, data.size()));
  // Any split at word boundaries, summed in any order, gives the same sum (what a copy kernel's
  // threads rely on).
  const size_t cut = 8 * 4099;
  CHECK(checksum_terms(data.data() + cut, data.size() - cut, cut / 8) + checksum_terms(data.data(), cut, 0) == sum);
  // A flipped byte in any piece changes it, and so do two words swapped.
  for (size_t at : {size_t{0}, checksum_piece_bytes + 5, data.size() - 1}) {
    data[at] ^= 1;
    CHECK(object_checksum(data.data(), data.size(), 4) != one);
    data[at] ^= 1;
  }
  std::swap_ranges(data.begin(), data.begin() + 8, data.begin() + 64);
  CHECK(object_checksum(data.data(), data.size()) != one);
  std::swap_ranges(data.begin(), data.begin() + 8, data.begin() + 64);
  // The length is part of it: trailing zero bytes are not invisible.
  std::vector<uint8_t> zeros(16, 0);
  CHECK(object_checksum(zeros.data(), 8) != object_checksum(zeros.data(), 16));
  CHECK(object_checksum(data.data(), 0) == object_checksum(data.data(), 0, 4));
}

TEST_CASE("object checksum: concurrent callers share the hashing threads and agree") {
  std::vector<uint8_t> data(3 * checksum_piece_bytes * 8 + 7);
  std::mt19937_64 rng(11);
  for (auto& b : data)
    b = static_cast<uint8_t>(rng());
  const uint64_t want = object_checksum(data.data(), data.size(), 1);
  std::vector<uint64_t> got(4);
  std::vector<std::thread> callers;
  for (size_t t = 0; t < got.size(); ++t)
    callers.emplace_back([&, t] {
      for (int k = 0; k < 20; ++k)
        got[t] = object_checksum(data.data(), data.size());
    });
  for (auto& c : callers)
    c.join();
  for (auto g : got)
    CHECK(g == want);
}

TEST_CASE("host store: evict_all drops every committed unpinned object, keeps pins and reservations") {
  std::vector<uint8_t> arena(1 << 16);
  host_store store(arena.data(), arena.size());
  auto key = [](uint64_t h) { return object_key{1, h, 0}; };
  size_t offset = 0;
  object_header h;
  for (uint64_t k = 1; k <= 4; ++k) {
    h.boundary_hash = k;
    h.layout_fingerprint = 1;
    REQUIRE(store.reserve(key(k), h, 100, offset) == reserve_status::ok);
    if (k != 4)
      REQUIRE(store.commit(key(k)));
  }
  object_header got;
  REQUIRE(store.pin(key(2), 1, 2, got, offset) == pin_status::ok);
  CHECK(store.evict_all() == 2); // 1 and 3; 2 is pinned, 4 is still being written
  CHECK_FALSE(store.contains(key(1)));
  CHECK(store.contains(key(2)));
  CHECK_FALSE(store.contains(key(3)));
  CHECK(store.commit(key(4)));
  CHECK(store.stats().evictions_total == 2);
  CHECK(store.check_invariants().empty());
}

namespace {

object_ref ref_for(uint64_t hash, size_t data_bytes = slot_data) {
  // The key's namespace is the fingerprint a pin expects and its hash the boundary (NOTE(verify)).
  return {object_key{fingerprint, hash, static_cast<uint8_t>(object_kind::kv_chunk)}, 64, 256, 4, data_bytes};
}

store_step step_of(uint64_t seq) {
  store_step s;
  s.header.epoch = 1;
  s.header.seq = seq;
  return s;
}

} // namespace

TEST_CASE("host store apply: pins_summed answers with the recorded checksum and does not hash") {
  fixture f(4 * slot);
  auto reserve = step_of(1);
  reserve.reserves.push_back(ref_for(51));
  const auto r = apply(&f.store, reserve).done;
  REQUIRE(r.reserves.size() == 1);
  const uint64_t recorded = object_checksum(f.arena.data() + r.reserves[0].data_offset, slot_data);
  auto commit = step_of(2);
  commit.commits.push_back(ref_for(51).key);
  apply(&f.store, commit);
  CHECK(f.store.test_corrupt(ref_for(51).key, 5));
  auto pin = step_of(3);
  pin.pins.push_back(ref_for(51));
  pin.pins_summed = true;
  const auto done = apply(&f.store, pin).done;
  REQUIRE(done.pins.size() == 1);
  CHECK(done.pins[0].ok);
  CHECK(done.pins[0].checksum == recorded); // the reader's scatter finds its sum differs
  pin.pins_summed = false;                   // a hashing pin hashes, and finds the flipped byte
  CHECK(apply(&f.store, pin).done.pins[0].status == "bad_checksum");
}

TEST_CASE("host store apply: a step reserves, the next commits, and a pin then finds the object") {
  fixture f(4 * slot);
  auto reserve = step_of(1);
  reserve.reserves.push_back(ref_for(11));
  auto r = apply(&f.store, reserve);
  CHECK(r.done.header.seq == 1);
  REQUIRE(r.done.reserves.size() == 1);
  CHECK(r.done.reserves[0].ok);
  CHECK(r.done.reserves[0].status == "ok");
  CHECK(r.done.reserves[0].data_offset == header_bytes);
  CHECK(r.done.reserves[0].data_bytes == slot_data);
  CHECK(r.done.stats.reserves_total == 1);
  CHECK(apply(&f.store, store_contains{{ref_for(11).key}}).present == std::vector<uint8_t>{0}); // writing

  auto commit = step_of(2);
  commit.commits.push_back(ref_for(11).key);
  commit.pins.push_back(ref_for(11));
  auto c = apply(&f.store, commit);
  CHECK(c.commits_unreserved.empty());
  CHECK(c.done.stats.commits_total == 1);
  REQUIRE(c.done.pins.size() == 1);
  CHECK(c.done.pins[0].ok);
  CHECK(c.done.pins[0].data_offset == header_bytes);
  auto found = apply(&f.store, store_contains{{ref_for(11).key, ref_for(12).key, ref_for(11).key}});
  CHECK(found.present == std::vector<uint8_t>{1, 0, 1});
  CHECK(found.num_leading_committed == 1);
  CHECK(f.store.check_invariants() == "");
}

TEST_CASE("host store apply: a pin whose header describes other tokens is refused and unpinned") {
  fixture f(4 * slot);
  auto put = step_of(1);
  put.reserves.push_back(ref_for(21));
  REQUIRE(apply(&f.store, put).done.reserves.at(0).ok);
  auto commit = step_of(2);
  commit.commits.push_back(ref_for(21).key);
  apply(&f.store, commit);

  auto other = ref_for(21);
  other.first_token = 128; // same key, other tokens
  auto pin = step_of(3);
  pin.pins.push_back(other);
  auto p = apply(&f.store, pin);
  REQUIRE(p.done.pins.size() == 1);
  CHECK_FALSE(p.done.pins[0].ok);
  CHECK(p.done.pins[0].status == "object describes other tokens");
  // Unpinned again: evict_all can drop it, and unpinning it is a note, not a pin count below zero.
  auto evict = step_of(4);
  evict.unpins.push_back(other.key);
  evict.evict_all = true;
  auto e = apply(&f.store, evict);
  CHECK(e.unpins_unpinned.size() == 1);
  CHECK(e.done.num_evicted == 1);
  CHECK(f.store.check_invariants() == "");
}

TEST_CASE("host store apply: orders naming nothing come back as notes, not errors") {
  fixture f(4 * slot);
  auto s = step_of(1);
  s.commits.push_back(ref_for(31).key);
  s.unpins.push_back(ref_for(32).key);
  auto r = apply(&f.store, s);
  REQUIRE(r.commits_unreserved.size() == 1);
  CHECK(r.commits_unreserved[0].hash == 31);
  REQUIRE(r.unpins_unpinned.size() == 1);
  CHECK(r.unpins_unpinned[0].hash == 32);
  CHECK(r.done.stats.commits_total == 0);
}

TEST_CASE("host store apply: with no arena pins answer missing, reserves no_space, stats stay zero") {
  auto s = step_of(5);
  s.commits.push_back(ref_for(41).key);
  s.pins.push_back(ref_for(41));
  s.reserves.push_back(ref_for(42));
  s.evict_all = true;
  auto r = apply(nullptr, s);
  CHECK(r.done.header.seq == 5);
  REQUIRE(r.done.pins.size() == 1);
  CHECK_FALSE(r.done.pins[0].ok);
  CHECK(r.done.pins[0].status == "missing");
  REQUIRE(r.done.reserves.size() == 1);
  CHECK_FALSE(r.done.reserves[0].ok);
  CHECK(r.done.reserves[0].status == "no_space");
  CHECK(r.done.num_evicted == 0);
  CHECK(r.done.stats.bytes_capacity == 0);
  CHECK(r.commits_unreserved.empty()); // nothing is stored, so nothing to note
  auto found = apply(nullptr, store_contains{{ref_for(41).key, ref_for(42).key}});
  CHECK(found.present == std::vector<uint8_t>{0, 0});
  CHECK(found.num_leading_committed == 0);
}

TEST_CASE("host store: a hold (P/D lease) keeps an object from eviction until released; pins and holds nest") {
  fixture f(3 * slot);
  for (uint64_t h = 1; h <= 3; ++h)
    f.put(h); // LRU: 1 2 3
  CHECK_FALSE(f.store.hold(key(9))); // nothing stored under 9
  REQUIRE(f.reserve(8, slot_data) == reserve_status::ok);
  CHECK_FALSE(f.store.hold(key(8))); // being written: nothing to hold yet
  REQUIRE(f.store.abort(key(8)));
  f.put(1); // LRU: 2 3 1 (the reserve of 8 evicted the first 1)
  REQUIRE(f.store.hold(key(2)));
  REQUIRE(f.store.hold(key(2))); // two leases of one object
  CHECK(f.store.check_invariants() == "");
  // 2 is the oldest but held: the next reserves evict 3, then 1.
  f.put(4);
  CHECK(f.store.contains(key(2)));
  CHECK_FALSE(f.store.contains(key(3)));
  // A pin of a held object verifies and nests with the holds; unpinned, it stays held.
  REQUIRE(f.pin(2) == pin_status::ok);
  REQUIRE(f.store.unpin(key(2)));
  REQUIRE(f.store.release_hold(key(2)));
  CHECK(f.store.check_invariants() == "");
  f.put(5);
  CHECK(f.store.contains(key(2)));
  CHECK_FALSE(f.store.contains(key(1)));
  // The last hold: 2 is evictable again, as the most recently used (LRU: 4 5 2).
  REQUIRE(f.store.release_hold(key(2)));
  CHECK_FALSE(f.store.release_hold(key(2)));
  f.put(6);
  CHECK_FALSE(f.store.contains(key(4)));
  CHECK(f.store.contains(key(2)));
  f.put(7);
  f.put(10);
  CHECK_FALSE(f.store.contains(key(2)));
  CHECK(f.store.check_invariants() == "");
  // evict_all leaves held objects in place.
  REQUIRE(f.store.hold(key(7)));
  CHECK(f.store.evict_all() == 2); // 6 and 10
  CHECK(f.store.contains(key(7)));
  CHECK_FALSE(f.store.contains(key(10)));
  CHECK(f.store.check_invariants() == "");
}
