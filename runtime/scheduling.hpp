// The scheduler's core: request state machine, continuous batching, chunked prefill under a
// per-step token budget, decode, admission control and preemption, HBM prefix reuse.
// Pure: the scheduler actor feeds it events and sends what it puts in the outbox.
//
// Request states:
//   looking_up ──connector_lookup_done──► waiting ──grow ok──► running ──EOS/stop/max_tokens──► finished
//   (any state ──cancel, applied at the next pool step──► gone: released like a finished request)
//                                            ▲               │  ▲  │
//                                            │   (host-tier  ▼  │  │
//                                            │    hit) parked on load (one step: its loads land)
//                                            └──── preempted ◄─────┘ (a decode grow was refused)
// Engine loop (one command of each kind in flight at most):
//   idle ──next_pool_step()──► awaiting_pool ──on_pool_step_done()──► awaiting_step ──on_step_done()──► idle
//                                     │   └──(nothing to run)──► idle                ▲
//                                     └──(loads / saves to grant or finish)──► awaiting_connector
//                                          ──on_connector_step_done()──► awaiting_step (or idle)
// NOTE(host tier): a request resumed from the host tier is parked for one step whose plan carries
// its loads (and every clear issued so far) and no forward of it; its forward starts in the
// next step. Saves are granted before the plan that computes their bytes and run inside that
// step; they are committed (made visible) only after its step_done, in the next connector step.
// NOTE(order): a step_plan is built only from the pool_step_done of the same loop turn, and the
// next pool_step only after the step's step_done, so blocks are committed, released and reused
// strictly after the forward that wrote them has completed.
#pragma once

#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "messages/connector.hpp"
#include "messages/pool.hpp"
#include "messages/request.hpp"
#include "messages/step.hpp"
#include "runtime/sequence_check.hpp"

namespace ordo {

struct scheduler_options {
  int32_t block_size = 16;
  int32_t num_blocks = 512;
  int32_t max_batch_tokens = 512;
  int32_t max_num_seqs = 16;
  int32_t max_state_slots = 16; // used when has_recurrent_state
  bool has_recurrent_state = false;
  // Hybrid checkpoints (SPEC B3): 0 keeps none, -1 only the prompt-end anchor, > 0 also a
  // ladder rung at every multiple (already snapped down to a multiple of block_size).
  int32_t checkpoint_interval = 0;
  int32_t units_per_image = 0; // page units one state image takes
  std::vector<int32_t> eos_ids{257}; // a sampled one finishes the request ("stop")
  uint64_t namespace_id = 0;
  uint64_t epoch = 1;
  // Host tier (kv_transfer.connector = "offload"): objects of whole chunks of `chunk_size`
  // tokens (the prompt's last partial chunk under its exact blocks) and state images at the
  // prompt-end anchor and a rung at the prompt's end.
  bool offload = false;
  bool offload_loads = true; // kv_role allows loads
  bool offload_saves = true; // kv_role allows saves
  int32_t chunk_size = 256;
  uint64_t unit_bytes = 0;   // bytes of one page unit (a block across every field)
  // The store's granularity is learned from its answers (connector_lookup_done and
  // connector_step_done `granularity`, the latest wins; block until one says "chunk"). With a
  // "chunk" store (SPEC D2) only whole chunks are saved (no partial last chunk) and state images
  // only at checkpoint copies on the chunk grid up to the prompt's length.
  // The host tier is a store server (`ordo store`): results report its tokens as `from_store`
  // (from_cpu = 0) and reasons say "store"; stats count them in prompt_tokens_from_store.
  bool host_tier_is_store = false;
  // P/D connector (docs/pd.md). A remote_decode request keeps the prompt-end anchor image even
  // with checkpoint_interval = 0, and its result waits for the connector step that leases its
  // objects (after their commits), so its answer never names a transfer before it is pullable.
  // A kv_peer request may resume at a peer's state image even with checkpoint_interval = 0.
  bool pd = false;
  // Requests looking up or waiting for admission; beyond it a new request is refused with
  // completion_failed type "rate_limit_error" (HTTP 429). 0: unbounded.
  int32_t max_waiting = 0;
};

// Commands and replies produced by one call into the core, for the actor to send.
struct scheduler_outbox {
  std::vector<connector_lookup> lookups;
  std::vector<completion_chunk> chunks;
  std::vector<completion_result> results;
  std::vector<completion_failed> failures;
  std::vector<evict_result> evictions;
  bool empty() const {
    return lookups.empty() && chunks.empty() && results.empty() && failures.empty() && evictions.empty();
  }
};

struct scheduler_stats {
  int64_t num_requests = 0;
  int64_t num_finished = 0;
  int64_t num_preemptions = 0;
  int64_t prompt_tokens = 0;
  int64_t prompt_tokens_from_hbm = 0; // prompt tokens whose KV was reused from HBM
  int64_t prompt_tokens_computed = 0;
  int64_t generation_tokens = 0;
  int64_t num_steps = 0;
  int32_t num_waiting = 0;
  int32_t num_running = 0;
  int32_t num_free_blocks = 0;
  int32_t num_cached_blocks = 0;
  int64_t checkpoints_kept = 0;     // images made READY
  int64_t checkpoints_evicted = 0;
  int64_t checkpoints_restored = 0;
  int32_t num_images = 0;
  int32_t num_available_blocks = 0;
  int64_t prompt_tokens_from_cpu = 0; // prompt tokens whose KV was loaded from the host tier
  int64_t prompt_tokens_from_store = 0; // the same, when the host tier is a store server (host_tier_is_store)
  int64_t loads_total = 0;            // objects loaded
  int64_t load_failures_total = 0;    // objects whose load was refused (missing, corrupt): recomputed
  int64_t load_checksum_failures_total = 0; // of those, loaded and then found corrupt by the device's sum
  int64_t saves_total = 0;            // objects saved
  int64_t save_failures_total = 0;    // reserves refused (no space)
  int64_t bytes_loaded = 0;
  int64_t bytes_saved = 0;
  int64_t num_cancelled = 0;          // requests whose client went away before they finished
  int64_t num_rejected = 0;           // refused because max_waiting requests were queued
  // P/D decode (kv_peer requests): pulled from the prefill node, found nothing there (lease
  // expired, node gone, deadline), or its loads were refused (corrupt, evicted): recomputed.
  int64_t pd_pulls_ok = 0;
  int64_t pd_pulls_missed = 0;
  int64_t pd_pulls_failed = 0;
  store_stats store;                  // as of the last connector step
};

// Checkpoint positions of a prompt of `prompt_len` tokens (SPEC B3), ascending: ladder rungs at
// multiples of `interval` up to the prompt's end, and the anchor at floor_block(P - 1).
std::vector<int32_t> checkpoint_positions(int32_t prompt_len, int32_t block_size, int32_t interval);

// `interval` snapped down to a multiple of `block_size` (a positive interval below one block
// becomes one block); 0 and -1 are kept.
int32_t snap_checkpoint_interval(int32_t interval, int32_t block_size);

class scheduling {
public:
  explicit scheduling(const scheduler_options& options);
  ~scheduling();

  // A new request (frontend). Asks the connector first; the request waits for its answer.
  void add(const completion_request& request, double now_ms);
  void on_lookup_done(const connector_lookup_done& done);
  // Evict every unreferenced HBM block in the next pool step; answered in the outbox.
  void request_evict(const evict_request& request);
  // The client of `request_id` went away: the request leaves at the next pool step (it is in no
  // plan after the one in flight), its blocks and units go back through the normal release,
  // and it is answered with nothing. Unknown or finished ids are ignored.
  void cancel(uint64_t request_id);

  // When idle and there is anything to do, the next pool step (the loop turns to awaiting_pool).
  std::optional<pool_step> next_pool_step();
  // The step to run, or nothing (the loop turns back to idle). Throws std::logic_error on a
  // reply that does not answer the pool step in flight.
  std::optional<step_plan> on_pool_step_done(const pool_step_done& done);
  // After on_pool_step_done returned nothing: the connector step to send (the loop turns to
  // awaiting_connector), if the turn has transfers to grant or to finish.
  std::optional<connector_step> take_connector_step();
  // The plan of the turn, with the granted loads and saves, or nothing (back to idle). Throws
  // std::logic_error on a reply that does not answer the connector step in flight.
  std::optional<step_plan> on_connector_step_done(const connector_step_done& done);
  // Applies sampled tokens, finishes requests. Throws std::logic_error on a reply that does not
  // answer the step in flight.
  void on_step_done(const step_done& done, double now_ms);

  scheduler_outbox take_outbox();
  bool idle() const;
  bool has_work() const;
  const scheduler_stats& stats() const;

private:
  struct impl;
  std::unique_ptr<impl> impl_;
};

} // namespace ordo
