// Embedding row gather (token embeddings, PLE n-gram tables).
#pragma once

#include "kernels/kernel_args.hpp"

namespace ordo::cpu {

void embed(const embed_args& a);

} // namespace ordo::cpu
