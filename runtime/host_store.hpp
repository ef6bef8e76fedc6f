// The host-memory tier's core (DESIGN §2 store, §4 objects; SPEC C1, C6): objects keyed by
// (namespace, hash, kind) in one arena of host memory the owner provides (pinned on a GPU
// device, so device gathers and scatters reach it directly; plain memory on the CPU device).
//
// Object life:
//   reserve ──► WRITING (invisible: contains() and pin() do not see it) ──commit──► COMMITTED
//      └──────────────abort────────────► gone                  │
//   COMMITTED ──pin (header and checksum verified)──► pinned (never evicted) ──unpin──► COMMITTED
//   COMMITTED ──hold (a P/D lease; not verified)──► held (never evicted) ──release_hold──► COMMITTED
//   COMMITTED, unpinned and unheld ──LRU victim of a reserve that does not fit──► gone
// An object is stored at one offset of the arena: a 64-byte-aligned object_header, then its data
// (64-byte aligned). The header is written by commit(), with the checksum of the data
// (runtime/checksum.hpp: an xxh64 tree hashed by several threads).
// NOTE(verify): pin() reads the header back from the arena and checks magic, kind, layout
// fingerprint and boundary hash against the reader's expectation (its other fields against the
// copy kept at commit), then the checksum of the data; any mismatch drops the object and the
// reader treats it as a miss (never loaded). An object that already has readers is not dropped
// under them: a nested pin only checks the header and fails alone.
// NOTE(no-partial-evict): a reserve evicts only when evicting every unpinned committed object
// would make room; one answered no_space leaves the store as it was.
// The store actor's one door is apply() below: a whole store_step (or a store_contains) in,
// its answer out, so the actor only checks (epoch, seq), logs and replies.
// Pure: no CAF, no device. Not thread-safe: the store actor owns it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <list>
#include <map>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "messages/compare.hpp"
#include "messages/store.hpp"

namespace ordo {

// What the stored bytes mean, checked again when they are read (SPEC C6).
struct object_header {
  uint64_t magic = 0;              // object_magic once committed
  uint8_t kind = 0;                // object_kind
  uint64_t layout_fingerprint = 0; // namespace digest (covers the page and state layouts)
  uint64_t boundary_hash = 0;      // prefix hash of the block that ends at the object's end
  int32_t first_token = 0;         // tokens before the object's first block
  int32_t tokens = 0;              // tokens the object covers (KV) or the image consumed (state)
  int32_t num_blocks = 0;          // KV chunk: full blocks in the object; state: page units
  uint64_t data_bytes = 0;
  uint64_t checksum = 0;           // object_checksum of the data bytes
};
inline constexpr uint64_t object_magic = 0x31626f2d6f64726full; // "ordo-ob1" little endian
inline constexpr size_t object_alignment = 64;

struct object_key_hash {
  size_t operator()(const object_key& k) const {
    return static_cast<size_t>(k.namespace_id * 0x9e3779b97f4a7c15ull ^ k.hash ^ (uint64_t{k.kind} << 56));
  }
};

enum class reserve_status : uint8_t {
  ok,
  exists,    // committed already, or being written by another reservation: nothing to do
  too_large, // larger than the whole arena
  no_space,  // does not fit even after evicting every unpinned committed object
};
const char* to_string(reserve_status s);

enum class pin_status : uint8_t {
  ok,
  missing,            // never stored, evicted, or not committed yet
  bad_checksum,       // data changed since commit: dropped
  bad_header,         // magic, kind, fingerprint or boundary differ from what the reader expects: dropped
};
const char* to_string(pin_status s);

class host_store {
public:
  // `arena` of `capacity_bytes` stays owned by the caller and must outlive the store.
  host_store(uint8_t* arena, size_t capacity_bytes);

  // Arena bytes an object of `data_bytes` takes: its header and data, each 64-byte aligned.
  static size_t object_span(size_t data_bytes);

  // Reserves room for `data_bytes` of data under `key`; `header` describes it (kind and
  // data_bytes are taken from `key` and `data_bytes`; checksum and magic are filled by commit).
  // Evicts LRU-first when needed. On ok, `data_offset` is the data's offset in the arena.
  reserve_status reserve(const object_key& key, const object_header& header, size_t data_bytes,
                         size_t& data_offset);
  // Makes a reservation visible: records the checksum of its data and writes its header. The
  // checksum is `summed` when the writer computed it from the bytes it wrote (a GPU gather does),
  // else the store hashes the data. False if `key` has no reservation.
  bool commit(const object_key& key, std::optional<uint64_t> summed = std::nullopt);
  // Drops a reservation (its write failed or was never made). False if there is none.
  bool abort(const object_key& key);
  // Records who committed `key` (a store server: the session's engine id), so a report of its
  // data being wrong names the writer (docs/security.md). False if `key` is not committed.
  bool set_committer(const object_key& key, std::string committer);
  // Who committed `key` ("" = this process, or unknown); nullptr if it is not stored.
  const std::string* committer_of(const object_key& key) const;

  // True if `key` is committed. Does not verify (pin does) and does not touch the LRU.
  bool contains(const object_key& key) const;
  // Verifies and pins a committed object for reading; on ok, `header` and `data_offset` describe
  // it and it becomes the most recently used. Pins nest. With `hash_data` false the reader
  // verifies the data itself (its scatter sums the checksum, then unpin or unpin_corrupt): only
  // the header is checked here. A hashing pin hashes unless a hashing pin of the same pinned
  // period already did.
  pin_status pin(const object_key& key, uint64_t expected_fingerprint, uint64_t expected_boundary,
                 object_header& header, size_t& data_offset, bool hash_data = true);
  // Drops one pin. False if `key` is not pinned.
  bool unpin(const object_key& key);
  // Drops one pin of an object whose reader found its data wrong: counted as a checksum failure,
  // refused to every later pin, and dropped once nobody pins or holds it. False if not pinned.
  bool unpin_corrupt(const object_key& key);
  // Keeps a committed object from eviction without reading it (a P/D lease holds what a decode
  // node will pin); holds nest. False if `key` is not committed.
  bool hold(const object_key& key);
  // Drops one hold. False if `key` is not held (it may have been dropped by a failed pin).
  bool release_hold(const object_key& key);
  // Evicts every committed, unpinned object (POST /admin/evict {"tier":"cpu"}), or only those
  // of one namespace (a store server evicting for one node); returns how many. Pinned objects
  // and reservations stay.
  int32_t evict_all(std::optional<uint64_t> only_namespace = std::nullopt);

  uint8_t* arena() const { return arena_; }
  const store_stats& stats() const { return stats_; }
  // Checks every internal invariant; returns a description of the first violation or "".
  std::string check_invariants() const;

  // Test hook: flips one byte of a committed object's data (at data_byte % data_bytes).
  // False if `key` is not committed.
  bool test_corrupt(const object_key& key, size_t data_byte);
  // Test hook: test_corrupt on the middle byte of every committed object of `kind`; returns how
  // many were changed.
  int32_t test_corrupt_all(uint8_t kind) {
    int32_t changed = 0;
    for (auto& [key, obj] : objects_)
      if (obj.committed && key.kind == kind && test_corrupt(key, static_cast<size_t>(obj.header.data_bytes / 2)))
        ++changed;
    return changed;
  }

private:
  struct object {
    size_t offset = 0;      // header offset in the arena
    size_t span = 0;        // bytes taken in the arena (header + data, aligned)
    size_t data_offset = 0;
    object_header header;
    bool committed = false;
    std::string committer; // set_committer: who wrote it
    int32_t pins = 0;
    int32_t holds = 0;
    bool hashed = false;  // a hashing pin verified the data since pins last went from 0
    bool corrupt = false; // a reader found the data wrong: no more pins, dropped when idle
    bool on_lru = false;
    std::list<object_key>::iterator lru_pos;
  };

  bool allocate(size_t span, size_t& offset);
  void release_range(size_t offset, size_t span);
  void drop(const object_key& key);
  void to_lru_if_idle(const object_key& key, object& o);

  uint8_t* arena_;
  size_t capacity_;
  std::map<size_t, size_t> free_; // offset → length, coalesced
  std::unordered_map<object_key, object, object_key_hash> objects_;
  std::list<object_key> lru_; // committed unpinned, front = least recently used
  store_stats stats_;
  int64_t num_dropped_ = 0; // committed objects dropped as corrupt (for check_invariants)
};

// apply(store_step)'s answer plus the orders that named nothing, for the actor to log (the
// core does not log). Neither changes the reply: the connector already counts the step done.
struct store_step_applied {
  store_step_done done;
  std::vector<object_key> commits_unreserved; // commit of an object with no reservation
  std::vector<object_key> unpins_unpinned;    // unpin of an object that is not pinned (or corrupt)
};

// What makes a store step unusable ("" if nothing): commit_checksums neither empty nor one per
// commit. apply() throws std::invalid_argument with it; a store server refuses the step.
std::string store_step_problem(const store_step& step);

// Applies one store step in the order messages/store.hpp gives. A pin whose stored header
// describes other tokens than its order is unpinned again and refused.
// NOTE(no-arena): `store` null (connector none) stores nothing: pins answer missing, reserves
// no_space, stats stay zero.
// `evict_namespace`: evict_all drops only that namespace's objects (a store server's session).
store_step_applied apply(host_store* store, const store_step& step,
                         std::optional<uint64_t> evict_namespace = std::nullopt);
// Which keys are committed, and the length of the leading committed run; all absent if `store` is null.
store_contains_done apply(const host_store* store, const store_contains& query);

} // namespace ordo
