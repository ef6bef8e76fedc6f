// Descriptions of the model's device buffers that other subsystems copy or clear: the KV arena
// (DESIGN §4: layer-major, per attention layer one region per page field) and the recurrent-state
// slots (per-request GDN conv/SSM state and PLE windows).
// Part of the kernel ABI (kernels/kernel_args.hpp): includes nothing from runtime/.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace ordo {

// Element type of a stored field. fp8 is OCP e4m3fn (bias 7, max 448, no infinities).
enum class elem_dtype : uint8_t { fp32, bf16, fp8_e4m3, i32 };
const char* to_string(elem_dtype d);
size_t elem_bytes(elem_dtype d);

// One page field of one attention layer. Block b owns rows [b*rows_per_block, (b+1)*rows_per_block)
// of the region, i.e. bytes [b*block_bytes(), (b+1)*block_bytes()). Most fields have one row per
// token (rows_per_block == block_size); index_compressed has one row per group of 4 tokens.
struct kv_field {
  int32_t layer = 0;       // model layer index
  std::string name;        // "k", "v", "k_scale", "v_scale", "index_raw", "index_compressed"
  elem_dtype dtype = elem_dtype::fp32;
  void* region = nullptr;  // device memory, num_blocks * block_bytes()
  size_t row_bytes = 0;
  int32_t rows_per_block = 0;
  uint8_t fill_byte = 0;   // a cleared unit holds this byte everywhere
  size_t block_bytes() const { return row_bytes * static_cast<size_t>(rows_per_block); }
};

// One contiguous piece of a state slot, in the documented image order.
struct state_segment {
  std::string name; // "gdn_conv", "gdn_ssm", "ple_window", "ple_conv"
  int32_t layer = -1; // -1: shared by all layers (ple_window)
  elem_dtype dtype = elem_dtype::fp32;
  size_t offset = 0;  // bytes from the slot's start
  size_t bytes = 0;
};

// Slot s lives at base + s * slot_bytes; zero bytes = the state of an empty prefix.
struct state_layout {
  void* base = nullptr; // device memory
  int32_t num_slots = 0;
  size_t slot_bytes = 0;  // aligned stride between slots
  size_t image_bytes = 0; // bytes that carry state (segments end), <= slot_bytes
  std::vector<state_segment> segments;
};

} // namespace ordo
