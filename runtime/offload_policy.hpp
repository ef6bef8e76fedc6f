// The connector's core for the in-process host tier (DESIGN §2 connector, SPEC C1-C2, C5):
// which store keys a lookup probes and what the answers mean, and how a connector step becomes
// a store step (kv_role decides whether loads and saves are allowed at all).
// Keys: a KV chunk object is filed under the prefix hash of its last block (its first block is
// always on the chunk grid), a state image under the hash of the block that ends at its
// boundary; both in the node's namespace. Pure: no CAF.
#pragma once

#include <cstdint>
#include <string>

#include "messages/connector.hpp"
#include "messages/store.hpp"

namespace ordo {

struct offload_options {
  uint64_t namespace_id = 0;
  int32_t block_size = 64;
  int32_t chunk_size = 256;
  bool loads = true;  // kv_role kv_both or kv_consumer
  bool saves = true;  // kv_role kv_both or kv_producer
  std::string name = "offload";
  int64_t lease_ms = 0; // P/D prefill (pd.lease_ms): a lease order holds the prompt's objects this long
  // The node's scatters sum every load's checksum (runtime/step_executor.hpp): its pins ask the
  // store to check headers only, and each load grant carries the checksum the step must match.
  bool loads_summed = false;
};

class offload_policy {
public:
  explicit offload_policy(const offload_options& options);

  const offload_options& options() const { return opt_; }
  object_key kv_key(uint64_t block_hash) const;
  object_key state_key(uint64_t block_hash) const;

  // The keys a lookup asks the store about: for every full block j of the prompt (1-based), the
  // KV object and the state image filed under its hash, in that order (none if kv_role does not
  // load). A lease holds the same keys of its prompt (keys_of), whatever the role.
  store_contains probe(const connector_lookup& lookup) const;
  std::vector<object_key> keys_of(const std::vector<uint64_t>& block_hashes) const;
  // Reads the store's answer to probe(lookup): contiguous KV coverage from token 0 (whole
  // chunks, then at most one partial chunk starting on the chunk grid) and the state boundaries.
  // A store of granularity "chunk" (found.granularity, SPEC D2): whole chunks only and state
  // boundaries on the chunk grid only, both up to floor_chunk(P - 1), P = num_prompt_tokens.
  // The answer carries the store's granularity on to the scheduler.
  connector_lookup_done answer(const connector_lookup& lookup, const store_contains_done& found) const;

  // The store step for a connector step: finished saves committed or aborted, finished loads
  // unpinned, an eviction of every unpinned object if asked, loads pinned and saves reserved
  // (those kv_role allows; the rest are refused here), and each lease order as a store lease of
  // the keys a lookup of its prompt probes, named by its request id (the transfer id).
  store_step to_store(const connector_step& step) const;
  // Grants for every order of `step`, in order, from the store's answer to to_store(step); the
  // store's granularity travels on. (to_store cannot know it: it runs before the answer.)
  connector_step_done from_store(const connector_step& step, const store_step_done& done) const;

private:
  offload_options opt_;
};

} // namespace ordo
