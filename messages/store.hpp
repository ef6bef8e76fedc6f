// The store protocol: objects keyed by (namespace, hash, kind).
// Each struct's fields are declared once, by name, in its ORDO_FIELDS line (messages/fields.hpp),
// which generates CAF's inspect and the named visitor the Cap'n Proto converter uses. Adding a
// field: the member, its entry in the ORDO_FIELDS line, and the field appended to the struct in
// messages/ordo.capnp (camelCase of the C++ name).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "messages/common.hpp"
#include "messages/fields.hpp"

namespace ordo {

// A store's granularity (store.granularity, SPEC D2) as its answers carry it: "chunk" stores and
// serves whole chunks only (state images on the chunk grid); "" (the in-process store) and
// "block" are block granularity.
inline bool chunk_granularity(const std::string& g) { return g == "chunk"; }

// Kind of a stored object (DESIGN §4).
enum class object_kind : uint8_t { kv_chunk = 0, state_image = 1 };

struct object_key {
  uint64_t namespace_id = 0;
  uint64_t hash = 0;
  uint8_t kind = 0; // object_kind
};

ORDO_FIELDS(object_key, namespace_id, hash, kind)

// connector → store: which of `keys` are committed? Answered by store_contains_done with the
// length of the leading run of committed keys.
struct store_contains {
  std::vector<object_key> keys;
};

ORDO_FIELDS(store_contains, keys)

struct store_contains_done {
  int32_t num_leading_committed = 0;
  std::vector<uint8_t> present; // per key: 1 if committed (not verified: pin verifies)
  std::string granularity;      // the store's (SPEC D2): "" or "block" = block, "chunk" = chunk
};

ORDO_FIELDS(store_contains_done, num_leading_committed, present, granularity)

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

ORDO_FIELDS(store_stats, num_objects, bytes_used, bytes_capacity, commits_total, evictions_total,
            pins_total, misses_total, checksum_failures_total, header_failures_total,
            rejected_total, reserves_total, aborts_total)

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

ORDO_FIELDS(object_ref, key, first_token, tokens, num_blocks, data_bytes)

// The store's answer to one pin or reserve: where the object's data lies in the store's arena.
struct store_grant {
  object_key key;
  bool ok = false;
  std::string status; // "ok", or why not (reserve_status / pin_status names)
  uint64_t data_offset = 0;
  uint64_t data_bytes = 0;
  uint64_t checksum = 0; // a pin: the object's recorded checksum
};

ORDO_FIELDS(store_grant, key, ok, status, data_offset, data_bytes, checksum)

// P/D (docs/pd.md): a store server holds the committed ones of `keys` (kept from eviction, not
// pinned for reading) under `transfer_id` until a release names it or `lease_ms` pass.
struct store_lease {
  std::string transfer_id;
  std::vector<object_key> keys;
  int64_t lease_ms = 0;
};

ORDO_FIELDS(store_lease, transfer_id, keys, lease_ms)

// connector → store, once per connector step. Applied in this order: commits (saves whose device
// copy completed), aborts, unpins (loads completed), releases (leases a decode node is done
// with), evict_all (every unpinned committed object), pins (loads to issue), reserves (saves to
// issue), leases. Every pin, reserve and lease is answered in store_step_done, in order. Leases
// and releases are a store server's (the in-process store answers every lease with 0 objects).
struct store_step {
  command_header header;
  std::vector<object_key> commits;
  std::vector<object_key> aborts;
  std::vector<object_key> unpins;
  std::vector<object_ref> pins;
  std::vector<object_ref> reserves;
  bool evict_all = false;
  std::vector<store_lease> leases;
  std::vector<std::string> releases; // transfer ids
  // Empty, or one per commit: the object checksum the gather computed from the bytes it wrote,
  // which the commit records instead of hashing the data again.
  std::vector<uint64_t> commit_checksums;
  // The reader's scatters sum each pinned object and check it against the grant's checksum, so
  // the pins check headers only (no host hashing); an object a scatter found corrupt comes back
  // in unpins_corrupt, unpinned and dropped.
  bool pins_summed = false;
  std::vector<object_key> unpins_corrupt;
};

ORDO_FIELDS(store_step, header, commits, aborts, unpins, pins, reserves, evict_all, leases, releases,
            commit_checksums, pins_summed, unpins_corrupt)

struct store_step_done {
  command_header header;
  std::vector<store_grant> pins;
  std::vector<store_grant> reserves;
  store_stats stats;
  int32_t num_evicted = 0;
  std::string granularity; // the store's (SPEC D2): "" or "block" = block, "chunk" = chunk
  std::vector<int32_t> leased; // per lease: the objects it holds
};

ORDO_FIELDS(store_step_done, header, pins, reserves, stats, num_evicted, granularity, leased)

// Test hook (node::test_corrupt_store): flips one data byte of every committed object of `kind`.
// Answered with the number of objects changed.
struct store_corrupt {
  uint8_t kind = 0;
};

ORDO_FIELDS(store_corrupt, kind)

// --- store server sessions (`ordo store`, docs/store.md) ---------------------------------------

// node → store server, the first request of a session: who is asking and which wire it speaks.
// Answered by store_welcome; a refusal has ok = false and `why` naming both values.
struct store_hello {
  std::string wire;          // "ordo-wire-1" (the CAF app identifier)
  uint64_t wire_digest = 0;  // store_wire_digest(): digest of messages/ordo.capnp
  std::string engine_id;     // the node's engine identity (runtime/engine_identity.hpp)
  uint64_t namespace_id = 0;
  std::string boot_id;       // /proc/sys/kernel/random/boot_id of the node's host
  std::string challenge;     // 32 random bytes (hex) the welcome's proof covers (docs/security.md)
  std::string role;          // "kv_both" | "kv_producer" | "kv_consumer" (read only); "" = kv_both
  std::string mac;           // store_hello_mac(): HMAC with the deployment secret over the fields above
  // security.tls = "on" (docs/security.md): the node's certificate (PEM) and its key's signature
  // (hex) over the same fields; the store takes the session's rights from the certificate's role.
  std::string certificate;
  std::string signature;
};

ORDO_FIELDS(store_hello, wire, wire_digest, engine_id, namespace_id, boot_id, challenge, role, mac, certificate,
            signature)

// store server → node: the session is open (ok) or refused (why), and the store's own identity.
struct store_welcome {
  bool ok = false;
  std::string why;          // empty when ok
  std::string store_id;     // the store's engine identity
  uint64_t arena_bytes = 0; // size of the store's shared arena
  std::string granularity;  // "block" | "chunk" (store.granularity)
  uint64_t wire_digest = 0; // the store's
  std::string boot_id;      // the store's host
  std::string arena_socket; // abstract AF_UNIX name (no leading NUL) that hands out the arena's fd
  std::string proof;        // store_welcome_proof(): the store holds this deployment's secret
};

ORDO_FIELDS(store_welcome, ok, why, store_id, arena_bytes, granularity, wire_digest, boot_id, arena_socket, proof)

// --- bytes over the actor connection (store.transport = "tcp", docs/store.md) ------------------

// node → store server: `bytes` of the data of an object this session has pinned, from `offset`
// (within the object's data). Pieces of a few MiB. Answered by store_read_done.
struct store_read {
  object_key key;
  uint64_t offset = 0;
  uint64_t bytes = 0;
};

ORDO_FIELDS(store_read, key, offset, bytes)

struct store_read_done {
  object_key key;
  uint64_t offset = 0;
  std::vector<uint8_t> data;
};

ORDO_FIELDS(store_read_done, key, offset, data)

// node → store server: bytes of an object this session has reserved, written at `offset` within
// its data before the commit. Answered by store_write_done.
struct store_write {
  object_key key;
  uint64_t offset = 0;
  std::vector<uint8_t> data;
};

ORDO_FIELDS(store_write, key, offset, data)

struct store_write_done {
  object_key key;
  uint64_t offset = 0;
  uint64_t bytes = 0;
};

ORDO_FIELDS(store_write_done, key, offset, bytes)

} // namespace ordo
