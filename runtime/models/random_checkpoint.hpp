// `ordo model random`: a random Hugging Face checkpoint with the dims of a real config.json, for GPU
// benchmarks on real shapes and for tests (issue 37 item 8).
//
// The config is copied (num_hidden_layers, and layer_types when present, cut to `num_layers` when > 0;
// a qwen3_5 config is cut inside text_config); model.safetensors holds exactly the family's table
// tensors (no vision tower, no MTP head): BF16, except A_log in F32 as Qwen ships it. Values come
// from a counter-based generator keyed by (seed, tensor name, element), so the same arguments write
// the same bytes: matrices uniform with variance 1/fan_in, embeddings variance 1, zero-centred norm
// weights in [-0.5, 0.5], the GDN's plain norm in [0.5, 1.5], A_log in [-2, 1], dt_bias in [-1, 1].
// Tensors are generated and written in chunks, so a real-size checkpoint needs no copy in memory.
// Runs on: the caller's thread.
#pragma once

#include <cstdint>
#include <string>

namespace ordo {

struct random_checkpoint_options {
  std::string like_config; // a config.json
  std::string out_dir;     // created if missing; config.json and model.safetensors are written there
  int32_t num_layers = 0;  // > 0: keep the first num_layers layers
  uint64_t seed = 0;
};

// Throws model_load_error (a bad config, naming it) or safetensors_error (an I/O fault, naming the file).
// Returns the bytes of model.safetensors written.
uint64_t write_random_checkpoint(const random_checkpoint_options& options);

} // namespace ordo
