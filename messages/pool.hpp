// The block pool protocol: one pool_step per engine step, sent by the scheduler before the
// step_plan it prepares, answered by pool_step_done with every touched request's block table.
#pragma once

#include <cstdint>
#include <vector>

#include "messages/common.hpp"

namespace ordo {

// A full, computed block of a request entered into the HBM prefix index under `hash`.
struct block_commit {
  uint64_t request_id = 0;
  int32_t block_index = 0; // index in the request's block table
  uint64_t hash = 0;
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, block_commit& x) {
  return f(x.request_id, x.block_index, x.hash);
}

// Make `request_id` hold `total_blocks` blocks. For a request not yet known to the pool,
// `hashes` are its prompt's full-block hashes: the longest indexed chain, at most
// `max_hit_blocks` long, is shared first (a prefix hit), then fresh blocks are appended.
// All or nothing: on failure the request holds what it held before (nothing, if new).
struct block_grow {
  uint64_t request_id = 0;
  std::vector<uint64_t> hashes;
  int32_t max_hit_blocks = 0;
  int32_t total_blocks = 0;
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, block_grow& x) {
  return f(x.request_id, x.hashes, x.max_hit_blocks, x.total_blocks);
}

// scheduler → block_pool. Applied in field order: releases, commits, evict, grows (in order).
struct pool_step {
  command_header header;
  std::vector<uint64_t> releases; // requests whose blocks are given back (finished, preempted)
  std::vector<block_commit> commits;
  bool evict_hbm = false;         // drop every unreferenced indexed block
  std::vector<block_grow> grows;
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, pool_step& x) {
  return f(x.header, x.releases, x.commits, x.evict_hbm, x.grows);
}

struct grow_result {
  uint64_t request_id = 0;
  bool ok = false;
  int32_t num_hit_blocks = 0;       // blocks shared from the prefix index (new requests)
  std::vector<int32_t> block_table; // the request's table after the grow
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, grow_result& x) {
  return f(x.request_id, x.ok, x.num_hit_blocks, x.block_table);
}

// block_pool → scheduler: the pool_step with the same header has been applied.
struct pool_step_done {
  command_header header;
  std::vector<grow_result> results; // one per grow, same order
  int32_t num_evicted = 0;
  int32_t num_free = 0;             // blocks neither held nor indexed
  int32_t num_cached = 0;           // indexed blocks no request holds (evictable)
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, pool_step_done& x) {
  return f(x.header, x.results, x.num_evicted, x.num_free, x.num_cached);
}

} // namespace ordo
