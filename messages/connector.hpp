// The connector protocol: how many prefix tokens the offload tiers hold for a request, and the
// loads and saves of each engine step (DESIGN §2.1 steps 2 and 6).
// Each struct's fields are declared once, by name, in its ORDO_FIELDS line (messages/fields.hpp),
// which generates CAF's inspect and the named visitor the Cap'n Proto converter uses. Adding a
// field: the member, its entry in the ORDO_FIELDS line, and the field appended to the struct in
// messages/ordo.capnp (camelCase of the C++ name).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "messages/common.hpp"
#include "messages/store.hpp"
#include "messages/fields.hpp"

namespace ordo {

// scheduler → connector: which of these full-block hashes can a tier outside HBM provide?
struct connector_lookup {
  uint64_t request_id = 0;
  std::vector<uint64_t> hashes;
  int32_t num_prompt_tokens = 0;
  std::string peer; // P/D: "HOST:PORT" of the prefill node to look up in ("" = this node's tiers)
  std::string transfer_id; // P/D: the prefill node's lease of this prompt, released after the loads
};

ORDO_FIELDS(connector_lookup, request_id, hashes, num_prompt_tokens, peer, transfer_id)

// A KV chunk object the host tier holds for a prompt: blocks [first_block, first_block +
// num_blocks), filed under `hash` (the prefix hash of its last block).
struct kv_object {
  int32_t first_block = 0;
  int32_t num_blocks = 0;
  uint64_t hash = 0;
};

ORDO_FIELDS(kv_object, first_block, num_blocks, hash)

// connector → scheduler: prefix tokens each tier holds (0 for the `none` connector).
// `cpu_tokens` is the contiguous KV coverage from token 0 (whole chunks, then at most one
// partial chunk), before the full-prompt −1 rule (SPEC C2: the scheduler applies it).
struct connector_lookup_done {
  uint64_t request_id = 0;
  int32_t cpu_tokens = 0;
  int32_t store_tokens = 0;
  std::string connector; // name of the connector that answered
  std::vector<kv_object> cpu_chunks;          // the objects covering [0, cpu_tokens), in order
  std::vector<int32_t> cpu_state_positions;   // boundaries with a committed state image, ascending
  std::string granularity; // the store's (SPEC D2): "" or "block" = block, "chunk" = chunk
  bool from_peer = false;  // P/D: the coverage lies in the host tier of the lookup's peer
};

ORDO_FIELDS(connector_lookup_done, request_id, cpu_tokens, store_tokens, connector, cpu_chunks,
            cpu_state_positions, granularity, from_peer)

// One load (host → page units) or save (page units → host) a request wants.
struct transfer_order {
  uint64_t request_id = 0;
  object_ref object;
};

ORDO_FIELDS(transfer_order, request_id, object)

// A transfer of an earlier step that has completed on the device (its step_done arrived), or
// that was granted but not issued: saves are committed (ok) or aborted, loads unpinned.
struct transfer_result {
  uint64_t request_id = 0;
  object_key key;
  bool is_save = false;
  bool ok = false;
  bool summed = false;   // a save whose object checksum the gather computed: the commit uses it
  uint64_t checksum = 0;
  bool corrupt = false;  // a load whose scatter summed another checksum: the store drops the object
};

ORDO_FIELDS(transfer_result, request_id, key, is_save, ok, summed, checksum, corrupt)

// P/D prefill (docs/pd.md): hold what a lookup of this prompt finds for the decode node, under a
// lease named by the request id (the transfer id its answer carries).
struct lease_order {
  uint64_t request_id = 0;
  std::vector<uint64_t> hashes; // the prompt's full-block hashes, as in connector_lookup
  int32_t num_prompt_tokens = 0;
};

ORDO_FIELDS(lease_order, request_id, hashes, num_prompt_tokens)

// scheduler → connector, in a loop turn that has transfers to prepare or finish, after the
// pool step and before the step plan (seq contiguous). Leases apply after the commits.
struct connector_step {
  command_header header;
  std::vector<transfer_result> finished;
  std::vector<transfer_order> loads;
  std::vector<transfer_order> saves;
  bool evict_all = false; // POST /admin/evict {"tier":"cpu"}: drop every unpinned object first
  std::vector<lease_order> leases;
};

ORDO_FIELDS(connector_step, header, finished, loads, saves, evict_all, leases)

// The connector's answer to one order: granted (store memory pinned or reserved at
// data_offset) or refused with the reason. `copies`: a save a multi connector fans out to more
// than one leaf is also written at these offsets, by the same step.
struct transfer_grant {
  uint64_t request_id = 0;
  object_key key;
  bool ok = false;
  std::string status;
  uint64_t data_offset = 0;
  uint64_t data_bytes = 0;
  std::vector<uint64_t> copies;
  // A load the scatter verifies: the store checked the header only, and `checksum` is the
  // object's recorded one (a mismatch fails the load after its step: nothing reads it).
  bool summed = false;
  uint64_t checksum = 0;
};

ORDO_FIELDS(transfer_grant, request_id, key, ok, status, data_offset, data_bytes, copies, summed, checksum)

// The connector's answer to a lease_order: how many objects the lease holds, and for how long
// (0 objects: nothing of the prompt is stored, or this connector holds no leases).
struct lease_grant {
  uint64_t request_id = 0;
  int32_t num_objects = 0;
  int64_t lease_ms = 0;
};

ORDO_FIELDS(lease_grant, request_id, num_objects, lease_ms)

// connector → scheduler: one grant per order, in order.
struct connector_step_done {
  command_header header;
  std::vector<transfer_grant> loads;
  std::vector<transfer_grant> saves;
  store_stats stats;
  int32_t num_evicted = 0; // objects dropped by evict_all
  std::string granularity; // the store's (SPEC D2): "" or "block" = block, "chunk" = chunk
  std::vector<lease_grant> leases; // one per lease order, in order
};

ORDO_FIELDS(connector_step_done, header, loads, saves, stats, num_evicted, granularity, leases)

} // namespace ordo
