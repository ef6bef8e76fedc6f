// `ordo model random --like PATH/config.json --out DIR [--layers N] [--seed S]`: a random checkpoint
// with a real config's dims (runtime/models/random_checkpoint.hpp).
#pragma once

#include "runtime/models/random_checkpoint.hpp"

namespace ordo {

// Prints "wrote DIR: N bytes of model.safetensors, family F" on stdout. Returns 0, or 2 with the
// refusal on stderr (a bad config names the file and the key; an I/O fault names the file).
int run_model_random(const random_checkpoint_options& options);

} // namespace ordo
