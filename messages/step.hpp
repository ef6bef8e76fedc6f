// The step protocol between the scheduler and the model runner (docs/architecture.md §3).
// A step_plan carries clears, loads, restores, the forward, checkpoint copies and saves, in the
// order they run; the runner enforces that order with events.
#pragma once

#include <cstdint>
#include <vector>

#include "messages/common.hpp"

namespace ordo {

// One request's share of a forward.
struct scheduled_request {
  uint64_t request_id = 0;
  int32_t state_slot = -1;            // recurrent-state slot, -1 for a model without state
  bool reset_state = false;           // zero the slot before the first token (fresh start at 0)
  int32_t first_position = 0;         // position of token_ids[0]
  std::vector<int32_t> token_ids;     // tokens computed this step
  std::vector<int32_t> block_table;   // every block the request holds, in order
  bool sample = false;                // sample after the last token of this step
  float temperature = 0.0f;
  uint64_t seed = 0;
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, scheduled_request& x) {
  return f(x.request_id, x.state_slot, x.reset_state, x.first_position, x.token_ids,
           x.block_table, x.sample, x.temperature, x.seed);
}

// A state image moved between a request's state slot and page units: a restore reads the
// units into the slot, a checkpoint copy writes the slot into the units.
struct state_image_copy {
  uint64_t request_id = 0;
  int32_t state_slot = -1;
  int32_t position = 0;       // tokens the image has consumed (its boundary)
  std::vector<int32_t> units; // page units holding the image, in image order
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, state_image_copy& x) {
  return f(x.request_id, x.state_slot, x.position, x.units);
}

// One object moved between the host tier's memory and page units (DESIGN §2.1 loads / saves).
// kind kv_chunk: `units` are the request's blocks of the object, in order (segment-major object,
// runtime/kv_codec.hpp); a negative unit is a block not moved (shared from the HBM index).
// kind state_image: the image's units, in image order (unit-major, runtime/page_units.hpp).
struct unit_transfer {
  uint64_t request_id = 0;
  uint8_t kind = 0;          // object_kind
  uint64_t data_offset = 0;  // in the store's arena
  uint64_t data_bytes = 0;
  std::vector<int32_t> units;
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, unit_transfer& x) {
  return f(x.request_id, x.kind, x.data_offset, x.data_bytes, x.units);
}

// scheduler → model_runner: one engine step. Sent only after the previous step's step_done.
// The runner orders it as DESIGN §2.1: clears, loads, restores, forward, checkpoint copies,
// saves. A plan may have loads and no forward (every request in it parked on a load).
struct step_plan {
  command_header header;
  std::vector<scheduled_request> requests;
  std::vector<int32_t> clears;                    // units given back: fill before any reuse
  std::vector<state_image_copy> restores;         // units → slot, before the forward (after loads)
  std::vector<state_image_copy> checkpoint_copies; // slot → units, after the forward
  std::vector<unit_transfer> loads;               // host → units, after the clears
  std::vector<unit_transfer> saves;               // units → host, after the forward and copies
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, step_plan& x) {
  return f(x.header, x.requests, x.clears, x.restores, x.checkpoint_copies, x.loads, x.saves);
}

// One sampled token and the digest of the logits it was sampled from.
struct sampled_token {
  uint64_t request_id = 0;
  int32_t position = 0;        // position of the row whose logits were sampled
  int32_t token_id = 0;
  uint64_t logits_digest = 0;  // xxh64 of the fp32 logits row
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, sampled_token& x) {
  return f(x.request_id, x.position, x.token_id, x.logits_digest);
}

// model_runner → scheduler: the step with the same header has completed on the device.
struct step_done {
  command_header header;
  std::vector<sampled_token> samples;
  double device_ms = 0.0; // from enqueue to the completion callback
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, step_done& x) {
  return f(x.header, x.samples, x.device_ms);
}

} // namespace ordo
