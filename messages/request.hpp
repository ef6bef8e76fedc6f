// Messages between the frontend and the scheduler: completion requests, streamed tokens,
// results, failures, and admin evictions.
// Each struct's fields are declared once, by name, in its ORDO_FIELDS line (messages/fields.hpp),
// which generates CAF's inspect and the named visitor the Cap'n Proto converter uses. Adding a
// field: the member, its entry in the ORDO_FIELDS line, and the field appended to the struct in
// messages/ordo.capnp (camelCase of the C++ name).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "messages/fields.hpp"

namespace ordo {

// Part of completion_request: prompt positions [offset, offset + length) are placeholders for
// an image (or other media) whose content hash is `hash`; it folds into the prefix block hashes.
struct media_span {
  int32_t offset = 0;
  int32_t length = 0;
  uint64_t hash = 0;
};

ORDO_FIELDS(media_span, offset, length, hash)

// Part of completion_request: generation stops once the sampled tokens end with `token_ids`
// (OpenAI's `stop`); the stop tokens are left out of the output.
struct stop_sequence {
  std::vector<int32_t> token_ids;
};

ORDO_FIELDS(stop_sequence, token_ids)

// frontend → scheduler: one validated completion request (prompt already tokenized).
struct completion_request {
  uint64_t request_id = 0;
  std::vector<int32_t> prompt;
  int32_t max_tokens = 16;
  float temperature = 0.0f;
  uint64_t seed = 0;
  bool stream = false;
  std::string cache_salt;
  std::vector<media_span> media; // sorted by offset, not overlapping, inside the prompt
  std::vector<stop_sequence> stop;
  // P/D (kv_transfer_params, docs/pd.md): `remote_decode`: this node prefills for a decode node;
  // `kv_peer`: "HOST:PORT" of the prefill node whose host tier holds this prompt's KV and state;
  // `kv_transfer_id`: the prefill node's transfer id, whose lease the decode node releases.
  bool remote_decode = false;
  std::string kv_peer;
  std::string kv_transfer_id;
};

ORDO_FIELDS(completion_request, request_id, prompt, max_tokens, temperature, seed, stream,
            cache_salt, media, stop, remote_decode, kv_peer, kv_transfer_id)

// scheduler → frontend: one sampled token of a streaming request, in order.
struct completion_chunk {
  uint64_t request_id = 0;
  int32_t index = 0; // 0-based position among the completion tokens
  int32_t token_id = 0;
};

ORDO_FIELDS(completion_chunk, request_id, index, token_id)

// What limited a request's resume point: the class of its `reason` sentence, and the label of
// ordo_resume_reasons_total (few and stable values, unlike the sentence).
enum class resume_reason : uint8_t {
  cold,             // no prefix block of the prompt cached
  prompt_end,       // hit capped below the prompt's last token
  block_evicted,    // the cached prefix stops at an evicted block
  no_checkpoint,    // hybrid: KV cached but no READY state checkpoint that far
  interval_zero,    // hybrid with cache.checkpoint_interval = 0
  short_prompt,     // shorter than one block plus one token
  host_tier,        // resumed from the host tier
  host_load_failed, // a host-tier load failed: recomputed
};

// The metric label, e.g. "prompt_end".
inline const char* to_string(resume_reason r) {
  switch (r) {
  case resume_reason::cold: return "cold";
  case resume_reason::prompt_end: return "prompt_end";
  case resume_reason::block_evicted: return "block_evicted";
  case resume_reason::no_checkpoint: return "no_checkpoint";
  case resume_reason::interval_zero: return "interval_zero";
  case resume_reason::short_prompt: return "short_prompt";
  case resume_reason::host_tier: return "host_tier";
  case resume_reason::host_load_failed: return "host_load_failed";
  }
  return "?";
}

// scheduler → frontend: the finished request.
struct completion_result {
  uint64_t request_id = 0;
  std::vector<int32_t> token_ids;
  std::string finish_reason; // "stop" (EOS or a stop sequence) | "length" (max_tokens)
  int32_t prompt_tokens = 0;
  int32_t cached_tokens = 0;  // prompt tokens whose KV was reused (all tiers)
  int32_t resume_at = 0;      // prompt tokens not recomputed
  int32_t from_hbm = 0;       // tokens of KV taken from each tier
  int32_t from_cpu = 0;
  int32_t from_store = 0;
  std::string reason;         // why the resume point is where it is
  uint64_t logits_digest = 0; // chain over every sampled position's logits
  int32_t num_preemptions = 0;
  double duration_ms = 0.0;
  double first_token_ms = 0.0;        // arrival → first sampled token
  std::vector<float> inter_token_ms;  // gaps between consecutive sampled tokens
  resume_reason reason_kind = resume_reason::cold; // the class of `reason`
  int32_t from_peer = 0; // prompt tokens pulled from a prefill node (P/D, kv_peer)
  // P/D prefill (remote_decode): the objects held for the decode node and for how long.
  int32_t lease_objects = 0;
  int64_t lease_ms = 0;
};

ORDO_FIELDS(completion_result, request_id, token_ids, finish_reason, prompt_tokens, cached_tokens,
            resume_at, from_hbm, from_cpu, from_store, reason, logits_digest, num_preemptions,
            duration_ms, first_token_ms, inter_token_ms, reason_kind, from_peer, lease_objects, lease_ms)

// scheduler → frontend: the request could not be served.
struct completion_failed {
  uint64_t request_id = 0;
  std::string message;
  std::string type; // OpenAI-style error type, e.g. "invalid_request_error"
};

ORDO_FIELDS(completion_failed, request_id, message, type)

// frontend → scheduler: the client of `request_id` went away; the request leaves the batch at
// the next step and its blocks go back through the normal release.
struct cancel_request {
  uint64_t request_id = 0;
};

ORDO_FIELDS(cancel_request, request_id)

// frontend → scheduler: drop every unreferenced cached block / checkpoint of `tier`
// ("cpu": every unpinned object of the host tier).
struct evict_request {
  uint64_t request_id = 0; // the HTTP request it answers
  std::string tier;        // "hbm" | "cpu"
};

ORDO_FIELDS(evict_request, request_id, tier)

// scheduler → frontend: the eviction of evict_request has been applied.
struct evict_result {
  uint64_t request_id = 0;
  std::string tier;
  int32_t num_blocks = 0;
};

ORDO_FIELDS(evict_result, request_id, tier, num_blocks)

} // namespace ordo
