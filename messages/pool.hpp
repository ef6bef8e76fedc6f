// The block pool protocol: one pool_step per engine step, sent by the scheduler before the
// step_plan it prepares, answered by pool_step_done with every touched request's block table.
// Each struct's fields are declared once, by name, in its ORDO_FIELDS line (messages/fields.hpp),
// which generates CAF's inspect and the named visitor the Cap'n Proto converter uses. Adding a
// field: the member, its entry in the ORDO_FIELDS line, and the field appended to the struct in
// messages/ordo.capnp (camelCase of the C++ name).
#pragma once

#include <cstdint>
#include <vector>

#include "messages/common.hpp"
#include "messages/fields.hpp"

namespace ordo {

// A full, computed block of a request entered into the HBM prefix index under `hash`.
struct block_commit {
  uint64_t request_id = 0;
  int32_t block_index = 0; // index in the request's block table
  uint64_t hash = 0;
};

ORDO_FIELDS(block_commit, request_id, block_index, hash)

// A prompt position where a state checkpoint may be kept, filed under the hash of the block
// that ends there.
struct checkpoint_position {
  int32_t position = 0;
  uint64_t hash = 0;
};

ORDO_FIELDS(checkpoint_position, position, hash)

// Page units reserved for the image at `position` (COPYING until the scheduler reports ready).
struct reserved_image {
  int32_t position = 0;
  uint64_t hash = 0;
  std::vector<int32_t> units;
};

ORDO_FIELDS(reserved_image, position, hash, units)

// Make `request_id` hold `total_blocks` blocks. For a request not yet known to the pool,
// `hashes` are its prompt's full-block hashes: the longest indexed chain, at most
// `max_hit_blocks` long, is shared first (a prefix hit), then fresh blocks are appended.
// All or nothing: on failure the request holds what it held before (nothing, if new).
// With `needs_state` (a hybrid model) a hit stops at the largest boundary that also has a READY
// state image, which is pinned for the restore; units are reserved for every checkpoint
// position above the hit that has no image yet. With `load_image_position` above the hit (a
// host-tier load will bring the state image there) and no image reserved by this grow at that
// position (another request is copying it, or it is READY but its KV is gone), the request gets
// private units for the load instead (`load_units`), given back with its blocks.
struct block_grow {
  uint64_t request_id = 0;
  std::vector<uint64_t> hashes;
  int32_t max_hit_blocks = 0;
  int32_t total_blocks = 0;
  bool needs_state = false;
  std::vector<checkpoint_position> checkpoints;
  int32_t units_per_image = 0;
  int32_t load_image_position = 0;
};

ORDO_FIELDS(block_grow, request_id, hashes, max_hit_blocks, total_blocks, needs_state, checkpoints,
            units_per_image, load_image_position)

// A request's pin on the image filed under `hash` (taken by a restore) is dropped.
struct image_unpin {
  uint64_t request_id = 0;
  uint64_t hash = 0;
};

ORDO_FIELDS(image_unpin, request_id, hash)

// scheduler → block_pool. Applied in this order: images_ready, unpins, image_aborts, commits,
// releases, evict, grows (in order).
struct pool_step {
  command_header header;
  std::vector<uint64_t> releases; // requests whose blocks are given back (finished, preempted)
  std::vector<block_commit> commits;
  bool evict_hbm = false;         // drop every unreferenced indexed block and READY image
  std::vector<block_grow> grows;
  std::vector<uint64_t> images_ready; // images whose checkpoint copy completed: COPYING → READY
  std::vector<image_unpin> unpins;
  // COPYING images a request will never copy (it resumed above them from the host tier): their
  // units are given back (and cleared) now rather than when the request ends.
  std::vector<image_unpin> image_aborts;
};

ORDO_FIELDS(pool_step, header, releases, commits, evict_hbm, grows, images_ready, unpins,
            image_aborts)

struct grow_result {
  uint64_t request_id = 0;
  bool ok = false;
  int32_t num_hit_blocks = 0;       // blocks shared from the prefix index (new requests)
  std::vector<int32_t> block_table; // the request's table after the grow
  int32_t kv_hit_blocks = 0;        // longest indexed chain (before state limited the hit)
  uint64_t restore_hash = 0;        // the pinned image the request resumes from (needs_state)
  std::vector<int32_t> restore_units;
  std::vector<reserved_image> reserved; // units for the checkpoints above the hit
  std::vector<int32_t> load_units;      // private units for a host-tier image load (see block_grow)
};

ORDO_FIELDS(grow_result, request_id, ok, num_hit_blocks, block_table, kv_hit_blocks, restore_hash,
            restore_units, reserved, load_units)

// block_pool → scheduler: the pool_step with the same header has been applied.
struct pool_step_done {
  command_header header;
  std::vector<grow_result> results; // one per grow, same order
  int32_t num_evicted = 0;
  int32_t num_free = 0;             // blocks neither held nor indexed
  int32_t num_cached = 0;           // indexed blocks no request holds (evictable)
  std::vector<int32_t> clears;      // units given back: to be cleared before they are written
  int32_t num_images_evicted = 0;
  int32_t num_images = 0;           // images held (COPYING or READY)
  int32_t num_available = 0;        // blocks a grow could get: free, evictable cached, idle image units
};

ORDO_FIELDS(pool_step_done, header, results, num_evicted, num_free, num_cached, clears,
            num_images_evicted, num_images, num_available)

} // namespace ordo
