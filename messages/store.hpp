// The store protocol: objects keyed by (namespace, hash, kind).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "messages/common.hpp"

namespace ordo {

// Kind of a stored object (DESIGN §4).
enum class object_kind : uint8_t { kv_chunk = 0, state_image = 1 };

struct object_key {
  uint64_t namespace_id = 0;
  uint64_t hash = 0;
  uint8_t kind = 0; // object_kind
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, object_key& x) {
  return f(x.namespace_id, x.hash, x.kind);
}

// connector → store: which of `keys` are committed? Answered by store_contains_done with the
// length of the leading run of committed keys.
struct store_contains {
  std::vector<object_key> keys;
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, store_contains& x) {
  return f(x.keys);
}

struct store_contains_done {
  int32_t num_leading_committed = 0;
  std::vector<uint8_t> present; // per key: 1 if committed (not verified: pin verifies)
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, store_contains_done& x) {
  return f(x.num_leading_committed, x.present);
}

// Occupancy of the store, for metrics.
// The store's own counters (runtime/host_store keeps exactly this struct).
struct store_stats {
  int64_t num_objects = 0;           // committed
  int64_t bytes_used = 0;            // reserved + committed, headers and alignment included
  int64_t bytes_capacity = 0;
  int64_t commits_total = 0;
  int64_t evictions_total = 0;
  int64_t pins_total = 0;            // pins answered ok
  int64_t misses_total = 0;          // pins that found nothing (absent, evicted or not committed)
  int64_t checksum_failures_total = 0;
  int64_t header_failures_total = 0;
  int64_t rejected_total = 0;        // reserves answered too_large or no_space
  int64_t reserves_total = 0;        // reserves answered ok
  int64_t aborts_total = 0;
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, store_stats& x) {
  return f(x.num_objects, x.bytes_used, x.bytes_capacity, x.commits_total, x.evictions_total, x.pins_total,
           x.misses_total, x.checksum_failures_total, x.header_failures_total, x.rejected_total, x.reserves_total,
           x.aborts_total);
}

// One stored object as the connector and the store describe it (DESIGN §4). A KV chunk object
// holds the full blocks [first_token, first_token + tokens) in segment-major, then block-major
// order and is filed under the hash of its last block; a state object holds the image of the
// state after `tokens` tokens, filed under the hash of the block that ends there.
struct object_ref {
  object_key key;
  int32_t first_token = 0;
  int32_t tokens = 0;
  int32_t num_blocks = 0; // KV: blocks; state: page units the image is laid over
  uint64_t data_bytes = 0;
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, object_ref& x) {
  return f(x.key, x.first_token, x.tokens, x.num_blocks, x.data_bytes);
}

// The store's answer to one pin or reserve: where the object's data lies in the store's arena.
struct store_grant {
  object_key key;
  bool ok = false;
  std::string status; // "ok", or why not (reserve_status / pin_status names)
  uint64_t data_offset = 0;
  uint64_t data_bytes = 0;
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, store_grant& x) {
  return f(x.key, x.ok, x.status, x.data_offset, x.data_bytes);
}

// connector → store, once per connector step. Applied in this order: commits (saves whose device
// copy completed), aborts, unpins (loads completed), evict_all (every unpinned committed object),
// pins (loads to issue), reserves (saves to issue). Every pin or reserve is answered in
// store_step_done, in order.
struct store_step {
  command_header header;
  std::vector<object_key> commits;
  std::vector<object_key> aborts;
  std::vector<object_key> unpins;
  std::vector<object_ref> pins;
  std::vector<object_ref> reserves;
  bool evict_all = false;
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, store_step& x) {
  return f(x.header, x.commits, x.aborts, x.unpins, x.pins, x.reserves, x.evict_all);
}

struct store_step_done {
  command_header header;
  std::vector<store_grant> pins;
  std::vector<store_grant> reserves;
  store_stats stats;
  int32_t num_evicted = 0;
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, store_step_done& x) {
  return f(x.header, x.pins, x.reserves, x.stats, x.num_evicted);
}

// Test hook (node::test_corrupt_store): flips one data byte of every committed object of `kind`.
// Answered with the number of objects changed.
struct store_corrupt {
  uint8_t kind = 0;
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, store_corrupt& x) {
  return f(x.kind);
}

} // namespace ordo
