// The store protocol: objects keyed by (namespace, hash, kind).
#pragma once

#include <cstdint>
#include <vector>

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
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, store_contains_done& x) {
  return f(x.num_leading_committed);
}

// Occupancy of the store, for metrics.
struct store_stats {
  int64_t num_objects = 0;
  int64_t bytes_used = 0;
  int64_t bytes_capacity = 0;
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, store_stats& x) {
  return f(x.num_objects, x.bytes_used, x.bytes_capacity);
}

} // namespace ordo
