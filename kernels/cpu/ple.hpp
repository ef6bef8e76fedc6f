// Per-layer embeddings: hashed n-gram bucket of each row, with the per-request id window.
#pragma once

#include "kernels/kernel_args.hpp"

namespace ordo::cpu {

void ple_ngram(const ple_ngram_args& a);

} // namespace ordo::cpu
