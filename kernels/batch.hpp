// The inputs of one forward as the model sees them on the device. The model runner's step
// executor packs them into one pinned staging buffer, copies it to device memory on the `load`
// stream and makes `compute` wait for that copy before the forward (the upload edge).
// Part of the kernel ABI (kernels/kernel_args.hpp): includes nothing from runtime/.
#pragma once

#include <cstddef>
#include <cstdint>

namespace ordo {

// Tokens are grouped by request: request r owns rows [req_token_start[r], req_token_start[r+1]),
// at positions req_first_position[r] + i. Every pointer is device memory.
struct device_batch {
  // Host-side counts (known when the work is enqueued).
  int32_t num_tokens = 0;
  int32_t num_reqs = 0;
  int32_t num_samples = 0;
  int32_t block_table_len = 0; // total entries of block_tables
  int32_t max_position = -1;   // the largest position of any row; -1: not known on the host

  const int32_t* token_ids = nullptr;          // [num_tokens]
  const int32_t* positions = nullptr;          // [num_tokens]
  const int32_t* token_req = nullptr;          // [num_tokens] request index of each row
  const int32_t* slot_mapping = nullptr;       // [num_tokens] KV slot = block_id * block_size + offset
  const int32_t* req_token_start = nullptr;    // [num_reqs + 1]
  const int32_t* req_first_position = nullptr; // [num_reqs] position of the request's first row
  const int32_t* req_block_table_start = nullptr; // [num_reqs + 1] offsets into block_tables
  const int32_t* block_tables = nullptr;       // [block_table_len] physical block ids, in order
  const int32_t* req_state_slot = nullptr;     // [num_reqs] recurrent-state slot, -1 if the model has none
  const int32_t* req_reset_state = nullptr;    // [num_reqs] 1: zero the slot before the first row
  const int32_t* sample_rows = nullptr;        // [num_samples] row whose logits are sampled
  const float* sample_temperature = nullptr;   // [num_samples] 0 = greedy
  const uint64_t* sample_seed = nullptr;       // [num_samples] per-request seed
};

// Where the step executor finds what a forward produced (device memory owned by the model).
struct device_outputs {
  float* logits = nullptr;           // [num_samples × vocab] fp32 logits of the sampled rows
  int32_t* sampled_tokens = nullptr; // [num_samples]
};

} // namespace ordo
