// Messages between the frontend and the scheduler: completion requests, streamed tokens,
// results, failures, and admin evictions.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace ordo {

// Part of completion_request: prompt positions [offset, offset + length) are placeholders for
// an image (or other media) whose content hash is `hash`; it folds into the prefix block hashes.
struct media_span {
  int32_t offset = 0;
  int32_t length = 0;
  uint64_t hash = 0;
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, media_span& x) {
  return f(x.offset, x.length, x.hash);
}

// Part of completion_request: generation stops once the sampled tokens end with `token_ids`
// (OpenAI's `stop`); the stop tokens are left out of the output.
struct stop_sequence {
  std::vector<int32_t> token_ids;
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, stop_sequence& x) {
  return f(x.token_ids);
}

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
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, completion_request& x) {
  return f(x.request_id, x.prompt, x.max_tokens, x.temperature, x.seed, x.stream, x.cache_salt,
           x.media, x.stop);
}

// scheduler → frontend: one sampled token of a streaming request, in order.
struct completion_chunk {
  uint64_t request_id = 0;
  int32_t index = 0; // 0-based position among the completion tokens
  int32_t token_id = 0;
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, completion_chunk& x) {
  return f(x.request_id, x.index, x.token_id);
}

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
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, completion_result& x) {
  return f(x.request_id, x.token_ids, x.finish_reason, x.prompt_tokens, x.cached_tokens,
           x.resume_at, x.from_hbm, x.from_cpu, x.from_store, x.reason, x.logits_digest,
           x.num_preemptions, x.duration_ms, x.first_token_ms, x.inter_token_ms, x.reason_kind);
}

// scheduler → frontend: the request could not be served.
struct completion_failed {
  uint64_t request_id = 0;
  std::string message;
  std::string type; // OpenAI-style error type, e.g. "invalid_request_error"
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, completion_failed& x) {
  return f(x.request_id, x.message, x.type);
}

// frontend → scheduler: the client of `request_id` went away; the request leaves the batch at
// the next step and its blocks go back through the normal release.
struct cancel_request {
  uint64_t request_id = 0;
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, cancel_request& x) {
  return f(x.request_id);
}

// frontend → scheduler: drop every unreferenced cached block / checkpoint of `tier`
// ("cpu": every unpinned object of the host tier).
struct evict_request {
  uint64_t request_id = 0; // the HTTP request it answers
  std::string tier;        // "hbm" | "cpu"
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, evict_request& x) {
  return f(x.request_id, x.tier);
}

// scheduler → frontend: the eviction of evict_request has been applied.
struct evict_result {
  uint64_t request_id = 0;
  std::string tier;
  int32_t num_blocks = 0;
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, evict_result& x) {
  return f(x.request_id, x.tier, x.num_blocks);
}

} // namespace ordo
