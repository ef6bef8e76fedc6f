// The step protocol between the scheduler and the model runner (docs/architecture.md §3).
// A step_plan carries clears, loads, restores, the forward, checkpoint copies and saves, in the
// order they run; the runner enforces that order with events.
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

ORDO_FIELDS(scheduled_request, request_id, state_slot, reset_state, first_position, token_ids,
            block_table, sample, temperature, seed)

// A state image moved between a request's state slot and page units: a restore reads the
// units into the slot, a checkpoint copy writes the slot into the units.
struct state_image_copy {
  uint64_t request_id = 0;
  int32_t state_slot = -1;
  int32_t position = 0;       // tokens the image has consumed (its boundary)
  std::vector<int32_t> units; // page units holding the image, in image order
};

ORDO_FIELDS(state_image_copy, request_id, state_slot, position, units)

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

ORDO_FIELDS(unit_transfer, request_id, kind, data_offset, data_bytes, units)

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

ORDO_FIELDS(step_plan, header, requests, clears, restores, checkpoint_copies, loads, saves)

// One sampled token and the digest of the logits it was sampled from.
struct sampled_token {
  uint64_t request_id = 0;
  int32_t position = 0;        // position of the row whose logits were sampled
  int32_t token_id = 0;
  uint64_t logits_digest = 0;  // xxh64 of the fp32 logits row
};

ORDO_FIELDS(sampled_token, request_id, position, token_id, logits_digest)

// model_runner → scheduler: the step with the same header has completed on the device.
struct step_done {
  command_header header;
  std::vector<sampled_token> samples;
  double device_ms = 0.0; // from enqueue to the completion callback
  // One object checksum per plan.saves entry, in plan order, summed by the gathers from the bytes
  // they wrote (runtime/checksum.hpp); empty when the runner does not sum (the store hashes).
  std::vector<uint64_t> save_checksums;
  // One object checksum per plan.loads entry, summed by the scatters from the host bytes they read
  // (a skipped block's too); empty when the runner does not sum. The scheduler checks them
  // against the objects' recorded checksums before the parked requests run.
  std::vector<uint64_t> load_checksums;
};

ORDO_FIELDS(step_done, header, samples, device_ms, save_checksums, load_checksums)

} // namespace ordo
