// The model: presets of DESIGN §3, deterministic seeded weights, the KV arena, recurrent-state
// slots and the forward pass, enqueued on a device stream through a kernel table.
// Runs on: constructed on the node's startup thread; enqueue_* called from the model runner's
// thread; the work itself runs on the device's streams.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "kernels/batch.hpp"
#include "kernels/kernel_args.hpp"
#include "kernels/kv_layout.hpp"
#include "runtime/device.hpp"

namespace ordo {

enum class model_preset : uint8_t { dense, gdn_hybrid, qsa_gdn_ple };
enum class model_size : uint8_t { tiny, b1 };
enum class kv_dtype : uint8_t { fp32, bf16, fp8 };

const char* to_string(model_preset p);
const char* to_string(model_size s);
const char* to_string(kv_dtype d);

struct hf_checkpoint;

struct model_options {
  model_preset preset = model_preset::qsa_gdn_ple;
  // A loaded Hugging Face checkpoint (model.path, runtime/models/): its weights and dims instead of
  // the preset's seeded ones (preset, size and seed are then unused). The model lets go of it once
  // the weights are uploaded (model::options() then holds none; dims() keeps its digest).
  std::shared_ptr<const hf_checkpoint> checkpoint;
  model_size size = model_size::tiny;
  uint64_t seed = 0;
  kv_dtype kv = kv_dtype::fp32;
  int32_t block_size = 16;
  int32_t num_blocks = 512;
  int32_t max_batch_tokens = 512; // rows of one forward
  int32_t max_state_slots = 64;   // concurrent requests with recurrent state
  matmul_mode matmul = matmul_mode::exact;
  weight_dtype weights = weight_dtype::fp32; // bf16: the matmul weights held as bf16 (matrix units)
};

enum class layer_kind : uint8_t { attention, sparse_attention, gdn };

// Shape facts the scheduler and the runner need.
struct model_geometry {
  int32_t vocab_size = 258;  // 256 bytes + BOS + EOS
  int32_t bos_id = 256;      // -1: none (a checkpoint's prompts are taken as given)
  std::vector<int32_t> eos_ids{257}; // a sampled one ends the request
  int32_t max_context = 0;   // longest sequence a request may reach
  std::vector<layer_kind> layers;
  bool has_recurrent_state = false; // any GDN layer or PLE
};

class kernel_table;
struct model_dims;

// What the uploaded weights take on the device: every tensor, and of those the embedding table,
// which a step reads by rows rather than whole (so a decode step streams bytes − embedding_bytes).
struct weight_footprint {
  uint64_t bytes = 0;
  uint64_t embedding_bytes = 0;
};

class model {
public:
  // Builds the weights from options.seed (or takes options.checkpoint's), uploads them, allocates the KV arena, state slots,
  // workspace and output buffers on `dev`. Blocks until the upload completes.
  model(const model_options& options, device& dev);
  ~model();
  model(const model&) = delete;
  model& operator=(const model&) = delete;

  const model_options& options() const;
  const model_geometry& geometry() const;

  // Enqueues the forward of `batch` on `stream`: writes K/V of every row into its KV slot,
  // advances each request's recurrent state, and leaves fp32 logits of the sample rows in
  // outputs().logits, then samples into outputs().sampled_tokens (greedy when temperature is 0,
  // otherwise seeded by (sample_seed, position)). Bitwise identical for a request whatever the
  // rest of the batch holds and however its prefill was split.
  void enqueue_forward(stream_kind stream, const device_batch& batch);

  device_outputs outputs() const;

  // Sizes of the preset or the checkpoint (runtime/model_presets.hpp).
  const model_dims& dims() const;
  weight_footprint weights() const;
  // The KV arena: every page field of every attention layer, layer-major, in declaration order.
  const std::vector<kv_field>& kv_fields() const;
  // The recurrent-state slots (empty segments and num_slots 0 when the model has no state).
  const state_layout& state_slots() const;

private:
  struct impl;
  std::unique_ptr<impl> impl_;
};

} // namespace ordo
